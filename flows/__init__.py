"""The Prefect flows. A worker imports a flow without the `cr2` command, so importing this package first sets the
offline / no-telemetry environment (cr2/core/env.py), before any flow module loads torch or Prefect's settings."""
from cr2.core.env import apply_offline_env

apply_offline_env()
