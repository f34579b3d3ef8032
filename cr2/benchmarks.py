"""Reading and checking the shipped benchmark files (data/benchmarks/*.parquet) into one query frame.

The frame's columns are the warehouse's `queries` columns (without the token count); every problem
raises DataValidationError naming the file, the field and the fix.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd

from cr2.catalogue import BenchmarkDef
from cr2.config import Config
from cr2.errors import DataValidationError

REQUIRED_COLUMNS = ("query_id", "benchmark", "subset", "question", "choices", "target", "tests", "test_setup")
QUERY_COLUMNS = REQUIRED_COLUMNS + ("content_hash",)


def read_benchmark_file(path: Path, benchmark: str) -> pd.DataFrame:
    """One benchmark's Parquet file as a DataFrame of the required columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        raise DataValidationError(
            f"{path}: benchmark file for '{benchmark}' not found; restore it from the repository "
            f"(git checkout -- {path.name}) or fix benchmarks.{benchmark}.file in the config"
        )
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise DataValidationError(
            f"{path}: not a readable Parquet file ({str(exc).splitlines()[0]}); restore it from the repository"
        ) from None
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise DataValidationError(
            f"{path}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
            f"a benchmark file needs {', '.join(REQUIRED_COLUMNS)} (see data/README.md)"
        )
    df = table.select(list(REQUIRED_COLUMNS)).to_pandas()
    wrong = sorted(set(df["benchmark"].dropna()) - {benchmark})
    if wrong:
        raise DataValidationError(f"{path}: column benchmark holds {wrong}, expected only '{benchmark}'")
    return df


def select_queries(config: Config) -> pd.DataFrame:
    """All queries of the enabled benchmarks and subsets, in file order, with a content hash."""
    frames = []
    for name in config.enabled_benchmarks:
        subsets = config.benchmarks[name].selected_subsets
        path = config.benchmark_file(name)
        df = read_benchmark_file(path, name)
        if subsets is not None:
            unknown = sorted(set(subsets) - set(df["subset"]))
            if unknown:
                raise DataValidationError(
                    f"benchmarks.{name}.subsets: {unknown} not in {path.name} (has {len(set(df['subset']))} subsets, "
                    f"e.g. {sorted(set(df['subset']))[:5]})"
                )
            df = df[df["subset"].isin(subsets)]
        frames.append(df)
    if not frames:
        raise DataValidationError("no benchmark is enabled in the config (benchmarks.*.enabled)")
    out = pd.concat(frames, ignore_index=True)
    check_query_ids(out)
    out["content_hash"] = content_hashes(out)
    return out


def check_query_ids(df: pd.DataFrame) -> None:
    """Raise when a query_id is null or repeated (the warehouse key)."""
    if df["query_id"].isna().any():
        raise DataValidationError(f"{int(df['query_id'].isna().sum())} queries have no query_id; every row needs one")
    dup = df["query_id"][df["query_id"].duplicated()]
    if len(dup):
        raise DataValidationError(
            f"duplicated query_id: {', '.join(map(str, dup.unique()[:3]))} ({len(dup)} repeats); "
            "query ids must be unique across the selected benchmark files"
        )


def content_hashes(df: pd.DataFrame) -> list[str]:
    """sha256 (16 hex) of the text a query is made of, to detect changed queries."""
    out = []
    for q, ch, tgt in zip(df["question"], df["choices"], df["target"]):
        parts = [q or "", "\x1f".join(ch) if isinstance(ch, (list, np.ndarray)) else "", tgt or ""]
        out.append(hashlib.sha256("\x1e".join(parts).encode()).hexdigest()[:16])
    return out


def prompt_texts(config: Config, df: pd.DataFrame) -> list[str]:
    """The zero-shot prompt of every query (its benchmark's catalogue template), whose tokens are L_in(x)."""
    defs = {b: config.benchmark_def(b) for b in set(df["benchmark"])}
    return [defs[b].prompt_text(q, c) for b, q, c in zip(df["benchmark"], df["question"], df["choices"])]


def answer_checks(defs: dict[str, BenchmarkDef], df: pd.DataFrame) -> pd.DataFrame:
    """Per query, what the `queries` suite checks against its catalogue entry, each as 'ok' or a description of
    the problem (so a failure shows the offending values): choices_ok (option count within the entry's range),
    target_ok (a multiple-choice target is a letter among the query's own options), tests_ok (≥ 1 test)."""
    choices_ok, target_ok, tests_ok = [], [], []
    for qid, b, ch, tgt, tests in zip(df["query_id"], df["benchmark"], df["choices"], df["target"], df["tests"]):
        d = defs[b]
        n = len(ch) if isinstance(ch, (list, tuple, np.ndarray)) else 0
        lo, hi = d.choice_range
        choices_ok.append("ok" if not d.multiple_choice or lo <= n <= hi
                          else f"{qid}: {n} options, {b} needs {lo}–{hi}")
        letters = d.letters[:n]
        target_ok.append("ok" if not d.multiple_choice or (isinstance(tgt, str) and len(tgt) == 1 and tgt in letters)
                         else f"{qid}: target {tgt!r} not among {letters[:1]}–{letters[-1:]}")
        n_tests = len(tests) if isinstance(tests, (list, tuple, np.ndarray)) else 0
        tests_ok.append("ok" if not d.requires_tests or n_tests >= 1 else f"{qid}: no tests")
    return pd.DataFrame({"choices_ok": choices_ok, "target_ok": target_ok, "tests_ok": tests_ok}, index=df.index)
