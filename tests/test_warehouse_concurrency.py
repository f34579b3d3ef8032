"""Readers never break a writer (a `cr2 sql` during `cr2 calibrate` made it fail after 26 s of work;
3 of 15 reads failed while a writer ran), a lock and a damaged file are told apart, the file is owner-only.

Other processes hold the warehouse here: DuckDB's file lock is per process.
"""
from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time

import duckdb
import pandas as pd
import pytest

from cr2.config import REPO_ROOT
from cr2.core.errors import WarehouseError
from cr2_warehouse.db import DB_NAME, Warehouse

ROW = {"model_id": "m", "hf_name": "h", "params": 1.0, "platform": "p", "role": "device", "position": 0}


def _hold(home, seconds: float, read_only: bool) -> subprocess.Popen:
    """A process that opens the warehouse and keeps it for `seconds`; returns once it holds the lock."""
    code = (f"import duckdb, sys, time; c = duckdb.connect({str(home / DB_NAME)!r}, read_only={read_only}); "
            f"print('held', flush=True); time.sleep({seconds})")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _cr2(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "cr2_cli.main", *args], cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, **(env or {})})


def _wait_until_locked(path, timeout: float = 60.0) -> None:
    """Until another process holds the file (a write connection from here is refused)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            duckdb.connect(str(path)).close()
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                return
            raise
        time.sleep(0.05)
    raise AssertionError("the other process never opened the warehouse")


def test_new_warehouse_file_is_owner_only(home):
    with Warehouse(home) as wh:
        wh.replace_where("models", pd.DataFrame([ROW]))
    assert stat.S_IMODE((home / DB_NAME).stat().st_mode) == 0o600


def test_a_writer_waits_for_a_reader_instead_of_failing(home):
    with Warehouse(home):
        pass
    reader = _hold(home, 2.0, read_only=True)
    t0 = time.monotonic()
    with Warehouse(home) as wh:  # used to fail at once: "Is another cr2 process writing to it?"
        wh.replace_where("models", pd.DataFrame([ROW]))
    waited = time.monotonic() - t0
    reader.wait()
    assert waited > 1.0
    with Warehouse(home, read_only=True) as wh:
        assert wh.count("models") == 1


def test_readers_wait_for_a_writer(home):
    with Warehouse(home) as wh:
        wh.replace_where("models", pd.DataFrame([ROW]))
    writer = _hold(home, 2.0, read_only=False)
    results, errors = [], []

    def read():
        try:
            with Warehouse(home, read_only=True) as wh:
                results.append(wh.count("models"))
        except Exception as exc:  # noqa: BLE001 — any failure is the finding
            errors.append(exc)

    threads = [threading.Thread(target=read) for _ in range(15)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    writer.wait()
    assert not errors and results == [1] * 15


def test_waiting_is_bounded_and_the_error_names_the_lock(home, monkeypatch):
    with Warehouse(home):
        pass
    monkeypatch.setenv("CR2_LOCK_WAIT_S", "0.5")
    holder = _hold(home, 3.0, read_only=False)
    try:
        with pytest.raises(WarehouseError, match=rf"locked by process {holder.pid}.*CR2_LOCK_WAIT_S"):
            Warehouse(home, read_only=True)
    finally:
        holder.kill()
        holder.wait()


def test_a_damaged_file_is_not_reported_as_locked(home):
    (home / DB_NAME).write_bytes(b"x" * 14)
    for read_only in (True, False):
        with pytest.raises(WarehouseError, match="not a valid warehouse file.*Restore it") as err:
            Warehouse(home, read_only=read_only)
        assert "lock" not in str(err.value)


def test_a_long_cr2_sql_cannot_make_a_stage_lose_its_work(small_config, home):
    """A stage that computed for a while and then writes waits for a running `cr2 sql` (which stops at its
    --timeout, well below the writers' wait) and keeps its work."""
    from cr2_tasks.ingest import ingest_queries
    from cr2_tasks.prepare import sample_states_task

    ingest_queries.fn(small_config, str(home))
    sql = _cr2("sql", "SELECT count(*) FROM range(1000000000000) a", "--timeout", "4", "--home", str(home))
    _wait_until_locked(home / DB_NAME)
    t0 = time.monotonic()
    out = sample_states_task.fn(small_config, str(home))  # reads, computes, then writes
    waited = time.monotonic() - t0
    text = sql.communicate(timeout=120)[0]
    assert sql.returncode == 2 and "ran longer than 4 s" in text, text
    assert waited > 1.0  # it did meet the lock
    with Warehouse(home, read_only=True) as wh:
        assert wh.count("states") == out["rows"] > 0


def test_the_copy_probe_leaves_the_warehouse_intact(home):
    with Warehouse(home) as wh:
        wh.replace_where("models", pd.DataFrame([ROW]))
    before = (home / DB_NAME).read_bytes()
    proc = _cr2("sql", f"COPY (SELECT 'x') TO '{home / DB_NAME}'", "--home", str(home))  # sql-text: shown to the user, never run
    text = proc.communicate(timeout=120)[0]
    assert proc.returncode == 2 and "COPY statements are not allowed" in text and "Traceback" not in text
    assert (home / DB_NAME).read_bytes() == before
