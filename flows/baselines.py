"""Baselines: fit the paper's comparison routers (§VII-A) on train (tuned on dev) and record their test p̂.

Cached: refitting happens only when the train/dev/test rows, the baselines config, the router catalogues or
the routers' code changed. A cached result whose saved routers were deleted is recomputed.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from cr2_tasks.baselines import BASELINES
from cr2_tasks.common import run_stage


def fit_baselines(config: Config, home: Path) -> dict:
    """Fit every configured baseline (cached) and record its test predictions: {"routers": name → artefact}."""
    return run_stage(BASELINES, config, home)


@flow(name="cr2-baselines", log_prints=True)
def baselines_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2.config import load_config
    from cr2_warehouse.db import default_home

    return fit_baselines(load_config(config_path), Path(home) if home else default_home())
