"""lm-eval documents from the warehouse's queries: one doc per query, carrying its `query_id`.

The doc fields are named as in the Hugging Face datasets that lm-eval's standard tasks read, so the
default templates are lm-eval's own strings:

| benchmark | doc fields |
|---|---|
| mmlu | query_id, question, choices [4], answer (0–3), subject (subset with spaces), description |
| gpqa | query_id, question, choices [4] (lm-eval's `preprocess` applied), answer (0–3), description |
| bbh  | query_id, input, target, task (the BBH subtask), description |
| mbpp | query_id, task_id, text, test_list [3], test_setup_code, reference (setup + asserts), description |

`description` is rendered here, per doc, and the lm-eval task reads it by field name, so MMLU can keep its
per-subject description inside one task instead of 57. Sample → query mapping never relies on row order:
lm-eval logs each sample's `doc`, and its `query_id` is the label's key.
"""
from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np
import pandas as pd

from cr2.core.errors import DataValidationError
from cr2.config.lmeval import TemplateSpec

LETTERS = "ABCDEFGHIJ"
DOCS_VERSION = "1"  # bump when the doc fields change: part of the task config hash


def _as_list(value: Any) -> list:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return []
    return [str(v) for v in value]


def _text(value: Any) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return str(value)


def render(template: str, doc: dict[str, Any]) -> str:
    """Render a Jinja template over a doc the way lm-eval does (StrictUndefined, trailing newline kept)."""
    from lm_eval.utils import apply_template

    return apply_template(template, doc)


def gpqa_preprocess(text: str) -> str:
    """lm-eval's gpqa `preprocess`: strip, ' [title]' → '. ', double spaces → one."""
    text = text.strip().replace(" [title]", ". ")
    return text.replace("  ", " ")


def _answer_index(query_id: str, target: str, n_choices: int) -> int:
    letter = target.strip().strip("()")
    if len(letter) != 1 or letter not in LETTERS[:n_choices]:
        raise DataValidationError(
            f"query {query_id}: multiple-choice target {target!r} is not one of {list(LETTERS[:n_choices])}; "
            "fix the benchmark file and re-run `cr2 ingest`"
        )
    return LETTERS.index(letter)


def _mc_doc(row: Any, benchmark: str, n_range: tuple[int, int] = (4, 4)) -> dict[str, Any]:
    choices = _as_list(row.choices)
    lo, hi = n_range
    if not lo <= len(choices) <= hi:
        need = str(lo) if lo == hi else f"{lo}–{hi}"
        raise DataValidationError(
            f"query {row.query_id}: {benchmark} needs {need} choices, found {len(choices)}; fix the benchmark file"
        )
    if benchmark == "gpqa":
        choices = [gpqa_preprocess(c) for c in choices]
    return {
        "query_id": row.query_id,
        "question": _text(row.question),
        "choices": choices,
        "answer": _answer_index(row.query_id, _text(row.target), len(choices)),
        "subject": _text(row.subset).replace("_", " "),
    }


def _generative_doc(row: Any) -> dict[str, Any]:
    """A benchmark (dataset definition) without a dedicated builder: question, exact target, subject."""
    return {"query_id": row.query_id, "question": _text(row.question), "target": _text(row.target),
            "subject": _text(row.subset).replace("_", " ")}


def _bbh_doc(row: Any) -> dict[str, Any]:
    return {"query_id": row.query_id, "input": _text(row.question), "target": _text(row.target), "task": _text(row.subset)}


def mbpp_reference(tests: list[str], setup: str) -> str:
    """The test code run after a completion: MBPP's test_setup_code (if any), then the asserts."""
    lines = ([setup] if setup.strip() else []) + list(tests)
    return "\n".join(lines)


def _mbpp_task_id(query_id: str) -> int:
    m = re.fullmatch(r"mbpp/(\d+)", query_id)
    if m is None:
        raise DataValidationError(f"query {query_id}: MBPP query ids look like mbpp/<task_id>")
    return int(m.group(1))


