"""Reading user-supplied table files (Parquet or CSV) with errors that name the file and the fix."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from cr2.core.errors import DataValidationError


def read_table_file(path: str | Path) -> pd.DataFrame:
    """A Parquet (.parquet/.pq) or CSV (.csv) file as a DataFrame; DataValidationError if missing or unreadable."""
    p = Path(path)
    if not p.is_file():
        raise DataValidationError(f"{p}: file not found")
    suffix = p.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            return pd.read_parquet(p)
        if suffix == ".csv":
            return pd.read_csv(p)
    except Exception as exc:  # pyarrow / pandas parser errors: report them as a bad file
        raise DataValidationError(f"{p}: not a readable {suffix[1:]} file ({type(exc).__name__}: {str(exc)[:200]})") from None
    raise DataValidationError(f"{p}: unsupported file type '{suffix}'; use .parquet or .csv")


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
