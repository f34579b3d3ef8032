"""The DuckDB warehouse: schema, versioning, transactions, views and Parquet export.

All database I/O of cr2 goes through this module. Every write is one transaction: a failure leaves the
warehouse exactly as it was.
"""
from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from cr2.config import REPO_ROOT
from cr2.errors import WarehouseError

SCHEMA_VERSION = "3"  # 2: thresholds.delta and thresholds."group" (LTT, Mondrian), table guarantees;
# 3: costs.cost_est_norm (pre-execution ĉ), eval_runs.decision_cost, table methods (the router catalogue)
MIGRATIONS_DIR = Path(__file__).with_name("migrations")  # <from>_to_<to>.sql, applied in one transaction each
READABLE_OLD_VERSIONS = ("1", "2")  # opened read-only as they are (readers treat missing columns as defaults)
SCHEMA_FILE = Path(__file__).with_name("schema.sql")
VIEWS_DIR = Path(__file__).with_name("views")
DB_NAME = "cr2.duckdb"


def default_home() -> Path:
    """CR2_HOME if set, else var/ under the repository."""
    env = os.environ.get("CR2_HOME")
    return Path(env).expanduser().resolve() if env else REPO_ROOT / "var"


def table_names() -> list[str]:
    """Names of the tables schema.sql creates, in file order."""
    return re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA_FILE.read_text())


def view_names() -> list[str]:
    return sorted(p.stem for p in VIEWS_DIR.glob("*.sql"))


def _migration_path(found: str) -> list[Path]:
    """The migration files from version `found` to SCHEMA_VERSION (<v>_to_<v+1>.sql each), or [] when a step is missing."""
    if not (found.isdigit() and int(found) < int(SCHEMA_VERSION)):
        return []
    steps = [MIGRATIONS_DIR / f"{v}_to_{v + 1}.sql" for v in range(int(found), int(SCHEMA_VERSION))]
    return steps if all(p.is_file() for p in steps) else []


