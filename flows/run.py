"""cr2 run: the whole pipeline as one flow in one process.

ingest → prepare → train → calibrate → evaluate → report. Each stage is a cached, validated Prefect
task, so a warm re-run with nothing changed does almost nothing. One process means the ephemeral
Prefect server (13–26 s to start) is paid once.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import load_config
from flows.ingest import ingest


@flow(name="cr2-run", log_prints=True)
def run_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from warehouse.db import default_home

    config = load_config(config_path)
    h = Path(home) if home else default_home()
    summary: dict = {"ingest": ingest(config, h)}
    return summary
