"""Measured correctness labels from published model outputs (data/measured/): MMLU-Pro, ZeroEval, any pool.

Two pure conversions, no I/O:

- `mmlu_pro_benchmark_frame`: the MMLU-Pro questions (question_id, question, options_json, answer,
  category, …) as a benchmark file (data/benchmarks/mmlu_pro.parquet: query_id,
  benchmark, subset, question, choices, target, tests, test_setup);
- `join_measured_labels`: the per-(model, item) outputs of any measured pool as the long table
  `cr2 labels import` takes (query_id, model, correct, output_tokens) for the pool's models, matched to the
  ingested queries on key columns, with L_out,m(x) from the measured length of each generated answer:
  round(generated_chars / chars_per_token); `measured_label_frame` is its MMLU-Pro form.

Correctness is the source's `correct` column: the MMLU-Pro authors' regex-extracted letter equals the gold
letter; an unextracted answer (null pred) counts as wrong.
"""
from __future__ import annotations

import json
import re
from typing import Mapping

import numpy as np
import pandas as pd

from cr2.core.boundary import shown
from cr2.core.errors import DataValidationError, InvalidValueError

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
        raise DataValidationError(f"MMLU-Pro question_id {shown(dup, quoted=False)} appears more than once")
    options = [list(json.loads(o)) for o in questions["options_json"]]
    letters = "ABCDEFGHIJ"
    for qid, opts, ans, idx in zip(questions["question_id"], options, questions["answer"], questions["answer_index"]):
        if not 2 <= len(opts) <= 10 or ans not in letters[: len(opts)] or letters.index(ans) != int(idx):
            raise DataValidationError(f"MMLU-Pro question {shown(qid, quoted=False)}: answer {shown(ans)} (index "
                                      f"{shown(idx)}) is not among its {len(opts)} options")
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
    """Labels of the pool's models on MMLU-Pro as the import table: query_id, model (pool id), correct, output_tokens.

    question_ids: source question_id → warehouse query_id (the ingested questions);
    model_names: pool model id → the source's model name. Every pool model must cover every question.
    """
    _require(outputs, OUTPUT_COLUMNS, "the MMLU-Pro outputs file")
    queries = pd.DataFrame({"query_id": list(question_ids.values()), "benchmark": BENCHMARK,
                            "question_id": np.fromiter(question_ids.keys(), dtype=np.int64, count=len(question_ids))})
    outputs = outputs.assign(question_id=outputs["question_id"].astype(np.int64))
    return join_measured_labels(outputs, queries, {"question_id": "question_id"}, model_names, chars_per_token)


def join_measured_labels(outputs: pd.DataFrame, queries: pd.DataFrame, on: Mapping[str, str],
                         model_names: Mapping[str, str | Mapping[str, str]],
                         chars_per_token: float | Mapping[str, float]) -> pd.DataFrame:
    """Labels of any measured pool as the import table: query_id, model (pool id), correct, output_tokens.

    outputs: one row per (model, item): `model`, `correct`, `generated_chars` and the key columns (keys of `on`);
    queries: the ingested queries: query_id, benchmark (dataset name), the key columns (values of `on`);
    on: outputs column → queries column that together identify an item (labels.measured.join);
    model_names: pool model id → name in the outputs, or {benchmark: name};
    chars_per_token: one factor or {benchmark: factor}. Every pool model must answer every query exactly once.
    """
    _require(outputs, ("model", "correct", "generated_chars", *on), "the measured outputs file")
    _require(queries, ("query_id", "benchmark", *on.values()), "the ingested queries")
    keys = [f"_key{i}" for i in range(len(on))]  # neutral names: an outputs key may be called `benchmark` too
    outputs = outputs.rename(columns=dict(zip(on, keys)))
    queries = queries[["query_id", "benchmark", *on.values()]].rename(columns=dict(zip(on.values(), keys)))
    factors = chars_per_token if isinstance(chars_per_token, Mapping) else None
    if factors is None and not chars_per_token > 0:
        raise InvalidValueError(f"chars_per_token must be > 0, got {chars_per_token}")
    benchmarks = list(dict.fromkeys(queries["benchmark"]))
    known = set(outputs["model"].unique())
    unknown = {m: n for m, n in model_names.items()
               if any(n_b not in known for n_b in ([n] if isinstance(n, str) else n.values()))}
    if unknown:
        raise DataValidationError(
            f"labels.measured.models names models the outputs file does not have: {unknown}; it has "
            f"{', '.join(shown(k, 40, quoted=False) for k in sorted(map(str, known))[:20])}"
            f"{f' and {len(known) - 20:,} more' if len(known) > 20 else ''}")
    frames = []
    for model_id, names in model_names.items():
        for bench in benchmarks:
            name = names if isinstance(names, str) else names.get(bench)
            if name is None:
                raise DataValidationError(f"labels.measured.models.{model_id} names no model for benchmark '{bench}'")
            wanted = queries[queries["benchmark"] == bench]
            rows = outputs[outputs["model"] == name]
            matched = wanted.merge(rows, on=keys, how="left", validate="one_to_many", indicator=True)
            if matched["query_id"].duplicated().any():
                dup = matched.loc[matched["query_id"].duplicated(), "query_id"].iloc[0]
                raise DataValidationError(f"the outputs of '{name}' hold more than one row for query "
                                          f"{shown(dup, quoted=False)} (key {', '.join(on)}); keep one output per item")
            missing = matched.loc[matched["_merge"] == "left_only", "query_id"].tolist()
            if missing:
                examples = [shown(m, quoted=False) for m in sorted(missing, key=str)[:3]]
                raise DataValidationError(
                    f"the outputs of '{name}' (pool model {model_id}) lack {len(missing)} of the {len(wanted)} "
                    f"ingested questions of {bench}, e.g. {examples}; pick a model that answered every question")
            factor = factors[bench] if factors is not None else chars_per_token
            chars = matched["generated_chars"].to_numpy(dtype=np.float64)
            frames.append(pd.DataFrame({
                "query_id": matched["query_id"].to_numpy(),
                "model": model_id,
                "correct": matched["correct"].fillna(False).astype(bool).to_numpy(),  # no extracted answer: wrong
                # L_out,m(x): measured answer length in characters / characters per token [cr2 decision]
                "output_tokens": np.rint(chars / factor).astype(np.int64),
            }))
    return pd.concat(frames, ignore_index=True)
