"""Validation ahead (cr2_warehouse.validation.start_ahead): Great Expectations imported in a helper process while a
re-calibration reads its cached stages. What a user relies on: the helper validates exactly as this process would
— the same statistics, the same DataValidationError naming each failed expectation — a helper that is gone costs
nothing but the time (validation runs here), and no helper outlives the process that started it.
"""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import cr2_warehouse.validation as validation
from cr2.core.errors import DataValidationError


def _states(n: int = 50, bad: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    rate = rng.uniform(1e6, 5e7, n)
    rate[:bad] = -1.0  # a negative uplink rate: the states suite refuses it
    return pd.DataFrame({"distance_m": rng.uniform(10, 200, n), "rate_ul_bps": rate, "rate_dl_bps": rng.uniform(1e6, 5e7, n),
                         "fading_ul": rng.exponential(1, n), "fading_dl": rng.exponential(1, n)})


BOUNDS = {"low_m": 10.0, "high_m": 200.0}


@pytest.fixture
def helper(monkeypatch):
    """A validation helper of this test's own (start_ahead starts none where GX is already imported, as in a worker
    that ran other tests)."""
    ahead = validation._Ahead()
    monkeypatch.setitem(validation._AHEAD, "helper", ahead)
    yield ahead
    validation.stop_ahead()


def test_the_helper_validates_as_this_process_would(helper, monkeypatch):
    here = validation._validate_here("states", _states(), **BOUNDS)
    with pytest.raises(DataValidationError) as local:
        validation._validate_here("states", _states(bad=3), **BOUNDS)
    monkeypatch.setattr(validation, "_validate_here", lambda *a, **k: pytest.fail("validated in this process"))
    assert validation.validate_frame("states", _states(), **BOUNDS) == here == {"suite": "states", "expectations": 5,
                                                                                "rows": 50}
    with pytest.raises(DataValidationError) as remote:
        validation.validate_frame("states", _states(bad=3), **BOUNDS)
    assert str(remote.value) == str(local.value)
    assert "ExpectColumnValuesToBeBetween(column=rate_ul_bps" in str(remote.value) and "3 unexpected" in str(remote.value)
    assert validation._AHEAD.get("helper") is helper and helper.proc.poll() is None  # still serving after an error


def test_a_helper_that_is_gone_leaves_validation_to_this_process(helper, caplog):
    helper.proc.kill()
    helper.proc.wait()
    assert validation.validate_frame("states", _states(), **BOUNDS)["rows"] == 50
    assert "helper" not in validation._AHEAD
    assert "validation helper is gone" in caplog.text
    with pytest.raises(DataValidationError, match="rate_ul_bps"):  # and refuses what it must, here as there
        validation.validate_frame("states", _states(bad=1), **BOUNDS)


def test_no_helper_outlives_the_process_that_started_it(tmp_path):
    code = ("import os, sys; import cr2_warehouse.validation as v; assert v.start_ahead(); "
            "print(v._AHEAD['helper'].proc.pid, flush=True); os._exit(0)")  # no atexit: as if killed
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    pid = int(out.stdout.split()[0])
    deadline = time.monotonic() + 120  # it may finish importing GX first, then reads the end of its input
    while time.monotonic() < deadline:
        status = Path(f"/proc/{pid}/status")
        if not status.exists() or "\nState:\tZ" in status.read_text():
            return
        time.sleep(0.2)
    pytest.fail(f"the validation helper {pid} outlived its parent by 120 s")


def test_validation_ahead_starts_a_helper_only_for_states_not_stored(tmp_path, monkeypatch):
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.inputs import states_stored, validation_ahead, write_states

    started = []
    monkeypatch.setattr("cr2_warehouse.inputs.start_ahead", lambda: started.append(1) or True)
    meta = pd.DataFrame([{"dist_id": "near@v1", "name": "near", "version": 1, "spec": "{}",
                          "created_at": pd.Timestamp("2026-01-01")}])
    rows = _states(2).assign(dist_id="near@v1", query_id=["q1", "q2"], draw=0, gain_ul=1.0, gain_dl=1.0)
    with Warehouse(tmp_path) as wh:
        write_states(wh, "near@v1", meta, rows)
        assert states_stored(wh, "near@v1") and not states_stored(wh, "far@v1")
    assert validation_ahead(tmp_path, "near@v1") is False and started == []  # stored: prepare will not validate them
    assert validation_ahead(tmp_path, "far@v1") is True and started == [1]
    (tmp_path / "damaged").mkdir()
    (tmp_path / "damaged" / "cr2.duckdb").write_bytes(b"not a database")  # reported by the flow's own first read
    assert validation_ahead(tmp_path / "damaged", "far@v1") is False and started == [1]


@pytest.mark.parametrize("states, drift_first, kept", [("far-rician", False, True), ("default", False, False),
                                                        ("no-such-states", False, False), ("far-rician", True, None)])
def test_recalibrate_keeps_its_helper_only_for_new_states(tmp_path, monkeypatch, states, drift_first, kept):
    """`cr2 recalibrate` starts the helper first thing and stops it once it reads that the states are stored (or
    cannot be read: the flow reports that); with --only-if-drift the flow decides after the drift check."""
    from cr2.config import load_state_distribution
    from cr2_cli.commands.recalibrate import validate_states_ahead
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.inputs import write_states

    events = []
    monkeypatch.setattr(validation, "start_ahead", lambda: events.append("start") or True)
    monkeypatch.setattr(validation, "stop_ahead", lambda: events.append("stop"))
    stored = load_state_distribution("default").dist_id
    meta = pd.DataFrame([{"dist_id": stored, "name": "default", "version": 1, "spec": "{}",
                          "created_at": pd.Timestamp("2026-01-01")}])
    with Warehouse(tmp_path) as wh:
        write_states(wh, stored, meta, _states(1).assign(dist_id=stored, query_id=["q1"], draw=0, gain_ul=1.0,
                                                         gain_dl=1.0))
    validate_states_ahead({"states": states, "home": tmp_path, "only_if_drift": drift_first})
    assert events == {True: ["start"], False: ["start", "stop"], None: []}[kept]
