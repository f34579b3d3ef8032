"""A copied or moved home works on its own: the warehouse records its checkpoints relative to the home."""
from __future__ import annotations

import os
import shutil

import pytest

from cr2_tasks.common import home_relative, in_home
from cr2_warehouse.db import Warehouse


def test_paths_inside_the_home_are_recorded_relative_and_others_absolute(tmp_path):
    home = tmp_path / "home"
    assert home_relative(home, home / "cache" / "artifacts" / "gate-1.pt") == "cache/artifacts/gate-1.pt"
    assert in_home(home, "cache/artifacts/gate-1.pt") == home / "cache" / "artifacts" / "gate-1.pt"
    outside = tmp_path / "elsewhere" / "gate-1.pt"
    assert home_relative(home, outside) == str(outside.resolve())
    assert in_home(home, str(outside)) == outside


@pytest.mark.slow
def test_a_moved_home_routes_with_its_own_checkpoints(small_config, home, tmp_path, monkeypatch):
    from cr2_tasks.calibrate import calibrate_cr2
    from cr2_tasks.ingest import ingest_queries
    from cr2_tasks.prepare import (assign_splits_task, compute_costs_task, embed_queries, sample_states_task,
                               simulate_labels_task)
    from cr2_cli.online import load_online_router
    from cr2_tasks.train import train_cr2

    cfg = small_config.model_copy(update={"teacher": small_config.teacher.model_copy(update={"epochs": 1}),
                                          "gate": small_config.gate.model_copy(update={"epochs": 1})})
    ingest_queries.fn(cfg, str(home))
    for i, step in enumerate((embed_queries, assign_splits_task, sample_states_task, simulate_labels_task,
                              compute_costs_task)):
        step.fn(cfg, str(home))
    session_cache = os.environ.get("CR2_CACHE")  # the session's encoder cache, kept for routing below
    monkeypatch.delenv("CR2_CACHE", raising=False)  # checkpoints go to <home>/cache, as by default
    trained = train_cr2.fn(cfg, str(home))
    calibrate_cr2.fn(cfg, str(home), trained)
    with Warehouse(home, read_only=True) as wh:
        paths = wh.df("SELECT kind, path FROM artifacts ORDER BY kind")
    assert paths["path"].str.startswith("cache/artifacts/").all(), paths
    assert trained["gate"]["path"].startswith("cache/artifacts/")

    moved = tmp_path / "moved-home"
    shutil.copytree(home, moved)
    shutil.rmtree(home)
    monkeypatch.setenv("CR2_CACHE", session_cache or str(tmp_path / "encoder-cache"))
    router = load_online_router(cfg, moved)
    table = router.router.threshold_table_
    out = router.route("What is the capital of France?", None, float(next(v for v in table.lams if v > 0)),
                       float(table.alphas[0]))
    assert out["chosen_model"] in cfg.model_ids
