"""Validation of imported correctness labels (measured y_m(x) from elsewhere, e.g. your own lm-eval runs).

An import is a long table, one row per (query, model):

| column | required | accepted values |
|---|---|---|
| query_id | yes | a known query id (the warehouse's `queries.query_id`) |
| model (or model_id) | yes | a model id of the configured pool |
| correct | yes | bool; 0/1 (int) or 0.0/1.0 (float: lm-eval's per-sample `acc`); '0' '1' '0.0' '1.0' 'true' 'false' |
| output_tokens | no | integer 0 … MAX_OUTPUT_TOKENS (floats must be whole numbers; true/false refused); null where not recorded |

Strings are compared lower-cased with surrounding spaces removed; a null or any other `correct` is an error.
A cell holding a list, array or mapping (possible in Parquet) is refused in every column.

Other columns are ignored. Every problem raises DataValidationError naming the problem, how many rows
have it, and the first offending cell as "row R, column 'C', value V" (R counts data rows from 1: the first
row after a CSV's header, the first row of a Parquet file). All of it runs before anything is written. Completeness (every query × model) is not required here; the pipeline
checks coverage of the configured label source before training.
"""
from __future__ import annotations

from typing import Iterable

import numpy as np
import pandas as pd

from cr2.core.errors import DataValidationError

_TRUE = {"1", "1.0", "true"}
_FALSE = {"0", "0.0", "false"}
# the longest output any model records is far below this; larger counts are data errors (2^31 overflowed, 1e300)
MAX_OUTPUT_TOKENS = 10_000_000


def _cell(col: pd.Series, mask: pd.Series | np.ndarray) -> str:
    """'row R, column 'C', value V' of the first row where `mask` holds (rows count from 1)."""
    i = int(np.flatnonzero(np.asarray(mask, dtype=bool))[0])
    value = col.iloc[i]
    value = value.item() if isinstance(value, np.generic) else value
    shown = "null" if _is_null(value) else _short(value.tolist() if isinstance(value, np.ndarray) else value)
    return f"row {i + 1}, column '{col.name}', value {shown}"


def _is_null(value) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):  # lists, arrays: not a null
        return False


def _refuse_non_scalars(col: pd.Series) -> None:
    """Lists, arrays and mappings (Parquet list / struct columns) are not labels: a DataValidationError at the first."""
    if col.dtype != object:
        return
    bad = col.map(lambda v: isinstance(v, (list, tuple, dict, set, np.ndarray)))
    if bad.any():
        raise DataValidationError(
            f"column '{col.name}' must hold one value per row, not lists or mappings; {int(bad.sum())} rows do not "
            f"(first: {_cell(col, bad)})"
        )


MAX_SHOWN_CHARS = 80  # an offending value is echoed at most this long: a 200 MB cell must not become a 200 MB message


def _short(value) -> str:
    """repr(value), at most MAX_SHOWN_CHARS characters (longer: cut, with its length said)."""
    text = repr(value)
    return text if len(text) <= MAX_SHOWN_CHARS else f"{text[:MAX_SHOWN_CHARS - 1]}… ({len(text):,} characters)"


def _examples(values: Iterable, k: int = 3) -> str:
    vals = list(dict.fromkeys(values))
    more = f" … ({len(vals)} distinct)" if len(vals) > k else ""
    return ", ".join(_short(v) for v in vals[:k]) + more


def _as_bool(col: pd.Series) -> pd.Series:
    """`correct` as bool, or DataValidationError listing the offending values."""
    if col.isna().any():
        rows = col.index[col.isna()].tolist()
        raise DataValidationError(
            f"column 'correct' has {len(rows)} null values (first: {_cell(col, col.isna())}); every label needs 0 or 1"
        )
    if pd.api.types.is_bool_dtype(col):
        return col.astype(bool)
    if pd.api.types.is_numeric_dtype(col):
        bad = ~col.isin([0, 1])
        if bad.any():
            raise DataValidationError(
                f"column 'correct' must be binary (0/1, true/false); {int(bad.sum())} rows are not, e.g. "
                f"{_examples(col[bad])} (first: {_cell(col, bad)})"
            )
        return col.astype(bool)
    text = col.map(lambda v: str(v).strip().lower() if not isinstance(v, (bool, np.bool_)) else str(bool(v)).lower())
    ok = text.isin(_TRUE | _FALSE)
    if not ok.all():
        raise DataValidationError(
            f"column 'correct' must be binary (bool, 0/1 or the strings '0', '1', 'true', 'false'); "
            f"{int((~ok).sum())} rows are not, e.g. {_examples(col[~ok])} (first: {_cell(col, ~ok)})"
        )
    return text.isin(_TRUE)


