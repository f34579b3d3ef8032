"""Reading user-supplied table files (Parquet or CSV) with errors that name the file and the fix."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from cr2.errors import DataValidationError


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
