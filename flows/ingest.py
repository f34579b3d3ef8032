"""Ingest: the real benchmark questions land in the warehouse.

Reads the selected benchmark files (data/benchmarks/*.parquet), counts prompt tokens L_in(x) with the
Qwen3 tokenizer, validates the rows with the `queries` Great Expectations suite and writes `queries`
and `models` in one transaction. Cached across runs: nothing changed → nothing recomputed.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from cr2_tasks.common import run_stage
from cr2_tasks.ingest import INGEST


def ingest(config: Config, home: Path) -> dict:
    """Run the ingest stage inside the current flow; returns the per-benchmark summary."""
    return run_stage(INGEST, config, home)


@flow(name="cr2-ingest", log_prints=True)
def ingest_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2.config import load_config
    from cr2_warehouse.db import default_home

    return ingest(load_config(config_path), Path(home) if home else default_home())
