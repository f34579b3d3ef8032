"""Fixed-accuracy cost on the frontier (the array twin of v_fixed_accuracy) and its paired bootstrap."""
import numpy as np
import pytest

from cr2.evaluation.statistics import resample_counts, resample_indices
from cr2.evaluation.fixed_accuracy import (FallbackCost, MethodOutcomes, always_outcomes, frontier, frontier_cost_at,
                                           grid_cost_at, saving_intervals, saving_pct, target_grid)


def _always(correct, cost, targets, counts):
    return FallbackCost.of_always(always_outcomes(correct, cost), targets, counts)


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
    counts = resample_counts(resample_indices(n, 300, np.random.default_rng(1)), n)
    t = np.array([0.6, 0.7])
    per_target, mean = saving_intervals(m, MethodOutcomes(correct.copy(), cost.copy()), t, counts,
                                        _always(correct, cost, t, counts), t)
    assert mean.estimate == 0.0 and mean.lower == 0.0 == mean.upper and mean.p_value == 1.0
    assert all(iv.lower == 0.0 == iv.upper and iv.n_resamples == 300 for iv in per_target)


def test_a_uniformly_cheaper_method_is_detected():
    rng = np.random.default_rng(2)
    n, k = 1000, 8
    correct = rng.random((n, k)) < np.linspace(0.4, 0.9, k)
    cost = np.sort(rng.random((n, k)), axis=1) + 0.5
    ref = MethodOutcomes(correct, cost)
    cheaper = MethodOutcomes(correct, cost * 0.8)
    counts = resample_counts(resample_indices(n, 300, np.random.default_rng(3)), n)
    t = np.array([0.5, 0.6, 0.7])
    _, mean = saving_intervals(cheaper, ref, t, counts, _always(correct, cost, t, counts), t)
    assert mean.estimate == pytest.approx(20.0)
    assert mean.lower > 0 and mean.p_value == 0.0 and mean.n_resamples == 300


def test_the_target_grid_comes_from_the_validation_accuracies_of_the_always_models():
    n = 1000
    correct = np.zeros((n, 3), dtype=bool)
    correct[:612, 0] = True  # device 0.612
    correct[:700, 1] = True
    correct[:845, 2] = True  # best 0.845
    grid = target_grid(correct)
    assert grid[0] == 0.62 and grid[-1] == 0.84 and np.allclose(np.diff(grid), 0.01)
    assert target_grid(correct, np.arange(n) < 700)[-1] == 0.99  # over the first 700 rows every model but the device: 1.0
    assert target_grid(correct[:, [2, 0]]).tolist() == [0.84]  # the device is the best model: one target below it
    with pytest.raises(Exception, match="validation"):
        target_grid(np.zeros((0, 2), dtype=bool))


def test_a_missed_target_costs_the_cheapest_always_model_that_reaches_it_on_every_resample():
    """The fallback keeps the mean saving defined where a frontier misses a target on some resamples: no resample is
    dropped, and a method that misses costs exactly what the Always-model fallback costs on that resample."""
    rng = np.random.default_rng(5)
    n = 300
    always_correct = np.stack([rng.random(n) < 0.6, rng.random(n) < 0.95], axis=1)
    always_cost = np.tile([0.2, 1.0], (n, 1))
    weak = MethodOutcomes(rng.random((n, 2)) < 0.6, np.tile([0.3, 0.4], (n, 1)))  # tops out near 0.6
    counts = resample_counts(resample_indices(n, 500, np.random.default_rng(6)), n)
    t = np.array([0.7, 0.8])
    fb = _always(always_correct, always_cost, t, counts)
    other = MethodOutcomes(rng.random((n, 2)) < 0.62, np.tile([0.25, 0.5], (n, 1)))  # misses 0.8 too
    per_target, mean = saving_intervals(weak, other, t, counts, fb, t)
    assert all(iv.n_resamples == 500 and np.isfinite(iv.lower) for iv in per_target) and mean.n_resamples == 500
    assert per_target[1].estimate == 0.0 and per_target[1].lower == 0.0 == per_target[1].upper  # both pay the fallback
    from cr2.evaluation.fixed_accuracy import cost_samples

    est, samples = cost_samples(weak, t, counts, fb)
    assert est[1] == pytest.approx(1.0) and np.allclose(samples[:, 1], 1.0)  # the cheapest Always-model reaching 0.8: the strong one


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


