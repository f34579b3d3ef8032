"""Drift check: do new channel states depart from those the deployed thresholds were calibrated on?

Reference: the val split's states (the calibration set) under the distribution of the newest threshold
table, read from the warehouse. Sample: n fresh states from the candidate distribution (or any
ChannelStates handed in, e.g. measured ones). Two-sample KS per feature with Holm correction (cr2.drift).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from cr2.config import Config, load_state_distribution
from cr2.drift import DriftReport, drift_test, state_features
from warehouse.db import Warehouse


def calibration_states(wh: Warehouse, config: Config, dist_id: str | None = None) -> dict[str, np.ndarray]:
    """Drift features of the val split's states under `dist_id` (default: the newest threshold table's)."""
    if dist_id is None:
        dist_id = wh.scalar("SELECT dist_id FROM thresholds ORDER BY version DESC LIMIT 1") or config.channel.distribution.dist_id
    df = wh.df("""SELECT s.distance_m, s.rate_ul_bps, s.rate_dl_bps FROM states s
                  JOIN splits sp ON sp.query_id = s.query_id AND sp.seed = ? AND sp.split = 'val'
                  WHERE s.dist_id = ?""", [int(config.splits.seed), dist_id])
    if df.empty:
        from cr2.errors import DataValidationError

        raise DataValidationError(f"no calibration states for '{dist_id}' in the warehouse; run `cr2 run` first")
    return {c: df[c].to_numpy() for c in ("distance_m", "rate_ul_bps", "rate_dl_bps")}


def drift_check(config: Config, home: str | Path, states: str | Path, n: int = 2000, alpha: float = 0.05) -> DriftReport:
    """KS drift test of n states drawn from `states` against the deployed calibration states."""
    from cr2.channel import sample_states

    with Warehouse(home, read_only=True) as wh:
        reference = calibration_states(wh, config)
    rng = np.random.default_rng(config.channel.seed + 1)  # a fresh sample, not the warehouse's draws
    sample = state_features(sample_states(load_state_distribution(states), int(n), rng), config.communication)
    return drift_test(reference, sample, alpha=alpha, states=str(states))
