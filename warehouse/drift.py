"""The reference states of the drift check: the calibration (val) states of the deployed threshold table."""
from __future__ import annotations

import numpy as np

from cr2.core.errors import DataValidationError
from cr2_warehouse.db import Warehouse
from cr2_warehouse.routing_data import named_query

DRIFT_FEATURES = ("distance_m", "rate_ul_bps", "rate_dl_bps")


def calibration_states(wh: Warehouse, seed: int, dist_id: str | None = None,
                       default_dist_id: str | None = None) -> dict[str, np.ndarray]:
    """Drift features of the val split's states under `dist_id` (default: the newest threshold table's, else
    `default_dist_id`)."""
    if dist_id is None:
        from cr2_warehouse.repository import newest_threshold_dist

        dist_id = newest_threshold_dist(wh) or default_dist_id
    df = wh.df(named_query("drift_calibration_states"), {"seed": int(seed), "dist_id": dist_id})
    if df.empty:
        raise DataValidationError(f"no calibration states for '{dist_id}' in the warehouse; run `cr2 run` first")
    return {c: df[c].to_numpy() for c in DRIFT_FEATURES}
