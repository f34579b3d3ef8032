"""`cr2 labels import` into a warehouse: valid files land under their source; bad ones write nothing."""
from __future__ import annotations

import pandas as pd
import pytest

from cr2.core.errors import DataValidationError
from cr2_tasks.ingest import ingest_queries
from cr2_warehouse.labels_import import import_labels
from cr2_warehouse.db import Warehouse


@pytest.fixture()
def ingested(small_config, home):
    ingest_queries.fn(small_config, str(home))
    with Warehouse(home, read_only=True) as wh:
        ids = wh.df("SELECT query_id FROM queries ORDER BY query_id")["query_id"].tolist()
    return home, ids


def _labels(ids, models=("qwen3-1.7b", "qwen3-14b")):
    return pd.DataFrame([{"query_id": q, "model": m, "correct": (i + j) % 2, "output_tokens": 10 + i}
                         for i, q in enumerate(ids) for j, m in enumerate(models)])


def _snapshot(home):
    with Warehouse(home, read_only=True) as wh:
        return wh.table_fingerprint("labels"), wh.table_fingerprint("label_runs")


def test_import_writes_the_rows_and_one_run_per_model(ingested, tmp_path):
    home, ids = ingested
    f = tmp_path / "mine.csv"
    _labels(ids).to_csv(f, index=False)
    out = import_labels(home, f, "my-lm-eval")
    assert out["rows"] == 2 * len(ids)
    with Warehouse(home, read_only=True) as wh:
        got = wh.df("SELECT * FROM labels WHERE source = 'my-lm-eval'")
        runs = wh.df("SELECT * FROM label_runs WHERE source = 'my-lm-eval'")
    assert len(got) == 2 * len(ids) and set(runs["backend"]) == {"import"} and len(runs) == 2
    assert got["correct"].sum() == _labels(ids)["correct"].sum()


@pytest.mark.parametrize("mutate, message", [
    (lambda df: df.assign(query_id=df["query_id"].where(df.index != 0, "mmlu/nowhere/00000")), "not in the warehouse"),
    (lambda df: df.assign(model=df["model"].where(df.index != 1, "gpt-9")), "outside the pool"),
    (lambda df: df.assign(correct=df["correct"].where(df.index != 2, 2)), "correct"),
    (lambda df: pd.concat([df, df.iloc[:1]]), "more than once"),
    (lambda df: df.drop(columns=["correct"]), "correct"),
])
def test_bad_imports_write_nothing(ingested, tmp_path, mutate, message):
    home, ids = ingested
    import_labels(home, _write(tmp_path / "ok.parquet", _labels(ids)), "existing")
    before = _snapshot(home)
    with pytest.raises(DataValidationError, match=f"(?is){message}"):
        import_labels(home, _write(tmp_path / "bad.parquet", mutate(_labels(ids))), "other")
    assert _snapshot(home) == before


def test_existing_source_needs_replace_and_builtin_names_are_refused(ingested, tmp_path):
    home, ids = ingested
    f = _write(tmp_path / "a.parquet", _labels(ids))
    import_labels(home, f, "mine")
    with pytest.raises(DataValidationError, match="--replace"):
        import_labels(home, f, "mine")
    assert import_labels(home, f, "mine", replace=True)["rows"] == 2 * len(ids)
    with pytest.raises(DataValidationError, match="built-in"):
        import_labels(home, f, "simulated-irt-v1")
    with pytest.raises(DataValidationError, match="file not found"):
        import_labels(home, tmp_path / "missing.csv", "x")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(DataValidationError, match="not a readable Parquet"):
        import_labels(home, tmp_path / "junk.parquet", "x")


def _write(path, df):
    df.to_parquet(path, index=False)
    return path


@pytest.mark.parametrize("tokens", [2147483653, 3_000_000_000, 2 ** 40, 1e300])
def test_f7_out_of_range_token_counts_write_nothing(ingested, tmp_path, tokens):
    """Token counts beyond Int32 are refused and nothing is written (an Int32 cast would store them as negative
    numbers or 0)."""
    home, ids = ingested
    df = _labels(ids)
    df["output_tokens"] = df["output_tokens"].astype(object)
    df.loc[3, "output_tokens"] = tokens
    with pytest.raises(DataValidationError, match=r"row 4, column 'output_tokens'"):
        import_labels(home, _write(tmp_path / "big.parquet", df.astype({"output_tokens": type(tokens)})), "big")
    with Warehouse(home, read_only=True) as wh:
        assert wh.scalar("SELECT count(*) FROM labels WHERE source = 'big'") == 0


def test_f8_a_parquet_of_lists_is_refused_with_nothing_written(ingested, tmp_path):
    home, ids = ingested
    df = _labels(ids).assign(correct=lambda d: [[bool(v)] for v in d["correct"]])
    before = _snapshot(home)
    with pytest.raises(DataValidationError, match=r"row 1, column 'correct', value \[False\]"):
        import_labels(home, _write(tmp_path / "lists.parquet", df), "lists")
    assert _snapshot(home) == before


def test_the_largest_allowed_token_count_is_stored_exactly(ingested, tmp_path):
    from cr2.labels.imported import MAX_OUTPUT_TOKENS

    home, ids = ingested
    df = _labels(ids)
    df.loc[0, "output_tokens"] = MAX_OUTPUT_TOKENS
    import_labels(home, _write(tmp_path / "max.parquet", df), "max")
    with Warehouse(home, read_only=True) as wh:
        assert wh.scalar("SELECT max(output_tokens) FROM labels WHERE source = 'max'") == MAX_OUTPUT_TOKENS
        assert wh.scalar("SELECT min(output_tokens) FROM labels WHERE source = 'max'") >= 0
