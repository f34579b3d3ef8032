"""Data files and result options within stated limits.

Every table file a user gives or the project ships (labels, benchmarks, measured outputs) is read by one bounded
reader that refuses, from the Parquet footer and before anything is materialised, a file holding more rows than
MAX_TABLE_ROWS or more uncompressed bytes than MAX_TABLE_UNCOMPRESSED_BYTES (a dictionary-encoded value repeated
on every row counts at its expanded size); a CSV is bounded the same way. A CSV's header is the line pandas takes
for it, so a column named twice is refused after leading blank lines too. A cell echoed in an error is cut, and
`cr2 results --alpha` takes a risk level in (0, 1) only.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
from typer.testing import CliRunner

from cr2.core import boundary
from cr2.core.errors import DataValidationError

ROWS_10M = 10_000_000


@pytest.fixture(scope="module")
def ingested(small_data_dir, tmp_path_factory):
    """A warehouse with queries and models (ingest only)."""
    from cr2.config import load_config
    from cr2_tasks.ingest import ingest_queries

    home = tmp_path_factory.mktemp("limits") / "home"
    ingest_queries.fn(load_config(overrides={"data_dir": str(small_data_dir)}), str(home))
    return home


@pytest.fixture(scope="module")
def many_rows(tmp_path_factory):
    """A Parquet file of 10⁷ rows (one int8 column, all zero): about 100 kB on disk."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path_factory.mktemp("limits-rows") / "many.parquet"
    pq.write_table(pa.table({"query_id": np.zeros(ROWS_10M, dtype=np.int8)}), path, compression="zstd")
    return path


