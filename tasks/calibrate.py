"""Calibrate task: the CR² router's threshold table τ*(λ; α) on the val split (cached), as a new version.

The key covers the gate and teacher fingerprints and its declared reads: the val rows (embeddings, labels, costs
under the calibration state distribution), the λ/α grids, the guarantee asked for (calibration: rule, δ, Mondrian
group — docs/guarantees.md) and the code the task can run, so re-calibrating on a new channel-state
distribution needs no retraining. Each new table gets the next `version` in `thresholds`.
"""
from __future__ import annotations

import numpy as np
from prefect import task

from cr2.config import Config
from cr2.crc import calibrated_lams
from cr2_tasks.common import GROUP_ROWS, ROUTING_CONFIG, Reads, RoutingRows, Stage
from cr2_tasks.inputs import cr2_router, load_sets, remember_scores
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import write_thresholds


def calibration_lams(config: Config, extra_lams: tuple[float, ...] = ()) -> np.ndarray:
    """The configured λ grid plus any extra λ asked for (each calibrated exactly, never interpolated)."""
    calibrated_lams(extra_lams, require_all=True)  # an extra λ is asked for by name: λ = 0 is refused, not skipped
    return np.unique(np.concatenate([np.asarray(config.grids.lam.values(), dtype=np.float64),
                                     np.asarray(extra_lams, dtype=np.float64)]))


@task(name="calibrate-cr2")
def calibrate_cr2(config: Config, home: str, trained: dict, extra_lams: tuple[float, ...] = ()) -> dict:
    """Calibrate τ*(λ; α) on val for every (λ, α) of the grids under config.calibration; write it as a new version."""
    val = load_sets(config, home)["val"]
    cal = config.calibration
    groups = None
    if cal.group is not None:  # Mondrian: the group (query attribute) of every calibration query
        from cr2_warehouse.routing_data import query_groups

        with Warehouse(home, read_only=True) as wh:
            groups = query_groups(wh, val.query_id, cal.group)
    router = cr2_router(config, trained, home)
    lams = calibration_lams(config, tuple(extra_lams))
    remember_scores(router, home, {"val": val}, lams)  # the gate's scores do not depend on ξ: cached per gate
    table = router.calibrate(val, lams, config.grids.alpha,
                             dist_id=config.channel.distribution.dist_id, label_source=config.labels.source,
                             rule=cal.rule, delta=cal.delta, groups=groups, group_by=cal.group or "benchmark",
                             small_group=cal.small_group)
    with Warehouse(home) as wh:
        version = write_thresholds(wh, table)
    return {"version": version, "n_calib": table.n_calib, "n_lam": len(table.lams), "n_alpha": len(table.alphas),
            "gate_fingerprint": table.gate_fingerprint, "dist_id": table.dist_id, "label_source": table.label_source}


def _trained(trained: dict, extra_lams: tuple[float, ...] = ()) -> list:
    return [trained["teacher"]["fingerprint"], trained["gate"]["fingerprint"], sorted(extra_lams)]


CALIBRATE = Stage(calibrate_cr2, Reads(
    config=("grids", "routing", "calibration", "teacher", "gate", "fit.torch_threads", "models", *ROUTING_CONFIG),
    rows=(RoutingRows(("val",)), GROUP_ROWS), upstream=("artifacts",), writes=("thresholds",)), upstream=_trained)
