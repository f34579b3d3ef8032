"""The ZeroEval questions (data/measured/zeroeval/) as benchmark files: GSM8K, CRUXEval, MATH level 5.

Pure conversion, no I/O. `zeroeval_benchmark_frame` turns the rows of one source benchmark of
zeroeval_questions.parquet (benchmark, item_id, question, answer, source) into the benchmark-file layout
(query_id, benchmark, subset, question, choices, target, tests, test_setup), plus the join key of the
measured outputs (`source_benchmark`, `source_item_id`), so the measured labels of any pool can be matched to
the ingested queries (labels.measured.join in the config, docs/measured.md).

Query ids are `<benchmark>/<subset>/<i:05d>` with `i` the integer the source item id ends with (GSM8K test
row, CRUXEval sample id, ZeroEval's MATH-L5 index): the block split rule needs the trailing integer.
"""
from __future__ import annotations

import re

import pandas as pd

from cr2.core.errors import DataValidationError

QUESTION_COLUMNS = ("benchmark", "item_id", "question", "answer", "source")

# dataset name → (name in the source file, subset of every query)
BENCHMARKS: dict[str, tuple[str, str]] = {
    "gsm8k": ("GSM8K", "test"),
    "cruxeval": ("CRUXEval", "output"),  # CRUXEval-O: predict the output of the function
    "math_l5": ("MATH-L5", "level5"),
}


def _item_index(item_id: str) -> int:
    match = re.search(r"(\d+)$", str(item_id))
    if match is None:
        raise DataValidationError(f"ZeroEval item id {item_id!r} does not end with an integer")
    return int(match.group(1))


def gold_target(source_benchmark: str, answer: str) -> str:
    """The gold answer as the query's target: the source's string, with GSM8K's '# ' marker (the rest of
    the dataset's '#### n' line) removed so the target is the final number ZeroEval's scorer compares."""
    answer = str(answer)
    if source_benchmark == "GSM8K":
        return re.sub(r"^#+\s*", "", answer)
    return answer


def zeroeval_benchmark_frame(questions: pd.DataFrame, benchmark: str) -> pd.DataFrame:
    """The questions of benchmark `benchmark` (gsm8k, cruxeval, math_l5) in the benchmark-file
    layout, ordered by item index; DataValidationError on a missing column, a repeated id or an empty answer."""
    missing = [c for c in QUESTION_COLUMNS if c not in questions.columns]
    if missing:
        raise DataValidationError(f"the ZeroEval questions file lacks column(s) {', '.join(missing)} "
                                  f"(needs {', '.join(QUESTION_COLUMNS)}; see data/measured/zeroeval/README.md)")
    if benchmark not in BENCHMARKS:
        raise DataValidationError(f"no ZeroEval benchmark '{benchmark}'; known: {', '.join(BENCHMARKS)}")
    source, subset = BENCHMARKS[benchmark]
    rows = questions[questions["benchmark"] == source].copy()
    if rows.empty:
        raise DataValidationError(f"the ZeroEval questions file has no rows of benchmark '{source}'")
    rows["_i"] = [_item_index(i) for i in rows["item_id"]]
    if rows["_i"].duplicated().any():
        dup = rows.loc[rows["_i"].duplicated(), "item_id"].iloc[0]
        raise DataValidationError(f"ZeroEval {source}: item index of {dup!r} appears more than once")
    empty = rows["answer"].isna() | (rows["answer"].astype(str).str.strip() == "")
    if empty.any():
        raise DataValidationError(f"ZeroEval {source}: {int(empty.sum())} items have no gold answer, "
                                  f"e.g. {rows.loc[empty, 'item_id'].iloc[0]!r}")
    rows = rows.sort_values("_i", kind="stable")
    return pd.DataFrame({
        "query_id": [f"{benchmark}/{subset}/{i:05d}" for i in rows["_i"]],
        "benchmark": benchmark,
        "subset": subset,
        "question": rows["question"].astype(str).to_numpy(),
        "choices": None,
        "target": [gold_target(source, a) for a in rows["answer"]],
        "tests": None,
        "test_setup": None,
        "source_benchmark": source,
        "source_item_id": rows["item_id"].astype(str).to_numpy(),
        "source": rows["source"].astype(str).to_numpy(),
    })
