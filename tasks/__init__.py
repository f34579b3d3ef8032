"""The Prefect tasks. Importing this package first sets the offline / no-telemetry environment (cr2/core/env.py), for
the scripts and workers that import a task without the `cr2` command or flows/."""
from cr2.core.env import apply_offline_env

apply_offline_env()
