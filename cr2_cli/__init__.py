"""The `cr2` command line. Importing it first sets the offline / no-telemetry environment (cr2/core/env.py), before any
command module loads torch, Prefect or the Hugging Face libraries."""
from cr2.core.env import apply_offline_env

apply_offline_env()
