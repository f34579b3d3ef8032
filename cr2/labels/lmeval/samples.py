"""lm-eval's logged samples → label rows (one per query, keyed by the `query_id` carried in its doc) and
JSON-able sample records (the prompt and what the model answered), kept as the run's audit trail."""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from cr2.core.errors import DataValidationError

ROW_COLUMNS = ("query_id", "correct", "output_tokens", "doc_id", "prompt_hash", "filter")


def _generated_text(sample: dict[str, Any]) -> str:
    """The raw generation of a generate_until sample (resps = [[text]]), before any answer filter."""
    resps = sample.get("resps") or [[""]]
    first = resps[0]
    return str(first[0] if isinstance(first, (list, tuple)) else first)


def samples_to_rows(
    samples: list[dict[str, Any]],
    *,
    metric: str,
    filter_name: str,
    generative: bool,
    expected_ids: list[str],
    count_tokens: Callable[[str], int | None] | None = None,
) -> pd.DataFrame:
    """Label rows (query_id, correct, output_tokens, doc_id, prompt_hash, filter) from one task's samples.

    `correct` is the sample's `metric` under `filter_name` (acc / exact_match / pass_at_1 ∈ {0, 1});
    `output_tokens` is the generated token count for generative tasks and None for multiple choice.
    Raises DataValidationError unless every expected query has exactly one sample and no other appears.
    """
    chosen = [s for s in samples if s.get("filter", "none") == filter_name]
    if samples and not chosen:
        found = sorted({s.get("filter", "none") for s in samples})
        raise DataValidationError(f"lm-eval logged no samples under filter '{filter_name}' (found {found})")
    rows = []
    for s in chosen:
        if metric not in s:
            raise DataValidationError(f"lm-eval sample {s.get('doc_id')} has no '{metric}' score (keys: {sorted(s)})")
        qid = s["doc"]["query_id"]
        tokens = None
        if generative and count_tokens is not None:
            tokens = count_tokens(_generated_text(s))
        rows.append({
            "query_id": str(qid), "correct": float(s[metric]) >= 0.5, "output_tokens": tokens,
            "doc_id": int(s["doc_id"]), "prompt_hash": s.get("prompt_hash"), "filter": filter_name,
        })
    df = pd.DataFrame(rows, columns=list(ROW_COLUMNS))
    df["output_tokens"] = df["output_tokens"].astype("Int64")
    df["correct"] = df["correct"].astype(bool)
    seen = df["query_id"].tolist()
    if len(seen) != len(set(seen)):
        dup = df.loc[df["query_id"].duplicated(), "query_id"].iloc[0]
        raise DataValidationError(f"lm-eval returned query {dup} more than once")
    missing = sorted(set(expected_ids) - set(seen))
    extra = sorted(set(seen) - set(expected_ids))
    if missing or extra:
        raise DataValidationError(
            f"lm-eval samples do not match the chunk's queries: missing {missing[:5]}{'…' if len(missing) > 5 else ''}, "
            f"unexpected {extra[:5]}{'…' if len(extra) > 5 else ''}"
        )
    order = {q: i for i, q in enumerate(expected_ids)}
    return df.sort_values("query_id", key=lambda s: s.map(order)).reset_index(drop=True)


def _plain(value: Any) -> Any:
    """numpy scalars and tuples → JSON-able Python values."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    return value


def sample_records(
    samples: list[dict[str, Any]], *, metric: str, filter_name: str, generative: bool
) -> list[dict[str, Any]]:
    """lm-eval's per-sample log of the label filter, one JSON-able record per query.

    Multiple choice: the prompt, each choice's continuation and log-likelihood, the argmax prediction.
    Generative: the prompt, the model's raw generation and the answer the filter extracted from it.
    Both carry the target and the score that became the label.
    """
    out = []
    for s in samples:
        if s.get("filter", "none") != filter_name:
            continue
        args = s.get("arguments") or [[""]]
        rec: dict[str, Any] = {
            "query_id": str(s["doc"]["query_id"]), "doc_id": int(s["doc_id"]), "filter": filter_name,
            "prompt": str(args[0][0]), "target": _plain(s.get("target")), metric: float(s[metric]),
            "correct": float(s[metric]) >= 0.5, "prompt_hash": s.get("prompt_hash"),
        }
        if generative:
            rec["generation"] = _generated_text(s)
            answer = s.get("filtered_resps")
            rec["answer"] = _plain(answer[0] if isinstance(answer, (list, tuple)) and answer else answer)
        else:
            rec["choices"] = [str(a[1]) for a in args]
            lls = [float(r[0]) for r in (s.get("filtered_resps") or [])]
            rec["loglikelihoods"] = lls
            rec["prediction"] = int(max(range(len(lls)), key=lls.__getitem__)) if lls else None
        out.append(rec)
    return out
