"""Calibrate task: the CRC threshold table τ*(λ; α) of the trained gate on the val split (cached).

The key covers the gate and teacher fingerprints, the val rows (embeddings, labels, costs under the
calibration state distribution) and the λ/α grids, so re-calibrating on a new channel-state
distribution needs no retraining. Each new table gets the next `version` in `thresholds`.
"""
from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2.crc import ThresholdTable
from cr2.errors import DataValidationError
from tasks.common import code_hash, make_key, warehouse_epoch
from tasks.train import routing_args
from warehouse.db import Warehouse
from warehouse.routing_data import load_routing_sets, routing_fingerprint

CAL_CODE = ("cr2.crc", "cr2.utility", "cr2.gate", "tasks.calibrate")


def calibration_lams(config: Config, extra_lams: tuple[float, ...] = ()) -> np.ndarray:
    """The configured λ grid plus any extra λ asked for (each calibrated exactly, never interpolated)."""
    bad = [v for v in extra_lams if not v > 0]
    if bad:
        raise DataValidationError(f"λ must be > 0, got {bad}")
    return np.unique(np.concatenate([np.asarray(config.grids.lam.values(), dtype=np.float64),
                                     np.asarray(extra_lams, dtype=np.float64)]))


def calibrate_key(config: Config, wh: Warehouse, trained: dict, extra_lams: tuple[float, ...] = ()) -> str:
    return make_key("calibrate", trained["teacher"]["fingerprint"], trained["gate"]["fingerprint"], sorted(extra_lams),
                    routing_fingerprint(wh, **routing_args(config), splits=("val",)), config.section_hash("grids"),
                    code_hash(*CAL_CODE), warehouse_epoch(wh))


def load_modules(trained: dict, home: str | Path):
    """The teacher and gate of `trained` (recorded paths are relative to the home)."""
    from cr2.gate import load_gate
    from cr2.teacher import load_teacher
    from tasks.common import in_home

    return load_teacher(in_home(home, trained["teacher"]["path"])), load_gate(in_home(home, trained["gate"]["path"]))


@task(name="calibrate-cr2")
def calibrate_cr2(config: Config, home: str, key: str, trained: dict, extra_lams: tuple[float, ...] = ()) -> dict:
    """Calibrate τ*(λ; α) on val for every (λ, α) of the grids; write it as a new thresholds version."""
    from cr2.crc import calibrate_table
    from cr2.utility import disagree_label

    teacher, gate = load_modules(trained, home)
    with Warehouse(home, read_only=True) as wh:
        val = load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config))["val"]
    if len(val) == 0:
        raise DataValidationError("the val split is empty: nothing to calibrate on (check splits.val)")
    lams = calibration_lams(config, tuple(extra_lams))
    scores = gate.score(val.embedding, lams)  # [n, n_lam] float32
    # r_i(λ) = 1[m_full*(x_i, ξ_i; λ) ≠ m0] under the frozen teacher (paper §VI-F)
    risks = disagree_label(teacher.predict_proba(val.embedding), val.cost, lams)
    table = calibrate_table(scores, risks, lams, config.grids.alpha, gate_fingerprint=trained["gate"]["fingerprint"],
                            dist_id=config.channel.distribution.dist_id, label_source=config.labels.source)
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    with Warehouse(home) as wh, wh.transaction() as con:
        version = int(con.execute("SELECT coalesce(max(version), 0) + 1 FROM thresholds").fetchall()[0][0])
        rows = pd.DataFrame(table.to_records()).assign(version=version, created_at=now)
        wh.insert_df("thresholds", rows[["version", "dist_id", "label_source", "gate_fingerprint", "lam", "alpha", "tau",
                                         "n_calib", "rule", "score_dtype", "created_at"]], con)
    return {"version": version, "n_calib": table.n_calib, "n_lam": len(table.lams), "n_alpha": len(table.alphas),
            "gate_fingerprint": table.gate_fingerprint, "dist_id": table.dist_id, "label_source": table.label_source}


def load_threshold_table(wh: Warehouse, version: int | None = None) -> ThresholdTable:
    """The threshold table of `version` (default: the newest) from the warehouse."""
    from cr2.errors import UncalibratedOperatingPointError

    if version is None:
        version = wh.scalar("SELECT max(version) FROM thresholds")
        if version is None:
            raise UncalibratedOperatingPointError("no threshold table in the warehouse; run `cr2 calibrate` (or `cr2 run`)")
    df = wh.df("SELECT * FROM thresholds WHERE version = ?", [int(version)])
    if df.empty:
        raise UncalibratedOperatingPointError(  # sql-text: shown to the user, never run
            f"no threshold table version {version}; see `cr2 sql \"SELECT DISTINCT version FROM thresholds\"`")
    return ThresholdTable.from_records(df.to_dict("records"))
