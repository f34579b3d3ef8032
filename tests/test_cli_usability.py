"""What a new user meets on a pool of their own: output written to a file keeps whole table rows, and messages name
the fix that keeps their warehouse."""
from __future__ import annotations

import io

import pandas as pd

from cr2_cli.console import SafeConsole
from cr2.report.table import Table


def test_a_table_written_to_a_file_is_not_cut_to_80_columns(monkeypatch):
    """`cr2 guarantees > file` wrapped at 80 columns and cut cells to "crc-av…"; output that is not a terminal (and
    no $COLUMNS) lays a table out at its own width."""
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    wide = pd.DataFrame({"router": ["crc-avoidable-risk-all@knn"], "verdict": ["no violation detected"],
                         "risk": ["0.0412 [0.0391, 0.0433]"], "α": ["0.05"], "note": ["over 500 re-splits of val ∪ test"]})
    table = Table(list(wide.columns), wide.values.tolist())
    SafeConsole(file=out, markup=False).print(table.rich("every certified router"))
    rows = [ln for ln in out.getvalue().splitlines() if "crc-avoidable-risk-all@knn" in ln]
    assert len(rows) == 1 and "over 500 re-splits of val ∪ test" in rows[0], out.getvalue()
    monkeypatch.setenv("COLUMNS", "60")  # a width the user asks for still holds
    narrow = io.StringIO()
    SafeConsole(file=narrow, markup=False).print(table.rich("t"))
    assert max(len(ln) for ln in narrow.getvalue().splitlines()) <= 60
