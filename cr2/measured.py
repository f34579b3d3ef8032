"""Measured correctness labels from published model outputs: MMLU-Pro, 29 public models (data/measured/).

Two pure conversions, no I/O:

- `mmlu_pro_benchmark_frame`: the MMLU-Pro questions (question_id, question, options_json, answer,
  category, …) as a benchmark file of the catalogue (data/benchmarks/mmlu_pro.parquet: query_id,
  benchmark, subset, question, choices, target, tests, test_setup);
- `measured_label_frame`: the per-(model, question) outputs as the long table `cr2 labels import` takes
  (query_id, model, correct, output_tokens) for the pool's models, with L_out,m(x) from the measured
  length of each generated answer: round(generated_chars / chars_per_token).

Correctness is the source's `correct` column: the MMLU-Pro authors' regex-extracted letter equals the gold
letter; an unextracted answer (null pred) counts as wrong.
"""
from __future__ import annotations

import json
import re
from typing import Mapping

import numpy as np
import pandas as pd

from cr2.errors import DataValidationError, InvalidValueError

BENCHMARK = "mmlu_pro"
QUESTION_COLUMNS = ("question_id", "question", "options_json", "answer", "answer_index", "category", "src")
OUTPUT_COLUMNS = ("model", "question_id", "pred", "correct", "generated_chars")


def category_subset(category: str) -> str:
    """A category as a subset name: lower case, spaces → '_' ('computer science' → 'computer_science')."""
    return re.sub(r"\s+", "_", str(category).strip().lower())


def mmlu_pro_query_id(category: str, question_id: int) -> str:
    """mmlu_pro/<category subset>/<question_id:05d> (the block split rule needs the trailing integer)."""
    return f"{BENCHMARK}/{category_subset(category)}/{int(question_id):05d}"


def _require(df: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise DataValidationError(f"{what} lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                  f"(needs {', '.join(columns)}; see data/README.md)")


def mmlu_pro_benchmark_frame(questions: pd.DataFrame) -> pd.DataFrame:
    """The MMLU-Pro questions in the benchmark-file layout (one row per question, source order), plus
    `mmlu_pro_question_id` and `src`; DataValidationError on duplicated ids or a gold letter outside the options."""
    _require(questions, QUESTION_COLUMNS, "the MMLU-Pro questions file")
    if questions["question_id"].duplicated().any():
        dup = questions.loc[questions["question_id"].duplicated(), "question_id"].iloc[0]
        raise DataValidationError(f"MMLU-Pro question_id {dup} appears more than once")
    options = [list(json.loads(o)) for o in questions["options_json"]]
    letters = "ABCDEFGHIJ"
    for qid, opts, ans, idx in zip(questions["question_id"], options, questions["answer"], questions["answer_index"]):
        if not 2 <= len(opts) <= 10 or ans not in letters[: len(opts)] or letters.index(ans) != int(idx):
            raise DataValidationError(f"MMLU-Pro question {qid}: answer {ans!r} (index {idx}) is not among its "
                                      f"{len(opts)} options")
    return pd.DataFrame({
        "query_id": [mmlu_pro_query_id(c, q) for c, q in zip(questions["category"], questions["question_id"])],
        "benchmark": BENCHMARK,
        "subset": [category_subset(c) for c in questions["category"]],
        "question": questions["question"].astype(str).to_numpy(),
        "choices": options,
        "target": questions["answer"].astype(str).to_numpy(),
        "tests": None,
        "test_setup": None,
        "mmlu_pro_question_id": questions["question_id"].astype(np.int64).to_numpy(),
        "src": questions["src"].astype(str).to_numpy(),
    })


def measured_label_frame(outputs: pd.DataFrame, question_ids: Mapping[int, str], model_names: Mapping[str, str],
                         chars_per_token: float) -> pd.DataFrame:
    """Labels of the pool's models as the import table: query_id, model (pool id), correct, output_tokens.

    question_ids: source question_id → warehouse query_id (the ingested questions);
    model_names: pool model id → the source's model name. Every pool model must cover every question.
    """
    _require(outputs, OUTPUT_COLUMNS, "the MMLU-Pro outputs file")
    if not chars_per_token > 0:
        raise InvalidValueError(f"chars_per_token must be > 0, got {chars_per_token}")
    known = set(outputs["model"].unique())
    unknown = {m: n for m, n in model_names.items() if n not in known}
    if unknown:
        raise DataValidationError(
            f"labels.measured.models names models the outputs file does not have: {unknown}; it has "
            f"{', '.join(sorted(known))}")
    frames = []
    for model_id, name in model_names.items():
        rows = outputs[outputs["model"] == name]
        missing = set(question_ids) - set(rows["question_id"].astype(int))
        if missing:
            raise DataValidationError(
                f"the outputs of '{name}' (pool model {model_id}) lack {len(missing)} of the {len(question_ids)} "
                f"ingested questions, e.g. {sorted(missing)[:3]}; pick a model that answered every question")
        rows = rows[rows["question_id"].astype(int).isin(set(question_ids))]
        chars = rows["generated_chars"].to_numpy(dtype=np.float64)
        frames.append(pd.DataFrame({
            "query_id": [question_ids[int(q)] for q in rows["question_id"]],
            "model": model_id,
            "correct": rows["correct"].fillna(False).astype(bool).to_numpy(),  # no extracted answer: wrong
            # L_out,m(x): measured answer length in characters / characters per token [cr2 decision]
            "output_tokens": np.rint(chars / chars_per_token).astype(np.int64),
        }))
    return pd.concat(frames, ignore_index=True)
