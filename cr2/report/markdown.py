"""The one markdown table writer: every markdown table cr2 prints or publishes goes through `markdown_table`."""
from __future__ import annotations

from typing import Any

import pandas as pd


def markdown_table(df: pd.DataFrame, digits: int = 4, why: str = "this run has none here", *,
                   tight_empty: bool = False) -> str:
    """A markdown table of `df` (float columns to `digits` significant digits; '–' for a missing value in any column,
    never 'nan'), ending in a newline; an empty frame gives one line that says why it is empty. An empty cell is
    written '|  |', or '| |' with `tight_empty`."""
    if df.empty:
        return f"_(no rows: {why})_\n"
    df = df.copy()
    for c in df.columns:
        if pd.api.types.is_float_dtype(df[c]):
            df[c] = df[c].map(lambda v: "–" if pd.isna(v) else f"{v:.{digits}g}")
        else:  # a missing value of a text column is written '–' too, never 'nan' / 'None'
            df[c] = df[c].map(lambda v: "–" if v is None or (pd.api.types.is_scalar(v) and pd.isna(v)) else v)

    def line(cells) -> str:
        return "|" + "|".join(" " if tight_empty and c == "" else f" {c} " for c in map(str, cells)) + "|"

    return "\n".join([line(df.columns), line("---" for _ in df.columns),
                      *(line(r) for r in df.itertuples(index=False))]) + "\n"


def p_cell(p: Any, n_resamples: Any, digits: str = ".3g") -> str:
    """A bootstrap p (or its Holm adjustment) as a table cell: 0 — no resample on the other side of 0 — reads
    "< 1/B", since a bootstrap p is only known to be below the resolution of its B resamples; '—' where undefined."""
    import math

    if p is None or (isinstance(p, float) and math.isnan(p)):
        return "—"
    if float(p) == 0.0 and n_resamples is not None and not (isinstance(n_resamples, float) and math.isnan(n_resamples)) \
            and float(n_resamples) > 0:
        return f"< {1.0 / float(n_resamples):.2g}"
    return format(float(p), digits)

