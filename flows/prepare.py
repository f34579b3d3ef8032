"""Prepare: everything a router learns from, for every query in the warehouse.

1. embeddings — e(x), all-MiniLM-L6-v2 (only new or changed queries are embedded),
2. splits     — train / dev / val / test, seeded and stable when queries are added,
3. labels     — the default SIMULATED correctness labels; or MEASURED ones imported from published
                model outputs when the config has `labels.measured` (configs/mmlu-pro-measured.yaml);
                any other labels.source must already cover every (query, model) pair,
4. states     — channel states ξ under the configured, versioned state distribution,
5. costs      — latency, energy and normalised cost c_m(x, ξ) per (query, model).

What does not depend on ξ comes first, so on a new state distribution (a re-calibration) the steps that are
new — states and costs — run last, one after the other, and nothing cached waits behind them.

Each step is a cached Prefect task whose key covers its inputs' content, its config sections and its
code, so a second run with nothing changed does no work, and a new state distribution recomputes only
states and costs.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from cr2_tasks.common import run_stage
from cr2_tasks.measured import MEASURED_LABELS
from cr2_tasks.prepare import COSTS, EMBEDDINGS, LABELS, SIMULATED_SOURCES, SPLITS, STATES, check_label_source
from cr2_warehouse.db import Warehouse


def prepare(config: Config, home: Path) -> dict:
    """Run the prepare stage inside the current flow; returns each step's summary (with `cached`)."""
    out = {"embeddings": run_stage(EMBEDDINGS, config, home), "splits": run_stage(SPLITS, config, home)}
    if config.labels.measured is not None:
        out["labels"] = run_stage(MEASURED_LABELS, config, home)
    elif config.labels.source in SIMULATED_SOURCES:
        out["labels"] = run_stage(LABELS, config, home)
    with Warehouse(home, read_only=True) as wh:
        check_label_source(config, wh)
    out["states"] = run_stage(STATES, config, home)
    out["costs"] = run_stage(COSTS, config, home)
    return out


@flow(name="cr2-prepare", log_prints=True)
def prepare_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2.config import load_config
    from cr2_warehouse.db import default_home

    return prepare(load_config(config_path), Path(home) if home else default_home())
