"""Paired bootstrap intervals: shrink with more test queries, centre on 0 for identical methods."""
import numpy as np
import pytest

from cr2.bootstrap import (NO_DIFFERENCE, bootstrap, percentile_interval, resample_indices, resampled_means,
                           verdict)
from cr2.errors import InvalidValueError


def _mean_interval(x: np.ndarray, seed: int = 0):
    idx = resample_indices(len(x), 1000, np.random.default_rng(seed))
    return percentile_interval(resampled_means(x, idx), float(x.mean()))


def test_interval_shrinks_as_the_test_set_grows():
    rng = np.random.default_rng(1)
    widths = []
    for n in (100, 400, 1600):
        iv = _mean_interval(rng.random(n) < 0.3)
        widths.append(iv.upper - iv.lower)
        assert iv.lower <= iv.estimate <= iv.upper
    assert widths[0] > widths[1] > widths[2]
    # width ∝ 1/√n: quadrupling n roughly halves it (one-sided tolerance stated: within 35 %)
    assert widths[1] / widths[0] == pytest.approx(0.5, rel=0.35)


def test_identical_methods_give_an_interval_at_zero():
    rng = np.random.default_rng(2)
    cost = rng.random(500)
    idx = resample_indices(500, 1000, np.random.default_rng(3))
    diff = resampled_means(cost, idx) - resampled_means(cost.copy(), idx)  # the same resample for both: paired
    iv = percentile_interval(diff, 0.0)
    assert iv.lower == 0.0 == iv.upper
    assert verdict(iv, "cheaper", "dearer") == NO_DIFFERENCE


def test_a_clear_difference_is_detected_and_a_small_one_is_not():
    rng = np.random.default_rng(4)
    base = rng.random(2000)
    idx = resample_indices(2000, 1000, np.random.default_rng(5))
    big = percentile_interval(resampled_means(base - 0.2, idx) - resampled_means(base, idx), -0.2)
    assert verdict(big, "cheaper", "dearer") == "cheaper"
    noisy = base + rng.normal(0, 0.5, 2000)  # no true difference, only noise
    small = percentile_interval(resampled_means(noisy, idx) - resampled_means(base, idx), float((noisy - base).mean()))
    assert small.lower < 0 < small.upper


def test_generic_statistic_matches_resampled_means():
    x = np.random.default_rng(6).random(50)
    idx = resample_indices(50, 200, np.random.default_rng(7))
    a = bootstrap(lambda rows: float(x[rows].mean()), idx)
    b = percentile_interval(resampled_means(x, idx), float(x.mean()))
    assert a.lower == pytest.approx(b.lower) and a.upper == pytest.approx(b.upper)


def test_bad_inputs_are_named():
    with pytest.raises(InvalidValueError, match="at least one test query"):
        resample_indices(0, 10, np.random.default_rng(0))
    with pytest.raises(InvalidValueError, match="level"):
        percentile_interval(np.ones(3), 1.0, level=1.5)
    assert np.isnan(percentile_interval(np.array([np.nan]), 1.0).lower)