def _mbpp_doc(row: Any) -> dict[str, Any]:
    tests = _as_list(row.tests)
    if len(tests) < 3:
        raise DataValidationError(
            f"query {row.query_id}: MBPP's prompt shows 3 tests, found {len(tests)}; fix the benchmark file"
        )
    setup = _text(getattr(row, "test_setup", ""))
    return {
        "query_id": row.query_id,
        "task_id": _mbpp_task_id(row.query_id),
        "text": _text(row.question),
        "test_list": tests,
        "test_setup_code": setup,
        "reference": mbpp_reference(tests, setup),
    }


_BUILDERS: dict[str, Callable[[Any], dict[str, Any]]] = {
    "mmlu": lambda r: _mc_doc(r, "mmlu"),
    "gpqa": lambda r: _mc_doc(r, "gpqa"),
    "bbh": _bbh_doc,
    "mbpp": _mbpp_doc,
}


def _builder(benchmark: str) -> Callable[[Any], dict[str, Any]]:
    """The doc builder of a benchmark: a dedicated one, else the generic one its definition's answer type picks."""
    if benchmark in _BUILDERS:
        return _BUILDERS[benchmark]
    from cr2.config.dataset_defs import get_dataset
    from cr2.core.errors import UnknownNameError

    try:
        definition = get_dataset(benchmark)
    except UnknownNameError as exc:
        raise DataValidationError(f"no lm-eval doc builder: {exc}") from None
    if definition.multiple_choice:
        return lambda r: _mc_doc(r, benchmark, definition.choice_range)
    return _generative_doc


def build_docs(
    benchmark: str,
    queries: pd.DataFrame,
    template: TemplateSpec,
    descriptions: dict[str, str] | None = None,
) -> pd.DataFrame:
    """One lm-eval doc per query of `benchmark` (queries in the warehouse's column layout), in input order.

    `descriptions` maps a BBH subtask to lm-eval's description; it is used where the template has none.
    """
    builder = _builder(benchmark)
    rows = queries[queries["benchmark"] == benchmark] if "benchmark" in queries.columns else queries
    if rows["query_id"].duplicated().any():
        dup = rows.loc[rows["query_id"].duplicated(), "query_id"].iloc[0]
        raise DataValidationError(f"query {dup} appears twice in the {benchmark} queries")
    if "target" in rows.columns and rows["target"].isna().any():
        first = rows.loc[rows["target"].isna(), "query_id"].iloc[0]
        raise DataValidationError(
            f"{int(rows['target'].isna().sum())} {benchmark} queries have no gold target (e.g. {first}): `cr2 label` "
            "scores answers against the target, so it cannot label them; import their labels instead "
            "(`cr2 labels import`, docs/your_pool.md) or add the targets to the benchmark file")
    docs = [builder(r) for r in rows.itertuples(index=False)]
    for doc in docs:
        if template.description is not None:
            doc["description"] = render(template.description, doc)
        elif descriptions is not None and doc.get("task") in descriptions:
            doc["description"] = descriptions[doc["task"]]
        else:
            doc["description"] = ""
    columns = list(docs[0]) if docs else ["query_id", "description"]
    return pd.DataFrame(docs, columns=columns)


def mbpp_fewshot_docs(benchmark_rows: pd.DataFrame, task_ids: list[int]) -> list[dict[str, Any]]:
    """MBPP few-shot examples (lm-eval uses task ids 2, 3, 4 of the prompt split), from the shipped MBPP file."""
    if not task_ids:
        return []
    by_id = {_mbpp_task_id(r.query_id): r for r in benchmark_rows.itertuples(index=False)}
    missing = [t for t in task_ids if t not in by_id]
    if missing:
        raise DataValidationError(
            f"MBPP few-shot task ids {missing} are not in the MBPP file; pick ids it holds (templates.mbpp.fewshot_task_ids)"
        )
    out = []
    for t in task_ids:
        r = by_id[t]
        out.append({
            "task_id": t, "text": _text(r.question), "code": _text(r.target), "test_list": _as_list(r.tests),
            "test_setup_code": _text(getattr(r, "test_setup", "")), "is_fewshot": True,
        })
    return out
