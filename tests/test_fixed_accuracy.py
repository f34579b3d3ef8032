"""Fixed-accuracy cost on the frontier (the array twin of v_fixed_accuracy) and its paired bootstrap."""
import numpy as np
import pytest

from cr2.evaluation.statistics import resample_indices
from cr2.evaluation.fixed_accuracy import (MethodOutcomes, frontier, frontier_cost_at, grid_cost_at, saving_intervals,
                                saving_pct)


def test_frontier_drops_dominated_points_and_interpolates():
    acc = np.array([0.6, 0.7, 0.65, 0.9, 0.9])
    cost = np.array([0.2, 0.4, 0.5, 0.8, 0.9])
    fa, fc = frontier(acc, cost)
    assert fa.tolist() == [0.6, 0.7, 0.9] and fc.tolist() == [0.2, 0.4, 0.8]
    got = frontier_cost_at(acc, cost, np.array([0.5, 0.6, 0.65, 0.8, 0.95]))
    assert got[:2].tolist() == [0.2, 0.2]
    assert got[2] == pytest.approx(0.3)  # halfway between (0.6, 0.2) and (0.7, 0.4)
    assert got[3] == pytest.approx(0.6)
    assert np.isnan(got[4])  # above the best accuracy: not reached
    assert grid_cost_at(acc, cost, np.array([0.65, 0.95]))[0] == 0.4


def test_saving_sign_and_identical_methods():
    assert saving_pct(0.8, 1.0) == pytest.approx(20.0)
    rng = np.random.default_rng(0)
    n, k = 400, 6
    correct = rng.random((n, k)) < np.linspace(0.5, 0.9, k)
    cost = np.sort(rng.random((n, k)), axis=1)
    m = MethodOutcomes(correct, cost)
    idx = resample_indices(n, 300, np.random.default_rng(1))
    per_target, mean = saving_intervals(m, MethodOutcomes(correct.copy(), cost.copy()), np.array([0.6, 0.7]), idx)
    assert mean.estimate == 0.0 and mean.lower == 0.0 == mean.upper
    assert all(iv.lower == 0.0 == iv.upper for iv in per_target)


def test_a_uniformly_cheaper_method_is_detected():
    rng = np.random.default_rng(2)
    n, k = 1000, 8
    correct = rng.random((n, k)) < np.linspace(0.4, 0.9, k)
    cost = np.sort(rng.random((n, k)), axis=1) + 0.5
    ref = MethodOutcomes(correct, cost)
    cheaper = MethodOutcomes(correct, cost * 0.8)
    idx = resample_indices(n, 300, np.random.default_rng(3))
    _, mean = saving_intervals(cheaper, ref, np.array([0.5, 0.6, 0.7]), idx)
    assert mean.estimate == pytest.approx(20.0)
    assert mean.lower > 0


def test_the_frontier_cost_of_many_sweeps_is_each_sweeps_own():
    """frontier_cost_at_each over [B, k] equals frontier_cost_at row by row, exactly: ties in accuracy and cost,
    points not finite (a resample that draws no row of a scope), empty and single-point sweeps."""
    from cr2.evaluation.fixed_accuracy import frontier_cost_at_each

    rng = np.random.default_rng(0)
    t = np.arange(50, 100) / 100
    for trial in range(300):
        b, k = int(rng.integers(1, 30)), int(rng.integers(0, 12))
        acc = rng.choice(np.linspace(0.5, 1, 11), (b, k)) if trial % 2 else rng.uniform(0.5, 1, (b, k))
        cost = rng.choice(np.linspace(0.1, 1, 6), (b, k)) if trial % 3 == 0 else rng.uniform(0.1, 1, (b, k))
        if trial % 5 == 0 and k:
            acc[rng.random((b, k)) < 0.2] = np.nan
        rows = np.stack([frontier_cost_at(acc[i], cost[i], t) for i in range(b)])
        np.testing.assert_array_equal(frontier_cost_at_each(acc, cost, t), rows)
