"""Prepare: everything a router learns from, for every query in the warehouse.

1. embeddings — e(x), all-MiniLM-L6-v2 (only new or changed queries are embedded),
2. splits     — train / dev / val / test, seeded and stable when queries are added,
3. states     — channel states ξ under the configured, versioned state distribution,
4. labels     — the default SIMULATED correctness labels; or MEASURED ones imported from published
                model outputs when the config has `labels.measured` (configs/mmlu-pro-measured.yaml);
                any other labels.source must already cover every (query, model) pair,
5. costs      — latency, energy and normalised cost c_m(x, ξ) per (query, model).

Each step is a cached Prefect task whose key covers its inputs' content, its config sections and its
code, so a second run with nothing changed does no work, and a new state distribution recomputes only
states and costs.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from tasks.common import bind
from tasks.measured import import_measured_labels_task, measured_labels_key
from tasks.prepare import (
    SIMULATED_SOURCES,
    assign_splits_task,
    check_label_source,
    compute_costs_task,
    costs_key,
    embed_key,
    embed_queries,
    labels_key,
    sample_states_task,
    simulate_labels_task,
    splits_key,
    states_key,
)
from warehouse.db import Warehouse


def _step(task, key_fn, config: Config, home: Path) -> dict:
    with Warehouse(home) as wh:
        key = key_fn(config, wh)
    state = bind(task, home)(config, str(home), key, return_state=True)
    return {**state.result(), "cached": state.name == "Cached"}


def prepare(config: Config, home: Path) -> dict:
    """Run the prepare stage inside the current flow; returns each step's summary (with `cached`)."""
    out = {
        "embeddings": _step(embed_queries, embed_key, config, home),
        "splits": _step(assign_splits_task, splits_key, config, home),
        "states": _step(sample_states_task, states_key, config, home),
    }
    if config.labels.measured is not None:
        out["labels"] = _step(import_measured_labels_task, measured_labels_key, config, home)
    elif config.labels.source in SIMULATED_SOURCES:
        out["labels"] = _step(simulate_labels_task, labels_key, config, home)
    with Warehouse(home, read_only=True) as wh:
        check_label_source(config, wh)
    out["costs"] = _step(compute_costs_task, costs_key, config, home)
    return out


@flow(name="cr2-prepare", log_prints=True)
def prepare_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2.config import load_config
    from warehouse.db import default_home

    return prepare(load_config(config_path), Path(home) if home else default_home())
