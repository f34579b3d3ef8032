"""Drift check: do new channel states depart from those the deployed thresholds were calibrated on?

Reference: the val split's states (the calibration set) under the distribution of the newest threshold
table, read from the warehouse (warehouse/drift.py). Sample: n fresh states from the candidate distribution.
Two-sample KS per feature with Holm correction (cr2.deploy.drift). Used by the recalibrate flow and `cr2 drift`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from cr2.config import Config, load_state_distribution
from cr2.deploy.drift import DriftReport, drift_test, state_features
from cr2_warehouse.db import Warehouse
from cr2_warehouse.drift import calibration_states


def drift_check(config: Config, home: str | Path, states: str | Path, n: int = 2000, alpha: float = 0.05) -> DriftReport:
    """KS drift test of n states drawn from `states` against the deployed calibration states."""
    from cr2.system.channel import sample_states

    with Warehouse(home, read_only=True) as wh:
        reference = calibration_states(wh, config.splits.seed, default_dist_id=config.channel.distribution.dist_id)
    rng = np.random.default_rng(config.channel.seed + 1)  # a fresh sample, not the warehouse's draws
    sample = state_features(sample_states(load_state_distribution(states), int(n), rng), config.communication)
    return drift_test(reference, sample, alpha=alpha, states=str(states))