class Warehouse:
    """One DuckDB file under `home` (default var/), with schema version checking."""

    def __init__(self, home: str | Path | None = None, read_only: bool = False):
        self.home = Path(home).expanduser().resolve() if home is not None else default_home()
        self.path = self.home / DB_NAME
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise WarehouseError(f"no warehouse at {self.path}; run `cr2 run` (or `cr2 ingest`) first")
        self.home.mkdir(parents=True, exist_ok=True)
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            raise WarehouseError(
                f"cannot open the warehouse {self.path}: {exc}. Is another cr2 process writing to it? "
                "Wait for it to finish, or point CR2_HOME/--home elsewhere."
            ) from None
        self._check_or_create_schema()

    # ---------------------------------------------------------- lifecycle
    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> "Warehouse":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _check_or_create_schema(self) -> None:
        has_meta = self.con.execute(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'meta'"
        ).fetchall()[0][0]
        if has_meta:
            rows = self.con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
            row = rows[0] if rows else None
            found = row[0] if row else "unknown"
            self.schema_version = found
            if found != SCHEMA_VERSION and not self.read_only and _migration_path(found):
                self._migrate(found)
                found = SCHEMA_VERSION
            if found != SCHEMA_VERSION and self.read_only and found in READABLE_OLD_VERSIONS:
                return  # an older warehouse read as it is; the next write command migrates it
            if found != SCHEMA_VERSION:
                raise WarehouseError(
                    f"warehouse {self.path} has schema version {found}, this cr2 expects {SCHEMA_VERSION}. "
                    f"Export what you need (`cr2 export TABLE`), then move the file away (or set CR2_HOME to a new "
                    f"folder) and run `cr2 run` to rebuild it."
                )
            if not self.read_only:
                with self.transaction():  # tables added since (all CREATE TABLE IF NOT EXISTS): additive, same version
                    self.con.execute(SCHEMA_FILE.read_text())
                self._create_views()
            return
        if self.read_only:
            raise WarehouseError(f"{self.path} is not a cr2 warehouse (no meta table)")
        with self.transaction():
            self.con.execute(SCHEMA_FILE.read_text())
            self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [SCHEMA_VERSION])
        self.schema_version = SCHEMA_VERSION
        self._create_views()

    def _migrate(self, found: str) -> None:
        """Upgrade the schema in place from version `found`, step by step in one transaction (a failure leaves it
        as it was)."""
        with self.transaction():
            for step in _migration_path(found):
                self.con.execute(step.read_text())
            self.con.execute(SCHEMA_FILE.read_text())  # tables new in this version (CREATE … IF NOT EXISTS)
            self.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [SCHEMA_VERSION])
        self.schema_version = SCHEMA_VERSION

    def _create_views(self) -> None:
        with self.transaction():
            for name in view_names():
                self.con.execute(f"CREATE OR REPLACE VIEW {name} AS\n{(VIEWS_DIR / f'{name}.sql').read_text()}")

    # ---------------------------------------------------------- transactions and writes
    @contextlib.contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """BEGIN … COMMIT, or ROLLBACK on any exception (the warehouse stays as it was)."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            yield self.con
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        else:
            self.con.execute("COMMIT")

    def insert_df(self, table: str, df: pd.DataFrame, con: duckdb.DuckDBPyConnection | None = None) -> int:
        """Append the rows of df (columns named as in the table) to `table`; returns the row count."""
        c = con or self.con
        if len(df) == 0:
            return 0
        cols = ", ".join(f'"{col}"' for col in df.columns)
        c.register("_cr2_frame", df)
        try:
            c.execute(f'INSERT INTO {table} ({cols}) SELECT {cols} FROM _cr2_frame')
        finally:
            with contextlib.suppress(duckdb.Error):  # inside an aborted transaction; the rollback cleans up
                c.unregister("_cr2_frame")
        return len(df)

    def replace_where(self, table: str, df: pd.DataFrame, where: dict[str, Any] | None = None) -> int:
        """In one transaction: delete the rows of `table` matching `where` (all rows if None), insert df."""
        with self.transaction() as con:
            self._delete(con, table, where)
            return self.insert_df(table, df, con)

    def delete_where(self, table: str, where: dict[str, Any] | None, con: duckdb.DuckDBPyConnection | None = None) -> None:
        self._delete(con or self.con, table, where)

    @staticmethod
    def _delete(con: duckdb.DuckDBPyConnection, table: str, where: dict[str, Any] | None) -> None:
        if not where:
            con.execute(f"DELETE FROM {table}")
            return
        clause = " AND ".join(f'"{k}" = ?' for k in where)
        con.execute(f"DELETE FROM {table} WHERE {clause}", list(where.values()))

    # ---------------------------------------------------------- reads
    def df(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> pd.DataFrame:
        """Run a query and return a pandas DataFrame."""
        return self.con.execute(sql, params or []).df()

    def scalar(self, sql: str, params: list[Any] | None = None) -> Any:
        rows = self.con.execute(sql, params or []).fetchall()  # fetchall: DuckDB 2 refuses new work on an unfinished result
        row = rows[0] if rows else None
        return None if row is None else row[0]

    def count(self, table: str) -> int:
        return int(self.scalar(f"SELECT count(*) FROM {table}"))

    def table_fingerprint(self, table: str, where: str = "") -> str:
        """Content hash of a table (order-independent), for cache keys."""
        value = self.scalar(f"SELECT coalesce(sum(hash(t)), 0)::VARCHAR || ':' || count(*)::VARCHAR FROM {table} t {where}")
        return str(value)

    def export(self, table: str, out_dir: str | Path | None = None) -> Path:
        """Write `table` (or a view) to out_dir/TABLE.parquet (zstd); returns the path."""
        known = set(table_names()) | set(view_names())
        if table not in known:
            from cr2.errors import did_you_mean

            raise did_you_mean("table", table, sorted(known))
        out = Path(out_dir) if out_dir is not None else self.home / "export"
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{table}.parquet"
        tmp = path.with_suffix(".parquet.tmp")
        self.con.execute(f"COPY (SELECT * FROM {table}) TO '{tmp}' (FORMAT parquet, COMPRESSION zstd)")
        tmp.replace(path)  # atomic: a failed export never leaves a half-written file
        return path

