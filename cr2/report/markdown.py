"""The one markdown table writer: every markdown table cr2 prints or publishes goes through `markdown_table`."""
from __future__ import annotations

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



def text_table(head: list[str], rows: list[list[str]], why: str = "this run has none here", *,
               tight_empty: bool = False) -> str:
    """Rows of cells already written as text (cr2.report.cells) under `head`, as a markdown table."""
    return markdown_table(pd.DataFrame(rows, columns=head, dtype=object), why=why, tight_empty=tight_empty)


def label_banner(label_source: str) -> str:
    """The label-source line a markdown summary starts with; simulated labels are flagged loudly."""
    from cr2.labels import is_simulated

    if is_simulated(label_source):
        return (f"> **SIMULATED LABELS** (`{label_source}`): every number below is computed on correctness labels "
                "from the simulator (docs/labels.md), not on measured Qwen3 outputs.")
    return f"> Labels: measured, source `{label_source}`."
