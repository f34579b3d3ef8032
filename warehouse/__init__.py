"""The DuckDB warehouse and its GX suites. Importing this package first sets the offline / no-telemetry
environment (cr2/core/env.py: GX analytics among it), for scripts that read a warehouse without the `cr2` command."""
from cr2.core.env import apply_offline_env

apply_offline_env()
