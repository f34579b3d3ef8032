"""Reading and checking the shipped benchmark files (data/benchmarks/*.parquet) into one query frame.

The frame's columns are the warehouse's `queries` columns (without the token count); every problem
raises DataValidationError naming the file, the field and the fix.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cr2.config.dataset_defs import DatasetDef
from cr2.config import Config
from cr2.core.boundary import shown
from cr2.core.errors import DataValidationError

REQUIRED_COLUMNS = ("query_id", "benchmark", "subset", "question", "choices", "target", "tests", "test_setup")
QUERY_COLUMNS = REQUIRED_COLUMNS + ("content_hash",)


def read_benchmark_file(path: Path, benchmark: str) -> pd.DataFrame:
    """One benchmark's Parquet file as a DataFrame of the required columns, read by the bounded table reader
    (cr2.core.boundary.parquet_table: row count and uncompressed size checked before anything is decoded)."""
    from cr2.core.boundary import parquet_table, read_table_bytes

    if not path.is_file():
        raise DataValidationError(
            f"{path}: benchmark file for '{benchmark}' not found; restore it from the repository "
            f"(git checkout -- {path.name}) or fix benchmarks.{benchmark}.file in the config"
        )
    table = parquet_table(read_table_bytes(path, "benchmark file"), path)
    missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
    if missing:
        raise DataValidationError(
            f"{path}: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; "
            f"a benchmark file needs {', '.join(REQUIRED_COLUMNS)} (see data/README.md)"
        )
    df = table.select(list(REQUIRED_COLUMNS)).to_pandas()
    wrong = sorted(set(df["benchmark"].dropna()) - {benchmark})
    if wrong:
        listed = ", ".join(shown(w) for w in wrong[:3]) + (f" and {len(wrong) - 3:,} more" if len(wrong) > 3 else "")
        raise DataValidationError(f"{path}: column benchmark holds {listed}, expected only '{benchmark}'")
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
            f"duplicated query_id: {', '.join(shown(q, quoted=False) for q in dup.unique()[:3])} "
            f"({len(dup)} repeats); "
            "query ids must be unique across the selected benchmark files"
        )


def content_hashes(df: pd.DataFrame) -> list[str]:
    """sha256 (16 hex) of the text a query is made of, to detect changed queries."""
    out = []
    for q, ch, tgt in zip(df["question"], df["choices"], df["target"]):
        parts = [q if isinstance(q, str) else "", "\x1f".join(ch) if isinstance(ch, (list, np.ndarray)) else "",
                 tgt if isinstance(tgt, str) else ""]  # a missing target (None or NaN) hashes as ''
        out.append(hashlib.sha256("\x1e".join(parts).encode()).hexdigest()[:16])
    return out


def prompt_texts(config: Config, df: pd.DataFrame) -> list[str]:
    """The zero-shot prompt of every query (its benchmark's dataset-definition template), whose tokens are L_in(x)."""
    defs = {b: config.benchmark_def(b) for b in set(df["benchmark"])}
    return [defs[b].prompt_text(q, c) for b, q, c in zip(df["benchmark"], df["question"], df["choices"])]


def target_problem(query_id: str, benchmark: str, definition: DatasetDef, target: Any, n_choices: int,
                   choices: Any = None) -> str:
    """'ok', or what is wrong with a query's gold target under its dataset definition: a missing target where the
    entry says `target: required`, an empty or blank string (a missing answer is null, never ''), or a
    multiple-choice target that is not a letter among the query's own options, a closed-set target that is not one
    of the query's choices (else the entry's answer_set)."""
    query_id = shown(query_id, quoted=False)  # ids and targets come from the file: echoed cut
    missing = target is None or (isinstance(target, float) and np.isnan(target))
    if missing:
        if definition.target == "optional":
            return "ok"
        return (f"{query_id}: no target; benchmark '{benchmark}' requires a gold answer (a benchmark whose labels are "
                "imported may declare `target: optional` in its dataset definition, docs/your_pool.md)")
    if not isinstance(target, str) or not target.strip():
        return (f"{query_id}: empty target {shown(target)}; give the gold answer, or leave it null"
                + (" (the entry says `target: optional`)" if definition.target == "optional"
                   else f" and declare `target: optional` in configs/datasets/{benchmark}.yaml"))
    if definition.multiple_choice:
        letters = definition.letters[:n_choices]
        if len(target) != 1 or target not in letters:
            return f"{query_id}: target {shown(target)} not among {letters[:1]}–{letters[-1:]}"
    if definition.closed_set:
        allowed = [str(c) for c in choices] if n_choices else definition.answer_set
        if not allowed:
            return (f"{query_id}: a closed-set benchmark needs the query's `choices` or the entry's `answer_set` "
                    f"(configs/datasets/{benchmark}.yaml)")
        if target not in allowed:
            listed = ", ".join(shown(a, 40) for a in allowed[:6]) + (" …" if len(allowed) > 6 else "")
            return f"{query_id}: target {shown(target)} not among its answers [{listed}]"
    return "ok"


def answer_checks(defs: dict[str, DatasetDef], df: pd.DataFrame) -> pd.DataFrame:
    """Per query, what the `queries` suite checks against its dataset definition, each as 'ok' or a description of
    the problem (so a failure shows the offending values): choices_ok (option count within the entry's range),
    target_ok (`target_problem`: present unless optional, never blank, a letter among the options for multiple
    choice), tests_ok (≥ 1 test)."""
    choices_ok, target_ok, tests_ok = [], [], []
    for qid, b, ch, tgt, tests in zip(df["query_id"], df["benchmark"], df["choices"], df["target"], df["tests"]):
        d = defs[b]
        where = shown(qid, quoted=False)
        n = len(ch) if isinstance(ch, (list, tuple, np.ndarray)) else 0
        lo, hi = d.choice_range
        choices_ok.append("ok" if hi == 0 or lo <= n <= hi or (d.closed_set and n == 0)
                          else f"{where}: {n} options, {b} needs {lo}–{hi}")
        target_ok.append(target_problem(qid, b, d, tgt, n, ch))
        n_tests = len(tests) if isinstance(tests, (list, tuple, np.ndarray)) else 0
        tests_ok.append("ok" if not d.requires_tests or n_tests >= 1 else f"{where}: no tests")
    return pd.DataFrame({"choices_ok": choices_ok, "target_ok": target_ok, "tests_ok": tests_ok}, index=df.index)