# ---------------------------------------------------------------- what a side is charged (FallbackCost.charge)
def _cheap_strong_always(n):
    """Two Always-models on n rows: a cheap one right on 95 % of them (reaches 0.8 on every resample) and a dear one
    right on all."""
    correct = np.stack([np.arange(n) % 20 != 0, np.ones(n, dtype=bool)], axis=1)
    return correct, np.tile([0.2, 1.0], (n, 1))


def test_a_side_whose_frontier_reaches_a_target_above_a_cheaper_always_model_pays_the_always_model():
    """A deployer reaching 0.8 by always calling the cheap model would not pay a router's 0.5: the side is charged
    0.2 on the full test set and on every resample, where its own frontier reaches the target too."""
    from cr2.evaluation.fixed_accuracy import cost_samples

    n = 400
    always_correct, always_cost = _cheap_strong_always(n)
    router = MethodOutcomes(np.ones((n, 2), dtype=bool), np.tile([0.5, 0.9], (n, 1)))  # reaches 0.8 at 0.5
    counts = resample_counts(resample_indices(n, 300, np.random.default_rng(0)), n)
    t = np.array([0.8])
    own, own_samples = cost_samples(router, t, counts)
    assert own[0] == pytest.approx(0.5) and np.allclose(own_samples, 0.5)  # its own frontier reaches 0.8
    est, samples = cost_samples(router, t, counts, _always(always_correct, always_cost, t, counts))
    assert est[0] == pytest.approx(0.2) and np.allclose(samples, 0.2)
    cheaper_router = MethodOutcomes(np.ones((n, 1), dtype=bool), np.full((n, 1), 0.1))  # below the Always-model: own
    est, samples = cost_samples(cheaper_router, t, counts, _always(always_correct, always_cost, t, counts))
    assert est[0] == pytest.approx(0.1) and np.allclose(samples, 0.1)


def test_the_charge_is_finite_on_every_resample_and_never_charges_a_model_below_a_target_a_side_reaches():
    """charge(): reached → min(own, Always); not reached → own where finite, else the most accurate Always-model's."""
    fb = FallbackCost(np.array([0.7, 0.9]), np.array([0.3, 2.0]), np.array([[0.3, 2.0], [0.4, 2.5]]),
                      np.array([True, False]), np.array([[True, False], [True, True]]), 0.85)
    full, resampled = fb.charge(np.array([0.5, 1.5]), np.array([[np.nan, np.nan], [0.2, 3.0]]))
    assert full.tolist() == [0.3, 1.5]  # 0.9: no Always-model reaches it, the side's own frontier does
    assert resampled.tolist() == [[0.3, 2.0], [0.2, 2.5]]  # own NaN → Always; own cheaper → own; Always cheaper → Always
    assert np.isfinite(resampled).all()


def test_a_grid_target_no_always_model_reaches_on_test_is_left_out_of_the_mean_with_its_reason():
    n = 400
    correct = np.stack([np.arange(n) % 4 != 0, np.arange(n) % 10 != 0], axis=1)  # Always accuracies 0.75 and 0.90
    cost = np.tile([0.2, 1.0], (n, 1))
    counts = resample_counts(resample_indices(n, 200, np.random.default_rng(1)), n)
    t = np.array([0.7, 0.8, 0.9, 0.95, 0.97])
    fb = _always(correct, cost, t, counts)
    kept = fb.reachable_grid(t)
    assert kept.targets.tolist() == [0.7, 0.8, 0.9] and kept.dropped == (0.95, 0.97) and kept.n_targets == 3
    assert "0.95, 0.97" in kept.reason and "no Always-model reaches" in kept.reason and "0.9000" in kept.reason
    assert fb.reachable_grid(t[:3]).reason is None
    # the mean saving averages over the kept targets only
    a = MethodOutcomes(np.ones((n, 1), dtype=bool), np.full((n, 1), 0.5))
    b = MethodOutcomes(np.ones((n, 1), dtype=bool), np.full((n, 1), 0.25))
    per_target, mean = saving_intervals(b, a, t, counts, fb, t)
    assert mean.estimate == pytest.approx(np.mean([iv.estimate for iv in per_target[:3]]))
    assert mean.estimate != pytest.approx(np.mean([iv.estimate for iv in per_target]))
    nothing = fb.reachable_grid(np.array([0.95, 0.97]))  # none reached: the grid is kept, and the reason says so
    assert nothing.targets.tolist() == [0.95, 0.97] and "keeps them all" in nothing.reason
