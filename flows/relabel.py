"""Relabel: the scheduled re-labeling deployment — lm-evaluation-harness over every (query, model) pair of
the configured pool that has no label of the lm-eval source yet (new queries, a new model, a killed run).

A thin, parameter-only wrapper (paths and names, so the Prefect UI and schedules can drive it) around
flows/label.py, which plans only the missing pairs, fans out one task per (model, shard) and writes
each chunk in its own transaction.
"""
from __future__ import annotations

from prefect import flow

import cr2_flows  # noqa: F401  (Prefect loads this file by path: the package's offline environment first, cr2/core/env.py)
from cr2.config import load_config


@flow(name="cr2-relabel", log_prints=True)
def relabel_flow(config_path: str | None = None, home: str | None = None, models: list[str] | None = None,
                 benchmarks: list[str] | None = None, backend: str | None = None, limit: int | None = None) -> dict:
    """Label what is missing for the configured pool (or the given models/benchmarks); returns run summaries."""
    from cr2_flows.label import run_labeling

    result = run_labeling(load_config(config_path), home, models=models, benchmarks=benchmarks, backend=backend,
                          limit=limit)
    return {"runs": result}
