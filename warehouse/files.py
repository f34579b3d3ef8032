"""Reading user-supplied table files (Parquet or CSV) with errors that name the file and the fix.

The reading itself is cr2.core.boundary's (`read_table_file`, `parse_table`): one bounded reader for every table
file, labels, benchmarks and measured outputs alike, so a limit holds everywhere or nowhere."""
from __future__ import annotations

from pathlib import Path

from cr2.core.boundary import TABLE_SUFFIXES, parse_table, read_table_bytes, read_table_file

__all__ = ["TABLE_SUFFIXES", "home_relative", "in_home", "parse_table", "read_table_bytes", "read_table_file"]


def home_relative(home: str | Path, path: str | Path) -> str:
    """How the warehouse records a file: relative to the home when it lies inside it (so a copied or moved home
    works on its own), absolute otherwise (e.g. under $CR2_CACHE)."""
    p, h = Path(path).resolve(), Path(home).resolve()
    try:
        return p.relative_to(h).as_posix()
    except ValueError:
        return str(p)


def in_home(home: str | Path, stored: str | Path) -> Path:
    """The file a recorded path names: relative paths are relative to the home."""
    p = Path(stored)
    return p if p.is_absolute() else Path(home) / p
