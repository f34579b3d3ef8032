"""The one place where cr2 switches off every network access and telemetry of its dependencies.

`import cr2` sets nothing: each entry point calls `apply_offline_env()` before it imports anything else — the
`cr2` command (cr2_cli/__init__.py), the flows/, tasks/ and warehouse/ packages (a Prefect worker imports a flow
without the command line; each deployment's entrypoint file, which Prefect loads by path, imports flows/ first),
benchmarks/_common.py and tests/conftest.py — so every one of them runs offline: the Hugging Face hub and datasets
never reach out, Prefect sends no telemetry, and GX stays quiet (tests/test_env.py checks each, before torch loads).
A value already set by the user wins (setdefault), so a GPU machine with hub access can opt back in
(e.g. `HF_HUB_OFFLINE=0 cr2 label ...`).
"""
from __future__ import annotations

import os

OFFLINE_ENV: dict[str, str] = {
    "HF_HUB_OFFLINE": "1",  # transformers / sentence-transformers / lm-eval: no hub lookups
    "HF_DATASETS_OFFLINE": "1",  # datasets: no HEAD request on every load
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",  # Prefect server telemetry (and its sqlite lock noise)
    "DO_NOT_TRACK": "1",  # Prefect client telemetry opt-out
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    # the ephemeral server can take > 20 s (Prefect's default limit) to start on a busy 2-core machine
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
    "TOKENIZERS_PARALLELISM": "false",
    "GX_ANALYTICS_ENABLED": "false",
}


# OpenMP threads with no work sleep instead of spinning: where more threads are runnable than there are cores (fits
# started ahead beside the flow, a busy machine), a spinning thread takes the core a working one needs and a
# 2-thread fit runs several times slower. How threads wait never changes a number (cr2/routers/fitting.py). It binds only
# before torch loads OpenMP, hence here, applied by each entry point before its first import of torch.
THREAD_ENV: dict[str, str] = {"OMP_WAIT_POLICY": "PASSIVE"}


def apply_offline_env() -> None:
    """Set the offline/no-telemetry switches and the thread wait policy unless the user set them already."""
    for key, value in {**OFFLINE_ENV, **THREAD_ENV}.items():
        os.environ.setdefault(key, value)
