"""The report's tables as booktabs LaTeX (tables/<key>.tex beside the page)."""
from __future__ import annotations

import pandas as pd


def to_latex(frame: pd.DataFrame) -> str:
    """A booktabs LaTeX tabular of the frame (values as shown in the report)."""
    cols = list(frame.columns)
    esc = lambda v: str(v).replace("_", r"\_").replace("%", r"\%").replace("&", r"\&")  # noqa: E731
    lines = [r"\begin{tabular}{" + "l" * 1 + "r" * (len(cols) - 1) + "}", r"\toprule",
             " & ".join(esc(c) for c in cols) + r" \\", r"\midrule"]
    lines += [" & ".join(esc("–" if pd.isna(v) else v) for v in row) + r" \\" for row in frame.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"