def _as_tokens(col: pd.Series) -> pd.Series:
    """`output_tokens` as nullable Int64 (0 … MAX_OUTPUT_TOKENS, whole numbers), or DataValidationError.

    Every check runs on the exact values (Python ints, floats) before any cast, so 2^31 + 5 or 1e300 can never be
    stored wrapped or truncated."""
    is_bool = col.map(lambda v: isinstance(v, (bool, np.bool_)))
    if is_bool.any():
        raise DataValidationError(
            f"column 'output_tokens' must be a whole number of tokens or null, not true/false; {int(is_bool.sum())} "
            f"rows are booleans (first: {_cell(col, is_bool)})"
        )
    num = pd.to_numeric(col.astype(object), errors="coerce")
    unparsable = num.isna() & col.notna()
    if unparsable.any():
        raise DataValidationError(
            f"column 'output_tokens' must be a whole number of tokens or null; {int(unparsable.sum())} rows are not "
            f"numbers, e.g. {_examples(col[unparsable])} (first: {_cell(col, unparsable)})"
        )
    num = num.astype(float) if not pd.api.types.is_integer_dtype(num) else num
    negative = num < 0
    if negative.any():
        raise DataValidationError(
            f"column 'output_tokens' must be ≥ 0; {int(negative.sum())} rows are negative, e.g. {_examples(num[negative])} "
            f"(first: {_cell(col, negative)})"
        )
    # exact comparison on the parsed values: ints stay ints (no float rounding), floats compare as floats
    big = col.map(lambda v: _token_value(v) > MAX_OUTPUT_TOKENS if not _is_null(v) else False).astype(bool)
    if big.any():
        raise DataValidationError(
            f"column 'output_tokens' must be at most {MAX_OUTPUT_TOKENS:,} tokens; {int(big.sum())} rows are larger "
            f"(first: {_cell(col, big)})"
        )
    fractional = num.notna() & (num != np.floor(num.astype(float).fillna(0)))
    if fractional.any():
        raise DataValidationError(
            f"column 'output_tokens' must hold whole numbers; {int(fractional.sum())} rows do not, "
            f"e.g. {_examples(num[fractional])} (first: {_cell(col, fractional)})"
        )
    return num.astype("Float64").round().astype("Int64")


def _token_value(value) -> float | int:
    """A token cell as an exact Python number (str → int or float; numpy scalars → Python)."""
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            return float(text)
    if isinstance(value, np.generic):
        return value.item()
    return value


def validate_imported_labels(
    df: pd.DataFrame, known_query_ids: Iterable[str], known_model_ids: Iterable[str]
) -> pd.DataFrame:
    """The import as a normalised frame — query_id, model_id (str), correct (bool), output_tokens (Int64, nullable)
    — or DataValidationError naming the first problem found (columns, ids, models, values, duplicates)."""
    if not isinstance(df, pd.DataFrame):
        raise DataValidationError(f"labels must be a table (DataFrame), got {type(df).__name__}")
    twice = sorted({str(c)[:40] for c in df.columns[df.columns.duplicated()]})
    if twice:
        raise DataValidationError(f"the label table has the column{'s' if len(twice) > 1 else ''} "
                                  f"{', '.join(map(repr, twice))} more than once; keep one column of each name")
    cols = set(df.columns)
    if "model" in cols and "model_id" in cols:
        raise DataValidationError("the label table has both 'model' and 'model_id' columns; keep one")
    model_col = "model_id" if "model_id" in cols else "model"
    missing = [c for c in ("query_id", model_col, "correct") if c not in cols]
    if missing:
        raise DataValidationError(
            f"the label table lacks column{'s' if len(missing) > 1 else ''} {', '.join(missing)}; it needs "
            f"query_id, model, correct [, output_tokens] (has: {', '.join(map(str, df.columns)) or 'no columns'})"
        )
    if len(df) == 0:
        raise DataValidationError("the label table has no rows; an import needs at least one (query_id, model, correct) "
                                  "row (is this the right file?)")
    df = df.reset_index(drop=True)
    for c in ("query_id", model_col, "correct", "output_tokens"):
        if c in cols:
            _refuse_non_scalars(df[c])
    for c in ("query_id", model_col):
        if df[c].isna().any():
            rows = df.index[df[c].isna()].tolist()
            raise DataValidationError(f"column '{c}' has {len(rows)} null values (first: {_cell(df[c], df[c].isna())})")
    qid = df["query_id"].astype(str)
    mid = df[model_col].astype(str)

    known_q = set(map(str, known_query_ids))
    unknown_q = ~qid.isin(known_q)
    if unknown_q.any():
        raise DataValidationError(
            f"{int(unknown_q.sum())} rows name query ids that are not in the warehouse, e.g. {_examples(qid[unknown_q])} "
            f"(first: {_cell(df['query_id'], unknown_q)}); "
            "ingest the benchmarks first (`cr2 ingest`) or fix the ids (format mmlu/<subject>/00042, mbpp/<task_id>)"
        )
    known_m = sorted(map(str, known_model_ids))
    unknown_m = ~mid.isin(set(known_m))
    if unknown_m.any():
        raise DataValidationError(
            f"{int(unknown_m.sum())} rows name models outside the pool, e.g. {_examples(mid[unknown_m])}; "
            f"known models: {', '.join(known_m)} (first: {_cell(df[model_col], unknown_m)})"
        )
    correct = _as_bool(df["correct"])
    tokens = _as_tokens(df["output_tokens"]) if "output_tokens" in cols else pd.Series(pd.NA, index=df.index, dtype="Int64")

    dup = pd.DataFrame({"q": qid, "m": mid}).duplicated(keep=False)
    if dup.any():
        pairs = list(dict.fromkeys(zip(qid[dup], mid[dup])))
        raise DataValidationError(
            f"{len(pairs)} (query_id, model) pairs appear more than once ({int(dup.sum())} rows), e.g. "
            f"{_examples(pairs)} (first repeat: {_cell(df['query_id'], pd.DataFrame({'q': qid, 'm': mid}).duplicated())}); "
            "keep one label per pair"
        )
    return pd.DataFrame({"query_id": qid, "model_id": mid, "correct": correct.astype(bool), "output_tokens": tokens})