def _one_huge_cell(path, cell_bytes: int, rows: int = 1, dictionary: bool = False):
    """A Parquet file whose string column holds one `cell_bytes` value, written once (dictionary=True: as a
    dictionary page that every one of `rows` rows points at; the file says the column is plain text)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    value = pa.array(["x" * cell_bytes])
    column = (pa.DictionaryArray.from_arrays(pa.array(np.zeros(rows, dtype=np.int32)), value) if dictionary else value)
    pq.write_table(pa.table({"question": column}), path, compression="zstd", store_schema=False)
    return path


def _invoke(args):
    return CliRunner().invoke(__import__("cr2_cli.main", fromlist=["app"]).app, args)


# ------------------------------------------------------------------ Parquet: rows and uncompressed bytes
def test_a_parquet_file_with_too_many_rows_is_refused_from_its_footer(many_rows):
    from cr2_warehouse.files import read_table_file

    t0 = time.perf_counter()
    with pytest.raises(DataValidationError) as err:
        read_table_file(many_rows)
    assert time.perf_counter() - t0 < 1.0  # the footer decides: nothing is decoded
    msg = str(err.value)
    assert str(many_rows) in msg and "10,000,000 rows" in msg and f"{boundary.MAX_TABLE_ROWS:,}" in msg, msg


def test_labels_import_refuses_a_small_file_of_ten_million_rows(ingested, many_rows):
    t0 = time.perf_counter()
    result = _invoke(["labels", "import", str(many_rows), "--source", "mine", "--home", str(ingested)])
    assert result.exit_code == 2 and "10,000,000 rows" in result.output, result.output[:500]
    assert time.perf_counter() - t0 < 5.0


def test_a_benchmark_file_goes_through_the_bounded_reader(many_rows):
    from cr2.inputs.datasets import read_benchmark_file

    with pytest.raises(DataValidationError, match=r"10,000,000 rows.*more than"):
        read_benchmark_file(many_rows, "mmlu")


def test_a_measured_file_goes_through_the_bounded_reader(many_rows, tmp_path):
    from cr2_warehouse.measured_files import OUTPUTS_FILE, QUESTIONS_FILE, read_measured_correctness, read_measured_pool

    for name in (QUESTIONS_FILE, OUTPUTS_FILE):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).symlink_to(many_rows)
    with pytest.raises(DataValidationError, match=r"10,000,000 rows"):
        read_measured_pool(tmp_path, {"m": "m"})
    with pytest.raises(DataValidationError, match=r"10,000,000 rows"):
        read_measured_correctness(tmp_path)


def test_one_huge_cell_is_refused_by_its_uncompressed_size(tmp_path, monkeypatch):
    from cr2_warehouse.files import read_table_file

    monkeypatch.setattr(boundary, "MAX_TABLE_UNCOMPRESSED_BYTES", 1 << 20)  # the real limit, scaled down 256×
    path = _one_huge_cell(tmp_path / "cell.parquet", 4 << 20)
    assert path.stat().st_size < 10_000  # a 4 MiB cell compresses to a few kB
    with pytest.raises(DataValidationError) as err:
        read_table_file(path)
    msg = str(err.value)
    assert str(path) in msg and "uncompressed" in msg and "1,048,576" in msg, msg


def test_a_dictionary_value_repeated_on_every_row_counts_expanded(tmp_path, monkeypatch):
    """The footer says 64 kB (one dictionary page); decoded, the column is 1,000 copies of it: 64 MB."""
    from cr2_warehouse.files import read_table_file

    monkeypatch.setattr(boundary, "MAX_TABLE_UNCOMPRESSED_BYTES", 4 << 20)
    path = _one_huge_cell(tmp_path / "dict.parquet", 64 << 10, rows=1_000, dictionary=True)
    with pytest.raises(DataValidationError, match=r"uncompressed.*4,194,304"):
        read_table_file(path)


def test_shipped_files_are_far_within_the_limits():
    import pyarrow.parquet as pq

    from cr2.config import REPO_ROOT

    files = sorted((REPO_ROOT / "data").rglob("*.parquet"))
    assert files
    for f in files:
        md = pq.ParquetFile(f).metadata
        size = sum(md.row_group(i).column(j).total_uncompressed_size
                   for i in range(md.num_row_groups) for j in range(md.num_columns))
        # a margin of 5× at least: the largest (MMLU-Pro outputs, 12,032 questions × 29 models) has 347k rows
        assert md.num_rows * 5 <= boundary.MAX_TABLE_ROWS and size * 5 <= boundary.MAX_TABLE_UNCOMPRESSED_BYTES, f
    frame = boundary.read_table_file(REPO_ROOT / "data" / "measured" / "mmlu_pro_outputs.parquet",
                                     columns=["model", "question_id", "correct"])
    assert len(frame) == 347_215 and list(frame.columns) == ["model", "question_id", "correct"]


# ------------------------------------------------------------------ CSV
@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_a_csv_with_too_many_rows_is_refused(tmp_path, newline):
    from cr2_warehouse.files import read_table_file

    path = tmp_path / "many.csv"
    path.write_bytes(b"query_id" + newline + (b"1" + newline) * (boundary.MAX_TABLE_ROWS + 1))
    t0 = time.perf_counter()
    with pytest.raises(DataValidationError, match=rf"more than {boundary.MAX_TABLE_ROWS:,} rows"):
        read_table_file(path)
    assert time.perf_counter() - t0 < 5.0


@pytest.mark.parametrize("head", ["\n", "\r\n", "\n\n\n", "\r\n\r\n"])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_column_named_twice_is_refused_after_leading_blank_lines(tmp_path, head, newline):
    from cr2_warehouse.files import read_table_file

    path = tmp_path / "twice.csv"
    path.write_bytes((head + newline.join(["query_id,model,correct,correct", "q,m,1,0"]) + newline).encode())
    with pytest.raises(DataValidationError, match="'correct' appears more than once"):
        read_table_file(path)


def test_labels_import_refuses_a_duplicate_header_after_a_blank_line(ingested, tmp_path):
    path = tmp_path / "twice.csv"
    path.write_text("\nquery_id,model,correct,correct\nq,m,1,0\n")
    result = _invoke(["labels", "import", str(path), "--source", "mine", "--home", str(ingested)])
    out = " ".join(result.output.split())
    assert result.exit_code == 2 and "'correct' appears more than once" in out, out


def test_a_csv_header_with_distinct_names_still_reads(tmp_path):
    from cr2_warehouse.files import read_table_file

    path = tmp_path / "ok.csv"
    path.write_bytes("\ufeffquery_id,model,correct\r\nq,m,1\r\n".encode())
    frame = read_table_file(path)
    assert list(frame.columns) == ["query_id", "model", "correct"] and len(frame) == 1


# ------------------------------------------------------------------ echoes
def test_a_huge_benchmark_cell_is_echoed_cut(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from cr2.inputs.datasets import REQUIRED_COLUMNS, read_benchmark_file

    row = {c: ["x"] for c in REQUIRED_COLUMNS} | {"benchmark": ["b" * 5_000_000], "choices": [["a"]],
                                                 "tests": [["t"]]}
    path = tmp_path / "huge.parquet"
    pq.write_table(pa.table(row), path, compression="zstd")
    with pytest.raises(DataValidationError) as err:
        read_benchmark_file(path, "mmlu")
    msg = str(err.value)
    assert len(msg) < 1_000 and "5,000,000 chars" in msg and "'mmlu'" in msg, msg[:300]


def test_a_huge_target_is_echoed_cut():
    from cr2.config import load_config
    from cr2.inputs.datasets import target_problem

    cfg = load_config()
    msg = target_problem("q1", "mmlu", cfg.benchmark_def("mmlu"), "Z" * 1_000_000, 4)
    assert len(msg) < 300 and "1,000,000 chars" in msg, msg[:300]


# ------------------------------------------------------------------ cr2 results
@pytest.mark.parametrize("extra", [[], ["--equal-risk"]], ids=["headline", "equal-risk"])
@pytest.mark.parametrize("alpha", ["nan", "inf", "-inf", "-1", "0", "1", "1.5"])
def test_results_refuses_an_alpha_outside_zero_one(ingested, alpha, extra):
    result = _invoke(["results", "--alpha", alpha, *extra, "--home", str(ingested)])
    out = " ".join(result.output.split())
    assert result.exit_code == 2 and "α must be a finite number in (0, 1)" in out and "at α" not in out, out


@pytest.mark.parametrize("targets", ["nan", "inf", "0.7,nan", "1e400", "-0.5"])
def test_results_refuses_targets_that_are_not_on_the_grid(ingested, targets):
    result = _invoke(["results", "--targets", targets, "--home", str(ingested)])
    assert result.exit_code == 2 and "--targets takes" in result.output, result.output


def test_measured_outputs_echo_their_model_names_cut():
    import pandas as pd

    from cr2.labels.measured import join_measured_labels

    outputs = pd.DataFrame({"model": [f"m{i:04d}" + "x" * 10_000 for i in range(2_000)], "question_id": range(2_000),
                            "correct": True, "generated_chars": 10.0})
    queries = pd.DataFrame({"query_id": ["q1"], "benchmark": ["b"], "qid": [1]})
    with pytest.raises(DataValidationError) as err:
        join_measured_labels(outputs, queries, {"question_id": "qid"}, {"dev": "absent"}, 4.0)
    msg = str(err.value)
    assert "absent" in msg and "1,980 more" in msg and len(msg) < 3_000, msg[:300]
