"""A table as an object (scikit-learn's `Display` idea): built once from stored frames, rendered many ways.

A table kind (cr2.report.pools, …) is a subclass that writes its header and its rows of cells — every number through
cr2.report.cells — when it is built; `markdown()` (the results page, the study commands), `rich()` (a terminal),
`artifact()` (a Prefect table artifact: plain JSON-safe rows, no prefect import here) and `html()` all show those
same cells. A verdict word in a cell comes from the `word` callable the table was built with, so the results page can
mark the words its verdict functions produced (cr2_cli.resultsdoc.core.Doc.word).
"""
from __future__ import annotations

import html as _html
from typing import Any, Callable, Iterable

import pandas as pd

from cr2.report.markdown import text_table

Word = Callable[[Any], str]  # a verdict (cr2.evaluation.statistics.Verdict or None) → the text printed for it


def plain_word(verdict: Any) -> str:
    """A verdict as plain text: '–' where there is none."""
    return "–" if verdict is None else str(verdict)


class Table:
    """A header and rows of cells already written as text; what to say when there are no rows."""

    head: list[str]
    rows: list[list[str]]
    why: str = "this run has none here"
    tight_empty: bool = False

    def __init__(self, head: list[str], rows: list[list[str]], why: str = "this run has none here") -> None:
        self.head, self.rows, self.why = list(head), [list(r) for r in rows], why

    def set_records(self, records: list[dict], why: str = "this run has none here", fill: str | None = None) -> None:
        """Fill the table from rows given as dicts (header → cell text; a header missing from a row: `fill`); the
        columns in the order they first appear."""
        frame = pd.DataFrame(records)
        if fill is not None:
            frame = frame.fillna(fill)
        Table.__init__(self, [str(c) for c in frame.columns], frame.astype(object).values.tolist(), why)

    def set_frame(self, shown: pd.DataFrame, why: str = "this run has none here") -> None:
        """Fill the table from a display frame (every cell already written as text; the header: its columns)."""
        Table.__init__(self, [str(c) for c in shown.columns], shown.astype(object).values.tolist(), why)

    def __len__(self) -> int:
        return len(self.rows)

    def frame(self) -> pd.DataFrame:
        """The cells as a frame of text (columns: the header)."""
        return pd.DataFrame(self.rows, columns=self.head, dtype=object)

    def markdown(self) -> str:
        """A markdown table ending in a newline (cr2.report.markdown, the one writer); one line saying why when empty."""
        return text_table(self.head, self.rows, self.why, tight_empty=self.tight_empty)

    def artifact(self) -> list[dict]:
        """The rows as JSON-safe records, header → cell (a Prefect table artifact takes them as they are)."""
        return [dict(zip((_unescape(h) for h in self.head), (_unescape(c) for c in r))) for r in self.rows]

    def rich(self, title: str | None = None, justify: str = "left", left: Iterable[str] = ()):
        """A rich terminal table of the same cells (markdown escapes removed), columns justified `justify` but those
        named in `left`, justified left."""
        from rich.markup import escape
        from rich.table import Table as RichTable

        t = RichTable(title=title)
        left = set(left)
        for h in self.head:
            t.add_column(escape(_unescape(h)), justify="left" if h in left else justify)
        for r in self.rows:  # a cell's '[lo, hi]' is text, not rich markup
            t.add_row(*(escape(_unescape(c)) for c in r))
        return t

    def html(self) -> str:
        """An HTML table of the same cells (escaped)."""
        esc = _html.escape
        head = "".join(f"<th>{esc(_unescape(h))}</th>" for h in self.head)
        body = "".join("<tr>" + "".join(f"<td>{esc(_unescape(c))}</td>" for c in r) + "</tr>" for r in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _unescape(cell: Any) -> str:
    """A markdown cell's text without the escapes a markdown table needs (`\\|`)."""
    return str(cell).replace("\\|", "|")


def rows_where(df: pd.DataFrame, **where) -> pd.DataFrame:
    """Rows of df matching every column = value (None: the column is NULL; floats to 1e-9)."""
    d = df
    for k, v in where.items():
        if v is None:
            d = d[d[k].isna()]
        elif isinstance(v, float):
            d = d[(d[k] - v).abs() < 1e-9]
        else:
            d = d[d[k] == v]
    return d
