"""The DuckDB warehouse: schema, versioning, transactions, views and Parquet export.

All database I/O of cr2 goes through this module. Every write is one transaction: a failure leaves the
warehouse exactly as it was.

No SQL is built from values: values travel as parameters (`?`), and the only names spliced into SQL
text are identifiers that `ident` / `relation` validated (a schema table or view, a plain column name).
tests/test_sql_safety.py scans the code for f-string / format / concatenated SQL.

Concurrency: DuckDB lets one process write or several read a file. Opening waits while another cr2
process holds a conflicting lock (up to $CR2_LOCK_WAIT_S, default 300 s), so a `cr2 sql` during a
stage never makes the stage lose its work, and a read during a write waits for it. `cr2 sql` itself
runs on a locked-down connection (`open_user_query`): no file or network access, no extensions, a
locked configuration, one read statement, and a time limit well below the writers' wait.

Storage failures name the file: a full disk (ENOSPC, a quota, a file-size limit; DuckDB's "No space left on device")
and a damaged file (DuckDB's "Corrupt database file", a checksum that does not match) become a WarehouseError
naming the warehouse file and what to do (`storage_error`), wherever DuckDB reports them — opening, reading, a
transaction's writes or its commit.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Sequence

import duckdb
import numpy as np
import pandas as pd

from cr2.core.errors import Cr2SqlError, WarehouseError
from cr2.core.files import atomic_write, disk_full_error, is_disk_full, replace_dir, temp_sibling
from cr2.config.shipped import default_home as _shipped_home

log = logging.getLogger(__name__)

SCHEMA_VERSION = "9"  # 2: thresholds.delta and thresholds."group" (LTT, Mondrian), table guarantees;
# 3: costs.cost_est_norm (pre-execution ĉ), eval_runs.decision_cost, table methods (the router catalogue);
# 4: queries.target nullable (a benchmark without gold answers, whose labels are imported);
# 5: costs.split_seed (the splits ĉ was estimated from, part of the key), eval_runs.split_seed;
# 6: thresholds.router (whose score a table calibrates: 'cr2' or a certified router, cr2.routers.certify)
# 7: pool_results.n_resamples (the resamples each interval kept: a mean saving's are those where every target is reached)
# 8: p_value of intervals, pool_results and premise_results (the bootstrap p of each interval's own resamples),
#    eval_runs.default_alpha (the one α a method swept over α is compared at)
# 9: family, family_size, p_holm and verdict of every stored test (intervals, equal_risk, pool_results): the one word;
#    guarantees.seed and guarantees.stage (each validity run's stream, and its confirmatory re-check of a flagged family)
#    equal_risk.dropped_targets (the grid targets a mean saving leaves out, no Always-model reaching them, and why)
EXPORT_BATCH_ROWS = 65_536  # rows per Arrow batch `export` streams to Parquet (memory stays one batch, not the table)
MIGRATIONS_DIR = Path(__file__).with_name("migrations")  # <from>_to_<to>.sql, applied in one transaction each
READABLE_OLD_VERSIONS = ("1", "2", "3", "4", "5", "6", "7", "8")  # opened read-only as they are (readers treat missing columns as defaults)
SCHEMA_FILE = Path(__file__).with_name("schema.sql")
VIEWS_DIR = Path(__file__).with_name("views")
MACROS_FILE = Path(__file__).with_name("macros.sql")  # SQL functions the views call, created before them
DB_NAME = "cr2.duckdb"
LOCK_WAIT_ENV = "CR2_LOCK_WAIT_S"
DEFAULT_LOCK_WAIT_S = 300.0
USER_QUERY_TIMEOUT_S = 60.0  # `cr2 sql` default: well below DEFAULT_LOCK_WAIT_S, so a writer outwaits any read
USER_QUERY_TIMEOUT_RANGE_S = (0.01, 86_400.0)  # the time limits `cr2 sql` accepts: 10 ms … one day
INTERRUPT_REPEAT_S = 0.05  # after the deadline the interrupt is repeated this often until the statement has ended
# what `cr2 sql` may run: one read statement (SELECT, WITH, FROM …, DESCRIBE, SHOW, SUMMARIZE, or EXPLAIN of one)
USER_QUERY_TYPES = ("SELECT", "EXPLAIN")
# the configuration every connection is opened with, set at connect before any SQL runs: a warehouse file is data a
# user may have been handed, and its stored views and macros run with the connection's rights, so no statement —
# ours or one a replaced view carries — reaches a file, URL or database beyond the warehouse, or loads an extension
LOCKED_CONFIG = {
    "enable_external_access": False,  # no file, URL or database access beyond the warehouse itself
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
    "lock_configuration": True,  # and no SET can undo any of it
}
# `cr2 sql` runs a user's SQL: the same lock-down, and memory capped well below DuckDB's default of 80 % of RAM (an
# aggregation over a cross join fills it in seconds); larger intermediate results spill to the warehouse's temp folder
USER_QUERY_MEMORY_LIMIT_MB = 2048
USER_QUERY_MEMORY_RANGE_MB = (64, 1_048_576)  # the caps `cr2 sql --max-memory-mb` accepts: 64 MiB … 1 TiB
USER_QUERY_CONFIG = {**LOCKED_CONFIG, "memory_limit": f"{USER_QUERY_MEMORY_LIMIT_MB}MiB"}
# DuckDB parses a PIVOT whose columns it must first look up (no IN list) as one MULTI statement: a temporary ENUM
# type of the distinct values, the query, the type dropped. That is one read query; any statement that writes,
# loads, attaches or configures is refused by its keywords (and the locked connection refuses it anyway).
_READ_STARTS = frozenset({"PIVOT", "UNPIVOT", "SELECT", "WITH", "FROM"})
_NOT_READ = frozenset({"INSERT", "UPDATE", "DELETE", "MERGE", "TRUNCATE", "CREATE", "DROP", "ALTER", "COPY", "EXPORT",
                       "IMPORT", "ATTACH", "DETACH", "USE", "SET", "RESET", "PRAGMA", "CALL", "INSTALL", "LOAD",
                       "CHECKPOINT", "VACUUM", "ANALYZE", "PREPARE", "EXECUTE", "DEALLOCATE", "BEGIN", "COMMIT",
                       "ROLLBACK", "ABORT", "START", "TRANSACTION"})
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_READ_FROM = re.compile(r"\b(?:FROM|JOIN)\s+\"?([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)
_READS: contextvars.ContextVar[set[str] | None] = contextvars.ContextVar("cr2_warehouse_reads", default=None)
_UMASK_LOCK = threading.Lock()

# {warehouse file: its state (file_state) when this process last found its schema and definitions to be this cr2's}.
# An open that finds the file in that state (no write since, by any process) skips re-reading the catalogue (≈ 60 %
# of an open); any write — a cr2 command's, or a change made outside cr2 — changes the state, and the next open
# checks everything again.
_VERIFIED: dict[str, tuple] = {}


def file_state(path: Path) -> tuple | None:
    """(inode, size, mtime in ns) of a DuckDB file and of its write-ahead log (None where absent): what any write to
    the database changes."""
    def one(p: str) -> tuple | None:
        try:
            st = os.stat(p)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    main = one(str(path))
    return None if main is None else (main, one(str(path) + ".wal"))


def ident(name: str) -> str:
    """`name` as a double-quoted SQL identifier, if it is a plain name (letters, digits, _); else an error."""
    if not isinstance(name, str) or not _IDENT.fullmatch(name):
        raise WarehouseError(f"{name!r} is not a valid SQL identifier (letters, digits and _ only, not starting "
                             "with a digit)")
    return f'"{name}"'


def idents(names) -> str:
    """Comma-separated quoted identifiers (each validated by `ident`)."""
    return ", ".join(ident(n) for n in names)


def relation(name: str) -> str:
    """A schema table or view (schema.sql, views/*.sql) as a quoted identifier; any other name is an error."""
    known = set(table_names()) | set(view_names())
    if name not in known:
        from cr2.core.errors import did_you_mean

        raise did_you_mean("table", str(name), sorted(known))
    return ident(name)


def shown_version(found: Any) -> str:
    """A stored value as an error message about the file shows it: a version or a column name is short, so
    anything longer is cut (the file is data a user may have been handed; its text must not flood every command's
    output)."""
    from cr2.core.boundary import shown

    return shown(str(found), 16, quoted=False)


def lock_wait_s() -> float:
    """How long opening the warehouse waits for another process's lock: $CR2_LOCK_WAIT_S or 300 s."""
    raw = os.environ.get(LOCK_WAIT_ENV)
    if raw is None:
        return DEFAULT_LOCK_WAIT_S
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= 0 or value == float("inf"):
        raise WarehouseError(f"{LOCK_WAIT_ENV}={raw!r} must be a finite number of seconds >= 0")
    return value


def _is_lock_conflict(exc: duckdb.Error) -> bool:
    msg = str(exc)
    return "Could not set lock" in msg or "Conflicting lock" in msg


# how DuckDB words a damaged file (a full disk: cr2.core.files.is_disk_full)
_DAMAGED_TEXT = ("Corrupt database file", "does not match stored checksum")


def storage_error(exc: BaseException, path: str | Path) -> WarehouseError | None:
    """The WarehouseError naming `path` when `exc` (or an exception it was raised from) says the disk holding it
    is full or the file is damaged; None for anything else."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        if is_disk_full(exc):
            where = exc.filename if isinstance(exc, OSError) and exc.filename is not None else path
            return WarehouseError(str(disk_full_error(where, exc, "Nothing was half-written: the failed write was "
                                                                  "rolled back and the warehouse keeps every completed one.")))
        if any(t in first for t in _DAMAGED_TEXT):
            return WarehouseError(
                f"{path} is damaged ({first}). Restore it from a backup or an export, or move it away (or point "
                "--home/CR2_HOME at another folder) and run `cr2 run` to build a new one.")
        exc = exc.__cause__ or exc.__context__
    return None


def default_home() -> Path:
    """CR2_HOME if set, else var/ under the repository (an installed wheel outside a checkout: ./var)."""
    from cr2.core.boundary import resolve_path

    env = os.environ.get("CR2_HOME")
    return resolve_path(env, "$CR2_HOME") if env else _shipped_home()


@functools.lru_cache(maxsize=1)
def _table_names() -> tuple[str, ...]:
    return tuple(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA_FILE.read_text()))


def table_names() -> list[str]:
    """Names of the tables schema.sql creates, in file order."""
    return list(_table_names())


@functools.lru_cache(maxsize=1)
def _view_names() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in VIEWS_DIR.glob("*.sql")))


@functools.lru_cache(maxsize=1)
def schema_digest() -> str:
    """Hash of schema.sql and every view file (read once per process): what a writable open makes sure is applied."""
    h = hashlib.sha256(SCHEMA_FILE.read_bytes() + b"\x1d" + MACROS_FILE.read_bytes())
    for name in view_names():
        h.update(b"\x1f" + name.encode() + b"\x1e" + (VIEWS_DIR / f"{name}.sql").read_bytes())
    return h.hexdigest()[:16]


def view_names() -> list[str]:
    """Every view, each after the views its SQL reads (FROM / JOIN), so creating them in this order never names a
    view that does not exist yet; ties by name."""
    names = set(_view_names())
    done: list[str] = []

    def visit(name: str, path: tuple[str, ...]) -> None:
        if name in done:
            return
        if name in path:
            raise WarehouseError(f"views read each other in a circle: {' → '.join((*path, name))}")
        for dep in sorted(set(_READ_FROM.findall(view_sql(name))) & names - {name}):
            visit(dep, (*path, name))
        done.append(name)

    for name in sorted(names):
        visit(name, ())
    return done


@functools.lru_cache(maxsize=4096)
def tables_read(sql: str) -> frozenset[str]:
    """The schema tables a read statement reads: those it names after FROM or JOIN, and those of the views it
    names (followed through their own SQL)."""
    tables, views = set(_table_names()), set(_view_names())
    out: set[str] = set()
    for name in _READ_FROM.findall(sql):
        if name in tables:
            out.add(name)
        elif name in views:
            out |= tables_read(view_sql(name))
    return frozenset(out)


@contextlib.contextmanager
def recording_reads() -> Iterator[set[str]]:
    """Record the tables every warehouse read in this context reads (tests check a stage's declared reads)."""
    reads: set[str] = set()
    token = _READS.set(reads)
    try:
        yield reads
    finally:
        _READS.reset(token)


def note_read(sql: str) -> None:
    """Add the tables `sql` reads to the reads being recorded, if any (a no-op outside recording_reads)."""
    reads = _READS.get()
    if reads is not None:
        reads |= tables_read(sql)


def view_sql(name: str) -> str:
    """The SELECT of warehouse/views/<name>.sql (a file of this repository, never user input)."""
    if name not in _view_names():
        raise WarehouseError(f"unknown view {name!r}")
    return (VIEWS_DIR / f"{name}.sql").read_text()


def _migration_path(found: str) -> list[Path]:
    """The migration files from version `found` to SCHEMA_VERSION (<v>_to_<v+1>.sql each), or [] when a step is missing."""
    if not (found.isascii() and found.isdigit() and len(found) < 9 and int(found) < int(SCHEMA_VERSION)):
        return []
    steps = [MIGRATIONS_DIR / f"{v}_to_{v + 1}.sql" for v in range(int(found), int(SCHEMA_VERSION))]
    return steps if all(p.is_file() for p in steps) else []


def undefined_as_null(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """A copy of df whose `columns` are float64 with every non-finite value (NaN, ±inf) NULL: DuckDB orders NaN above
    every number, so an undefined estimate or bound is stored as NULL, never NaN."""
    df = df.copy()
    for c in columns:
        v = pd.to_numeric(df[c], errors="coerce").astype("float64")
        df[c] = v.where(np.isfinite(v), None)
    return df


class Warehouse:
    """One DuckDB file under `home` (default var/), with schema version checking."""

    def __init__(self, home: str | Path | None = None, read_only: bool = False, *, _config: dict | None = None):
        from cr2.core.boundary import resolve_path

        self.home = resolve_path(home, "warehouse folder") if home is not None else default_home()
        self.path = self.home / DB_NAME
        self.read_only = read_only
        if read_only and not self.path.exists():
            raise WarehouseError(f"no warehouse at {self.path}; run `cr2 run` (or `cr2 ingest`) first")
        self.home.mkdir(parents=True, exist_ok=True)
        with self.storage():
            self.connect_config = {**LOCKED_CONFIG, **(_config or {})}
            self.con = self._connect(self.connect_config)
            try:
                key, state = str(self.path), file_state(self.path)
                if state is not None and _VERIFIED.get(key) == state:
                    self.schema_version = SCHEMA_VERSION  # unchanged since this process checked it
                else:
                    self._check_or_create_schema()
                    if self.schema_version == SCHEMA_VERSION:
                        _VERIFIED[key] = file_state(self.path)
            except BaseException:
                with contextlib.suppress(duckdb.Error):
                    self.con.close()
                raise

    @contextlib.contextmanager
    def storage(self) -> Iterator[None]:
        """Storage failures inside the block (a full disk, a damaged file) raised as the WarehouseError naming this
        warehouse's file (`storage_error`); every other exception as it is."""
        try:
            yield
        except (duckdb.Error, OSError) as exc:
            problem = storage_error(exc, self.path)
            if problem is None:
                raise
            raise problem from None

    def _connect(self, config: dict) -> duckdb.DuckDBPyConnection:
        """Open the file, waiting while another process holds a conflicting lock; a new file is owner-only."""
        wait_s = lock_wait_s()
        deadline = time.monotonic() + wait_s
        delay, told = 0.05, False
        while True:
            try:
                if self.path.exists() or self.read_only:
                    return duckdb.connect(str(self.path), read_only=self.read_only, config=config)
                with _UMASK_LOCK:  # the file is created under umask 077: rw for its owner only
                    old = os.umask(0o077)
                    try:
                        con = duckdb.connect(str(self.path), read_only=False, config=config)
                    finally:
                        os.umask(old)
                os.chmod(self.path, 0o600)
                return con
            except duckdb.IOException as exc:
                if not _is_lock_conflict(exc):
                    raise WarehouseError(
                        f"{self.path} is not a valid warehouse file (damaged, truncated or not a DuckDB database): "
                        f"{str(exc).splitlines()[0]}. Restore it from a backup or an export, or move it away (or point "
                        "--home/CR2_HOME at another folder) and run `cr2 run` to build a new one."
                    ) from None
                holder = re.search(r"\(PID (\d+)\)", str(exc))
                who = f"process {holder.group(1)}" if holder else "another process"
                if time.monotonic() >= deadline:
                    raise WarehouseError(
                        f"the warehouse {self.path} is locked by {who}, which is "
                        f"{'using' if self.read_only else 'reading or writing'} it, and stayed locked for {wait_s:g} s "
                        f"(one process writes at a time; readers wait for it). Let that cr2 command finish and run this "
                        f"again, raise {LOCK_WAIT_ENV}, or point --home/CR2_HOME at another folder."
                    ) from None
                if not told and delay >= 0.4:
                    log.warning("the warehouse %s is locked by %s; waiting up to %g s", self.path, who, wait_s)
                    told = True
                time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
                delay = min(delay * 2, 1.0)

    # ---------------------------------------------------------- lifecycle
    def close(self) -> None:
        with self.storage():
            self.con.close()
        self._owner_only_wal()

    def _owner_only_wal(self) -> None:
        """DuckDB creates the write-ahead log under the process umask; keep it as private as the file."""
        if not self.read_only:
            with contextlib.suppress(OSError):
                os.chmod(self.path.with_name(DB_NAME + ".wal"), 0o600)

    def __enter__(self) -> "Warehouse":
        return self

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is None:
            self.close()
            return
        with contextlib.suppress(Exception):  # the block's own error is the one to report
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
                    f"warehouse {self.path} has schema version {shown_version(found)}, this cr2 expects "
                    f"{SCHEMA_VERSION}. "
                    f"Export what you need (`cr2 export TABLE`), then move the file away (or set CR2_HOME to a new "
                    f"folder) and run `cr2 run` to rebuild it."
                )
            if not self.read_only and self._stored_digest() != schema_digest():
                with self.transaction():  # tables added since (all CREATE TABLE IF NOT EXISTS): additive, same version
                    self.con.execute(SCHEMA_FILE.read_text())
                self._create_views()
            self._check_definitions()
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

    def _stored_digest(self) -> str | None:
        rows = self.con.execute("SELECT value FROM meta WHERE key = 'schema_digest'").fetchall()
        return rows[0][0] if rows else None

    def _check_definitions(self) -> None:
        """Make sure the file's tables have the columns schema.sql defines (a missing or retyped column is refused
        here, naming it, instead of failing later inside a command) and every view and macro it stores is the one
        warehouse/views/ and macros.sql define: a view replaced outside cr2 (`v_labels` selecting another table, or
        a file — which the locked connection refuses to read anyway) would otherwise answer every command that reads
        it. A writable open restores the definitions; a read-only open refuses the file. An older schema version
        read as it is keeps the tables and views its cr2 made."""
        problems = table_problems(stored_columns(self.con), defined_columns())
        if problems:
            raise WarehouseError(
                f"{self.path}: {'; '.join(problems[:5])}{f' and {len(problems) - 5} more' if len(problems) > 5 else ''}"
                " — the tables are not what this cr2 defines (warehouse/schema.sql); the file was changed outside cr2. "
                "Export what you need (`cr2 export TABLE`), then move the file away and run `cr2 run` to rebuild it.")
        stored = stored_definitions(self.con)
        changed = sorted(name for name, digest in defined_objects().items() if stored.get(name) != digest)
        if not changed:
            return
        shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
        if self.read_only:
            raise WarehouseError(
                f"{self.path}: {shown} {'is' if len(changed) == 1 else 'are'} not what this cr2 defines "
                "(warehouse/views/, warehouse/macros.sql): the file was changed outside cr2. Run a command that "
                "writes the warehouse (e.g. `cr2 ingest`) to restore the definitions, or rebuild it with `cr2 run`.")
        log.warning("%s: %s changed outside cr2; restored from warehouse/views/ and warehouse/macros.sql",
                    self.path, shown)
        self._create_views()

    def _create_views(self) -> None:
        """(Re)create every view and record the digest of the schema and view files they were made from, so the
        next writable open skips the DDL while those files are unchanged (≈ 0.1 s per open)."""
        with self.transaction():
            define_views(self.con)
            self.con.execute("INSERT OR REPLACE INTO meta VALUES ('schema_digest', ?)", [schema_digest()])

    # ---------------------------------------------------------- transactions and writes
    @contextlib.contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """BEGIN … COMMIT, or ROLLBACK on any exception (the warehouse stays as it was); a full disk or a damaged
        file, in a write or at the commit, is the WarehouseError naming the file."""
        with self.storage():
            self.con.execute("BEGIN TRANSACTION")
            try:
                yield self.con
            except BaseException:
                with contextlib.suppress(duckdb.Error):  # DuckDB has already aborted a transaction that failed to write
                    self.con.execute("ROLLBACK")
                raise
            else:
                self.con.execute("COMMIT")
        self._owner_only_wal()

    def insert_df(self, table: str, df: pd.DataFrame, con: duckdb.DuckDBPyConnection | None = None) -> int:
        """Append the rows of df (columns named as in the table) to `table`; returns the row count."""
        c = con or self.con
        if len(df) == 0:
            return 0
        c.register("_cr2_frame", df)
        try:
            c.execute(f"INSERT INTO {relation(table)} ({idents(df.columns)}) SELECT {idents(df.columns)} FROM _cr2_frame")
        finally:
            with contextlib.suppress(duckdb.Error):  # inside an aborted transaction; the rollback cleans up
                c.unregister("_cr2_frame")
        return len(df)

    def replace_where(self, table: str, df: pd.DataFrame, where: dict[str, Any] | None = None) -> int:
        """In one transaction: delete the rows of `table` matching `where` (all rows if None), insert df."""
        with self.transaction() as con:
            self._delete(con, table, where)
            return self.insert_df(table, df, con)

    def replace_study_unit(self, unit_table: str, unit: dict[str, Any], results_table: str, results: pd.DataFrame,
                           where: dict[str, Any]) -> None:
        """Replace one unit of a study — a pool of a pool sweep, a cell of a premise map — in one transaction: its row
        of `unit_table` and its rows of `results_table`, both keyed by `where`."""
        with self.transaction() as con:
            self._delete(con, unit_table, where)
            self._delete(con, results_table, where)
            self.insert_df(unit_table, pd.DataFrame([unit]), con)
            self.insert_df(results_table, results, con)

    def delete_where(self, table: str, where: dict[str, Any] | None, con: duckdb.DuckDBPyConnection | None = None) -> None:
        self._delete(con or self.con, table, where)

    @staticmethod
    def _delete(con: duckdb.DuckDBPyConnection, table: str, where: dict[str, Any] | None) -> None:
        con.execute(f"DELETE FROM {relation(table)}{where_clause(where)}", list((where or {}).values()))

    # ---------------------------------------------------------- reads
    def df(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> pd.DataFrame:
        """Run a query and return a pandas DataFrame."""
        note_read(sql)
        with self.storage():
            return self.con.execute(sql, params or []).df()

    def coded_df(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> pd.DataFrame:
        """Run a query and return a pandas DataFrame whose text columns are Categoricals (dictionary-encoded on the
        Arrow side) and whose nullable booleans are pandas' "boolean": for millions of rows, where a Python string
        per cell (`df`) costs seconds."""
        import pyarrow as pa
        import pyarrow.compute as pc

        note_read(sql)
        with self.storage():
            table = self.con.sql(sql, params=params or None).to_arrow_table()  # sql(): no extra copy of the rows
        columns: dict[str, Any] = {}
        for name, col in zip(table.column_names, table.columns):
            if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
                coded = pc.dictionary_encode(col).combine_chunks()
                columns[name] = pd.Categorical.from_codes(coded.indices.fill_null(-1).to_numpy(),
                                                          pd.Index(coded.dictionary.to_pylist(), dtype=object))
            elif pa.types.is_boolean(col.type) and col.null_count:
                columns[name] = col.to_pandas(types_mapper={pa.bool_(): pd.BooleanDtype()}.get)
            else:
                columns[name] = col.to_pandas()
        return pd.DataFrame(columns, index=pd.RangeIndex(table.num_rows))

    def scalar(self, sql: str, params: list[Any] | None = None) -> Any:
        note_read(sql)
        with self.storage():
            rows = self.con.execute(sql, params or []).fetchall()  # fetchall: DuckDB 2 refuses new work on an unfinished result
        row = rows[0] if rows else None
        return None if row is None else row[0]

    def count(self, table: str) -> int:
        return int(self.scalar(f"SELECT count(*) FROM {relation(table)}"))

    def table_fingerprint(self, table: str, where: dict[str, Any] | None = None,
                          columns: tuple[str, ...] | None = None) -> str:
        """Content hash of a table (order-independent) over `columns` (all when None) of the rows whose
        columns equal `where`'s values, for cache keys."""
        params = list((where or {}).values())
        if columns is None:
            sql = (f"SELECT coalesce(sum(hash(t)), 0)::VARCHAR || ':' || count(*)::VARCHAR "
                   f"FROM {relation(table)} t{where_clause(where)}")
        else:
            sql = (f"SELECT coalesce(sum(hash(t)), 0)::VARCHAR || ':' || count(*)::VARCHAR "
                   f"FROM (SELECT {idents(columns)} FROM {relation(table)}{where_clause(where)}) t")
        return str(self.scalar(sql, params))

    def export(self, table: str, out_dir: str | Path | None = None) -> Path:
        """Write `table` (or a view) to out_dir/TABLE.parquet (zstd); returns the path."""
        import pyarrow as pa

        relation(table)  # an unknown name fails here ("did you mean …"), before any folder is made
        out = Path(out_dir) if out_dir is not None else self.home / "export"
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WarehouseError(f"cannot create the export folder {out}: {exc.strerror}; pass another --out") from None
        path = out / f"{table}.parquet"

        def write(tmp: Path) -> None:
            # the locked connection writes no files: DuckDB streams the rows as Arrow batches, pyarrow writes them
            import pyarrow.parquet as pq

            reader = self.con.sql(f"SELECT * FROM {relation(table)}").to_arrow_reader(EXPORT_BATCH_ROWS)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # as private as the warehouse
            with os.fdopen(fd, "wb") as sink, pq.ParquetWriter(sink, reader.schema, compression="zstd") as writer:
                for batch in reader:
                    writer.write_batch(batch)

        try:
            return atomic_write(path, write)  # a failed export never leaves a half-written file
        except (duckdb.IOException, OSError, pa.ArrowException) as exc:
            problem = storage_error(exc, path)
            if problem is not None:
                raise problem from None
            raise WarehouseError(f"cannot write {path}: {str(exc).splitlines()[0]}; pass another --out") from None

    # ---------------------------------------------------------- user queries (`cr2 sql`)
    def user_query(self, sql: str, timeout_s: float = USER_QUERY_TIMEOUT_S,
                   max_rows: int | None = None) -> tuple[pd.DataFrame, bool]:
        """(the first `max_rows` rows of one read statement a user typed (`cr2 sql`), whether it has more), stopped
        after `timeout_s`; a clear error otherwise.

        Rows are fetched as the statement streams them, at most `max_rows` + 1 (the one more says whether there are
        more): `SELECT * FROM range(400000000)` with max_rows 2 reads three rows, not four hundred million. The time
        limit always holds: it must lie in USER_QUERY_TIMEOUT_RANGE_S, and once it has passed DuckDB is interrupted
        again every INTERRUPT_REPEAT_S until the statement ends (an interrupt that arrives before DuckDB starts
        executing is cleared by the start, so one alone could leave the query unbounded).

        Only on a warehouse opened with `open_user_query` (external access off, configuration locked)."""
        capped = "memory_limit" in self.connect_config
        if not self.read_only or self.scalar("SELECT current_setting('enable_external_access')") or not capped:
            raise WarehouseError("user SQL runs only on a connection from open_user_query (read-only, locked down, "
                                 "memory capped)")
        allowed = ("one read query: SELECT …, WITH … SELECT …, FROM …, PIVOT …, DESCRIBE, SHOW, SUMMARIZE, or EXPLAIN "
                   "of one")
        try:
            statements = self.con.extract_statements(sql)
        except duckdb.Error as exc:
            raise UserQueryError(f"SQL failed: {str(exc).splitlines()[0]}") from None
        if len(statements) != 1:
            given = f"{len(statements)} statements given" if statements else "no SQL statement given"
            raise UserQueryError(f"{given}; cr2 sql runs {allowed}")
        kind = statements[0].type.name
        if kind == "MULTI" and is_one_pivot_query(sql):
            kind = "SELECT"
        if kind not in USER_QUERY_TYPES:
            hint = " (to write a table to a file use `cr2 export TABLE --out DIR`)" if kind in ("COPY", "EXPORT") else ""
            raise UserQueryError(f"{kind} statements are not allowed: the warehouse is read-only here and cr2 sql runs "
                                 f"{allowed}{hint}")
        low, high = USER_QUERY_TIMEOUT_RANGE_S
        if not (isinstance(timeout_s, (int, float)) and low <= timeout_s <= high):
            raise UserQueryError(f"the time limit must be a number of seconds in [{low:g}, {high:g}] (10 ms to one "
                                 f"day), got {timeout_s:g}" if isinstance(timeout_s, (int, float)) else
                                 f"the time limit must be a number of seconds, got {timeout_s!r}")
        if max_rows is not None and max_rows < 0:
            raise UserQueryError(f"the row limit must be ≥ 0, got {max_rows}")
        done = threading.Event()

        def watchdog() -> None:
            if done.wait(timeout_s):
                return
            while not done.is_set():
                self.con.interrupt()
                done.wait(INTERRUPT_REPEAT_S)

        timer = threading.Thread(target=watchdog, name="cr2-sql-timeout", daemon=True)
        timer.start()
        try:
            cursor = self.con.execute(sql)
            names = [d[0] for d in cursor.description or []]
            rows = cursor.fetchall() if max_rows is None else cursor.fetchmany(max_rows + 1)
            more = max_rows is not None and len(rows) > max_rows
            return pd.DataFrame.from_records(rows[:max_rows] if more else rows, columns=names), more
        except duckdb.InterruptException:
            raise UserQueryError(f"the query ran longer than {timeout_s:g} s and was stopped; narrow it or pass "
                                 "a longer --timeout") from None
        except duckdb.Error as exc:
            problem = storage_error(exc, self.path)
            if problem is not None:
                raise problem from None
            first = str(exc).splitlines()[0]
            hint = ""
            if "No function matches" in first and "BOOLEAN" in first:  # avg(correct) on labels.correct
                hint = ("; a BOOLEAN such as labels.correct is averaged as avg(correct::INT), or query the view "
                        "v_labels, where correct is 0/1")
            if "Out of Memory" in first:
                hint = (f"; the query needs more than the {self.connect_config['memory_limit']} cr2 sql allows: "
                        "narrow it, or pass a larger --max-memory-mb")
            raise UserQueryError(f"SQL failed: {first}{hint}") from None
        finally:
            done.set()
            timer.join()


def is_one_pivot_query(sql: str) -> bool:
    """Whether `sql` (one statement) is a read query with a PIVOT: it starts as a query, has a PIVOT keyword and no
    keyword of a statement that is not a read (the SQL keywords as DuckDB's tokenizer sees them, so words inside
    strings, quoted names and comments do not count)."""
    words = [m.group(0).upper() for pos, kind in duckdb.tokenize(sql) if kind == duckdb.token_type.keyword
             for m in [_IDENT.match(sql, pos)] if m]
    return bool(words) and words[0] in _READ_STARTS and "PIVOT" in words and not _NOT_READ.intersection(words)


class UserQueryError(Cr2SqlError, WarehouseError):
    """A user's SQL query (`cr2 sql`) was refused or failed."""


def where_clause(where: dict[str, Any] | None) -> str:
    """' WHERE "c1" = ? AND …' over validated column names (the values go as parameters, in order); '' for None."""
    if not where:
        return ""
    return " WHERE " + " AND ".join(f"{ident(k)} = ?" for k in where)


def copy_warehouse(home: str | Path, target: str | Path, with_caches: bool = False) -> Path:
    """The folder `target` holding a copy of `home`'s warehouse, made on first use (a study's per-cell home).

    The write-ahead log is flushed first so the file alone is the whole warehouse; the copy lands under a
    temporary name and is renamed, so an interrupted copy never looks like a warehouse.
    with_caches: the home's stage results and derived files (CACHE_DIRS) are copied too, before the warehouse, so
    a stage whose key the copy's config leaves unchanged is a cache hit there (a study that adds routers to a run
    refits and re-evaluates only what depends on them)."""
    import shutil

    target = Path(target)
    if not (target / DB_NAME).is_file():
        target.mkdir(parents=True, exist_ok=True)
        with Warehouse(home) as wh:
            wh.con.execute("CHECKPOINT")
        for name in CACHE_DIRS if with_caches else ():
            src, dst = Path(home) / name, target / name
            if src.is_dir() and not dst.exists():
                tmp = temp_sibling(dst)
                try:
                    shutil.copytree(src, tmp, symlinks=True)
                    replace_dir(tmp, dst)
                finally:
                    shutil.rmtree(tmp, ignore_errors=True)
        atomic_write(target / DB_NAME, lambda tmp: shutil.copyfile(Path(home) / DB_NAME, tmp))
    return target


#: a home's folders of stage results and derived files (cr2_tasks.common.results_dir, cr2_tasks.store.cache_dir)
CACHE_DIRS = ("prefect-results", "cache")


# sha256 of how DuckDB stores each view and macro cr2 defines, for the pinned DuckDB and the current definition
# files; when either differs (a view edited, DuckDB upgraded) the digests are computed by rendering the definitions in
# an in-memory database (≈ 0.7 s, once per process). tests/test_warehouse.py checks the file is current.
DEFINITIONS_LOCK_FILE = Path(__file__).with_name("definitions.lock.json")


# DuckDB stores a star's EXCLUDE list in hash order, which differs between databases: compared sorted
_EXCLUDE_LIST = re.compile(r"EXCLUDE \(([^()]*)\)")


def _sorted_exclude(m: re.Match) -> str:
    return "EXCLUDE (" + ", ".join(sorted(part.strip() for part in m.group(1).split(","))) + ")"


def stored_definitions(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """{'view:NAME' | 'macro:NAME': sha256 of its stored SQL} of the views and macros in the connection's main schema
    (a macro's overloads hashed together, in order)."""
    rows = con.execute("""
        SELECT 'view:' || view_name, sql FROM duckdb_views()
        WHERE NOT internal AND database_name = current_database() AND schema_name = 'main'
        UNION ALL
        SELECT 'macro:' || function_name, coalesce(macro_definition, '') || '(' || parameters::VARCHAR || ')'
        FROM duckdb_functions()
        WHERE NOT internal AND function_type IN ('macro', 'table_macro') AND database_name = current_database()
          AND schema_name = 'main'
        ORDER BY 1, 2""").fetchall()
    parts: dict[str, list[str]] = {}
    for name, text in rows:
        parts.setdefault(name, []).append(_EXCLUDE_LIST.sub(_sorted_exclude, text))
    return {name: hashlib.sha256("\x1e".join(texts).encode()).hexdigest() for name, texts in parts.items()}


def stored_columns(con: duckdb.DuckDBPyConnection) -> dict[str, list[list[Any]]]:
    """{table: [[column, type], …] by column name} of the schema's tables in the connection's main schema (by name,
    not position: a migrated table has its added columns last; constraints aside: a migration adds columns without
    the NOT NULL a new table has)."""
    rows = con.execute("""
        SELECT table_name, column_name, data_type FROM duckdb_columns()
        WHERE database_name = current_database() AND schema_name = 'main' AND NOT internal
          AND table_name IN (SELECT table_name FROM duckdb_tables() WHERE database_name = current_database())
        ORDER BY table_name, column_name""").fetchall()
    out: dict[str, list[list[Any]]] = {}
    for table, column, dtype in rows:
        if table in _table_names():
            out.setdefault(table, []).append([column, dtype])
    return out


def table_problems(stored: dict[str, list[list[Any]]], defined: dict[str, list[list[Any]]]) -> list[str]:
    """What differs between the stored tables' columns and the defined ones, one phrase each (the table and
    column named): a missing table or column, a column of another type, a column cr2 does not define."""
    problems = []
    for table, columns in defined.items():
        have = {c[0]: c for c in stored.get(table, [])}
        if not have:
            problems.append(f"table {table} is missing")
            continue
        want = {c[0]: c for c in columns}
        problems += [f"table {table} has no column {name}" for name in want if name not in have]
        problems += [f"table {table}: column {name} is {shown_version(have[name][1])}, expected {want[name][1]}"
                     for name in want if name in have and have[name] != want[name]]
        problems += [f"table {table} has a column {shown_version(name)} this cr2 does not define"
                     for name in have if name not in want]
    return problems


def define_views(con: duckdb.DuckDBPyConnection) -> None:
    """(Re)create macros.sql's macros and every view of warehouse/views/ on `con` (a warehouse, or the in-memory
    database the definition digests are rendered from: one code path, so the digests are of what a warehouse holds)."""
    con.execute(MACROS_FILE.read_text())
    for name in view_names():  # a view's SQL is the file's own text; its name a validated identifier
        con.execute(f"CREATE OR REPLACE VIEW {ident(name)} AS\n{view_sql(name)}")


def render_definitions() -> tuple[dict[str, str], dict[str, list[list[Any]]]]:
    """(`stored_definitions`, `stored_columns`) of a new in-memory database made from schema.sql, macros.sql and
    warehouse/views/."""
    con = duckdb.connect(":memory:", config=LOCKED_CONFIG)
    try:
        con.execute(SCHEMA_FILE.read_text())
        define_views(con)
        return stored_definitions(con), stored_columns(con)
    finally:
        con.close()


def definitions_lock() -> dict[str, Any]:
    """What DEFINITIONS_LOCK_FILE holds for this DuckDB and these definition files."""
    objects, tables = render_definitions()
    return {"duckdb": duckdb.__version__, "schema_digest": schema_digest(), "objects": objects, "tables": tables}


def write_definitions_lock() -> Path:
    """Rewrite DEFINITIONS_LOCK_FILE (after a view or macro changed): `python -c "from cr2_warehouse.db import
    write_definitions_lock; write_definitions_lock()"`."""
    import json

    text = json.dumps(definitions_lock(), indent=1, sort_keys=True) + "\n"
    atomic_write(DEFINITIONS_LOCK_FILE, lambda tmp: Path(tmp).write_text(text))
    return DEFINITIONS_LOCK_FILE


@functools.lru_cache(maxsize=1)
def _defined() -> dict[str, Any]:
    """DEFINITIONS_LOCK_FILE's content when it matches this DuckDB and these definition files, else rendered now."""
    import json

    try:
        lock = json.loads(DEFINITIONS_LOCK_FILE.read_text())
        if lock.get("duckdb") == duckdb.__version__ and lock.get("schema_digest") == schema_digest() \
                and isinstance(lock.get("objects"), dict) and isinstance(lock.get("tables"), dict):
            return lock
    except (OSError, ValueError):
        pass
    return definitions_lock()


def defined_objects() -> dict[str, str]:
    """The digests every stored view and macro must have."""
    return dict(_defined()["objects"])


def defined_columns() -> dict[str, list[list[Any]]]:
    """The columns every table must have ([column, type] by name)."""
    return _defined()["tables"]


def open_warehouse(home: str | Path | None = None, read_only: bool = False) -> Warehouse:
    return Warehouse(home, read_only=read_only)


def open_user_query(home: str | Path | None = None, memory_limit_mb: int = USER_QUERY_MEMORY_LIMIT_MB) -> Warehouse:
    """The warehouse read-only with external access and extension loading off, memory capped at `memory_limit_mb`
    and the configuration locked, all set at connect, before any user SQL runs (`Warehouse.user_query`)."""
    low, high = USER_QUERY_MEMORY_RANGE_MB
    if isinstance(memory_limit_mb, bool) or not isinstance(memory_limit_mb, int) or not low <= memory_limit_mb <= high:
        raise UserQueryError(f"the memory cap must be a whole number of MiB in [{low:,}, {high:,}], got "
                             f"{str(memory_limit_mb)[:40]}")
    return Warehouse(home, read_only=True, _config={**USER_QUERY_CONFIG, "memory_limit": f"{memory_limit_mb}MiB"})
