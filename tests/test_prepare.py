"""Prepare tasks on a small slice, called directly (no Prefect): incremental embedding, determinism."""
from __future__ import annotations

import pytest

from cr2_tasks.ingest import ingest_queries
from cr2_tasks.prepare import (
    assign_splits_task,
    compute_costs_task,
    embed_queries,
    sample_states_task,
    simulate_labels_task,
)
from cr2_warehouse.db import Warehouse

STEPS = (embed_queries, assign_splits_task, sample_states_task, simulate_labels_task, compute_costs_task)
TABLES = ("embeddings", "splits", "states", "labels", "costs")


def _prepare(config, home):
    ingest_queries.fn(config, str(home))
    return [step.fn(config, str(home)) for i, step in enumerate(STEPS)]


def _fingerprints(home):
    with Warehouse(home, read_only=True) as wh:
        return {t: wh.table_fingerprint(t) if t != "labels" else
                wh.table_fingerprint("labels", columns=("source", "query_id", "model_id", "correct", "output_tokens"))
                for t in TABLES}


def test_same_config_and_seed_give_identical_tables(small_config, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _prepare(small_config, a)
    _prepare(small_config, b)
    assert _fingerprints(a) == _fingerprints(b)


def test_only_new_or_changed_queries_are_embedded(small_config, tmp_path):
    home = tmp_path / "h"
    first = _prepare(small_config, home)[0]
    assert first["embedded"] == first["total"] > 0
    again = embed_queries.fn(small_config, str(home))
    assert again["embedded"] == 0
    with Warehouse(home) as wh:
        qid = wh.scalar("SELECT min(query_id) FROM queries WHERE benchmark = 'mmlu'")
        before = wh.df("SELECT vector FROM embeddings WHERE query_id = ?", [qid])["vector"][0]
        wh.con.execute("UPDATE queries SET question = question || ' (revised)', content_hash = 'changed' "
                       "WHERE query_id = ?", [qid])
    changed = embed_queries.fn(small_config, str(home))
    assert changed["embedded"] == 1 and changed["total"] == first["total"]
    with Warehouse(home, read_only=True) as wh:
        after = wh.df("SELECT vector, content_hash FROM embeddings WHERE query_id = ?", [qid])
    assert after["content_hash"][0] == "changed" and list(after["vector"][0]) != list(before)


def test_costs_need_labels_from_the_configured_source(small_config, tmp_path):
    from cr2.core.errors import DataValidationError
    from cr2_tasks.prepare import check_label_source

    home = tmp_path / "h"
    _prepare(small_config, home)
    other = small_config.model_copy(update={"labels": small_config.labels.model_copy(update={"source": "my-lm-eval"})})
    with Warehouse(home, read_only=True) as wh, pytest.raises(DataValidationError, match="covers 0 of .*cr2 labels import"):
        check_label_source(other, wh)
