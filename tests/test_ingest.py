"""Ingest: the shipped benchmarks land in the warehouse; bad input fails clearly and changes nothing."""
from __future__ import annotations

import shutil

import pandas as pd
import pyarrow.parquet as pq
import pytest

from cr2.config import load_config
from cr2.core.errors import DataValidationError
from cr2_warehouse.repository import warehouse_epoch
from cr2_tasks.ingest import INGEST, ingest_queries
from cr2_warehouse.db import Warehouse

# Source row counts of the default selection (data/README.md): MMLU test 14,042; BBH 6,511;
# GPQA main 448; MBPP test (task_id 11–510) 500.
DEFAULT_COUNTS = {"mmlu": 14042, "bbh": 6511, "gpqa": 448, "mbpp": 500}


def _ingest(config, home):
    return ingest_queries.fn(config, str(home))


@pytest.mark.slow
def test_ingest_default_set_end_to_end(home):
    summary = _ingest(load_config(), home)
    assert {b: v["queries"] for b, v in summary["benchmarks"].items()} == DEFAULT_COUNTS
    assert summary["tokenizer"].startswith("qwen3-bpe")
    with Warehouse(home) as wh:
        assert wh.count("queries") == sum(DEFAULT_COUNTS.values())
        mc = wh.df("SELECT DISTINCT len(choices) AS n, target FROM queries WHERE benchmark IN ('mmlu','gpqa')")
        assert set(mc["n"]) == {4} and set(mc["target"]) == {"A", "B", "C", "D"}
        assert wh.scalar("SELECT min(len(tests)) FROM queries WHERE benchmark = 'mbpp'") >= 1
        ids = wh.df("SELECT query_id FROM queries WHERE benchmark = 'mbpp' ORDER BY query_id")["query_id"]
        nums = sorted(int(q.split("/")[1]) for q in ids)
        assert nums[0] == 11 and nums[-1] == 510
        assert wh.scalar("SELECT min(prompt_tokens) FROM queries") > 0
        assert list(wh.df("SELECT model_id FROM models ORDER BY position")["model_id"]) == [
            "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b"]


def test_ingest_counts_prompt_tokens_with_the_qwen_tokenizer(small_config, home):
    summary = _ingest(small_config, home)
    with Warehouse(home) as wh:
        df = wh.df("SELECT query_id, question, prompt_tokens, tokenizer FROM queries WHERE benchmark = 'mmlu' LIMIT 1")
    assert df["tokenizer"][0].startswith("qwen3-bpe")
    # the prompt adds the 4 lettered choices and 'Answer:', so it has more tokens than the question's words/2
    assert df["prompt_tokens"][0] > len(df["question"][0].split()) // 2
    assert set(summary["benchmarks"]) == {"mmlu", "bbh", "gpqa", "mbpp"}


def test_ingest_is_idempotent(small_config, home):
    _ingest(small_config, home)
    with Warehouse(home) as wh:
        first = wh.df("SELECT * EXCLUDE (choices, tests) FROM queries ORDER BY query_id")
    _ingest(small_config, home)
    with Warehouse(home) as wh:
        second = wh.df("SELECT * EXCLUDE (choices, tests) FROM queries ORDER BY query_id")
    pd.testing.assert_frame_equal(first, second)


def test_cache_key_changes_with_data_config_and_warehouse(small_config, small_data_dir, home, tmp_path):
    k1 = INGEST.key(small_config, home)
    assert INGEST.key(small_config, home) == k1
    changed = load_config(overrides={"data_dir": str(small_data_dir), "benchmarks": {"gpqa": {"enabled": False}}})
    assert INGEST.key(changed, home) != k1
    with Warehouse(home) as wh:
        epoch = warehouse_epoch(wh)
    other = tmp_path / "other"
    with Warehouse(other) as wh2:
        assert warehouse_epoch(wh2) != epoch
    assert INGEST.key(small_config, other) != k1


# ---------------------------------------------------------------- bad input: clear error, warehouse unchanged
def _broken_copy(small_data_dir, tmp_path, mutate):
    d = tmp_path / "broken"
    shutil.copytree(small_data_dir, d)
    mutate(d / "benchmarks")
    return load_config(overrides={"data_dir": str(d)})


def _snapshot(home):
    with Warehouse(home) as wh:
        return wh.table_fingerprint("queries"), wh.table_fingerprint("models")


def _drop_file(b):
    (b / "bbh.parquet").unlink()


def _corrupt(b):
    (b / "bbh.parquet").write_bytes(b"PAR1 this is not parquet")


def _duplicate_id(b):
    df = pq.read_table(b / "mmlu.parquet").to_pandas()
    pd.concat([df, df.head(1)]).to_parquet(b / "mmlu.parquet", index=False)


def _missing_column(b):
    pq.read_table(b / "mbpp.parquet").to_pandas().drop(columns=["target"]).to_parquet(b / "mbpp.parquet", index=False)


def _bad_target(b):
    df = pq.read_table(b / "mmlu.parquet").to_pandas()
    df.loc[df.index[0], "target"] = "E"
    df.to_parquet(b / "mmlu.parquet", index=False)


@pytest.mark.parametrize(
    "mutate, message",
    [
        (_drop_file, r"bbh\.parquet: benchmark file for 'bbh' not found"),
        (_corrupt, r"bbh\.parquet: not a readable Parquet file"),
        (_duplicate_id, r"duplicated query_id: mmlu/"),
        (_missing_column, r"mbpp\.parquet: missing column target"),
        (_bad_target, r"(?s)validation of 'queries' failed.*target 'E' not among A–D"),
    ],
    ids=["missing-file", "corrupt-parquet", "duplicate-id", "missing-column", "target-not-a-letter"],
)
def test_bad_input_fails_clearly_and_leaves_warehouse_as_it_was(small_config, small_data_dir, home, tmp_path, mutate, message):
    _ingest(small_config, home)
    before = _snapshot(home)
    broken = _broken_copy(small_data_dir, tmp_path, mutate)
    with pytest.raises(DataValidationError, match=message):
        _ingest(broken, home)
    assert _snapshot(home) == before
