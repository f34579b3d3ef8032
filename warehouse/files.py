"""Reading user-supplied table files (Parquet or CSV) with errors that name the file and the fix."""
from __future__ import annotations

import csv
import io
from collections import Counter
from pathlib import Path

import pandas as pd

from cr2.core.errors import DataValidationError

TABLE_SUFFIXES = (".parquet", ".pq", ".csv")


def read_table_bytes(path: str | Path) -> bytes:
    """The bytes of a table file a user gives, read through the bounded reader (cr2.core.boundary.read_bounded: a
    regular file — never a FIFO or a device — of at most MAX_TABLE_BYTES); DataValidationError naming the file."""
    from cr2.core.boundary import MAX_TABLE_BYTES, read_bounded
    from cr2.core.errors import InvalidValueError

    p = Path(path)
    if p.suffix.lower() not in TABLE_SUFFIXES:
        raise DataValidationError(f"{p}: unsupported file type '{p.suffix.lower()}'; use .parquet or .csv")
    try:
        return read_bounded(p, MAX_TABLE_BYTES, "table file")
    except InvalidValueError as exc:
        raise DataValidationError(str(exc)) from None


def parse_table(raw: bytes, path: str | Path) -> pd.DataFrame:
    """The bytes of a Parquet (.parquet/.pq) or CSV (.csv) file `path` as a DataFrame; DataValidationError for an
    unreadable file or one with two columns of the same name (which of them would count is a guess)."""
    p = Path(path)
    suffix = p.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            table = pq.read_table(io.BytesIO(raw))
            names = table.column_names
        else:
            names = next(csv.reader(io.StringIO(raw.decode("utf-8-sig", "replace").partition("\n")[0])), [])
            table = None
    except Exception as exc:  # pyarrow / csv parser errors: report them as a bad file
        raise DataValidationError(f"{p}: not a readable {suffix[1:]} file ({type(exc).__name__}: {str(exc)[:200]})") from None
    twice = sorted(n for n, k in Counter(names).items() if k > 1)
    if twice:
        shown = ", ".join(repr(n[:40]) for n in twice[:5])
        raise DataValidationError(f"{p}: the column name{'s' if len(twice) > 1 else ''} {shown} appear"
                                  f"{'' if len(twice) > 1 else 's'} more than once; keep one column of each name")
    try:
        return table.to_pandas() if table is not None else pd.read_csv(io.BytesIO(raw))
    except Exception as exc:  # pandas parser errors: report them as a bad file
        raise DataValidationError(f"{p}: not a readable {suffix[1:]} file ({type(exc).__name__}: {str(exc)[:200]})") from None


def read_table_file(path: str | Path) -> pd.DataFrame:
    """A Parquet (.parquet/.pq) or CSV (.csv) file as a DataFrame, read bounded; DataValidationError if missing,
    not a regular file, too large, unreadable or with a column name twice."""
    return parse_table(read_table_bytes(path), path)


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
