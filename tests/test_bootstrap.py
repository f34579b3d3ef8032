"""Paired bootstrap intervals: shrink with more test queries, centre on 0 for identical methods."""
import numpy as np
import pytest

from cr2.evaluation.statistics import NO_DIFFERENCE, percentile_interval, resample_indices, resampled_means, saving_verdict
from cr2.core.errors import InvalidValueError


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
    assert saving_verdict(-iv.upper, -iv.lower) == NO_DIFFERENCE  # the saving is the negated cost difference


def test_a_clear_difference_is_detected_and_a_small_one_is_not():
    rng = np.random.default_rng(4)
    base = rng.random(2000)
    idx = resample_indices(2000, 1000, np.random.default_rng(5))
    big = percentile_interval(resampled_means(base - 0.2, idx) - resampled_means(base, idx), -0.2)
    assert saving_verdict(-big.upper, -big.lower) == "cheaper"
    noisy = base + rng.normal(0, 0.5, 2000)  # no true difference, only noise
    small = percentile_interval(resampled_means(noisy, idx) - resampled_means(base, idx), float((noisy - base).mean()))
    assert small.lower < 0 < small.upper


def test_bad_inputs_are_named():
    with pytest.raises(InvalidValueError, match="at least one test query"):
        resample_indices(0, 10, np.random.default_rng(0))
    with pytest.raises(InvalidValueError, match="level"):
        percentile_interval(np.ones(3), 1.0, level=1.5)
    assert np.isnan(percentile_interval(np.array([np.nan]), 1.0).lower)


def test_the_sql_verdict_is_the_python_verdict():
    """The views' macro saving_verdict (warehouse/macros.sql) and cr2.evaluation.statistics.saving_verdict agree on every kind of
    interval: either side of 0, touching it, undefined (NULL, NaN, ±inf)."""
    import itertools

    import duckdb

    from cr2_warehouse.db import MACROS_FILE

    con = duckdb.connect()
    con.execute(MACROS_FILE.read_text())
    ends = [None, float("nan"), float("inf"), -float("inf"), -2.0, -0.5, -0.0, 0.0, 1e-12, 0.5, 2.0]
    pairs = [(lo, hi) for lo, hi in itertools.product(ends, ends)
             if lo is None or hi is None or not (lo == lo and hi == hi) or lo <= hi]
    got = con.execute("SELECT saving_verdict(lo, hi) FROM (SELECT unnest(?::DOUBLE[]) AS lo, unnest(?::DOUBLE[]) AS hi)",
                      [[p[0] for p in pairs], [p[1] for p in pairs]]).fetchall()
    assert [g[0] for g in got] == [saving_verdict(lo, hi) for lo, hi in pairs]



def test_the_sql_target_grids_are_the_python_ones():
    import duckdb

    from cr2.evaluation.fixed_accuracy import PAPER_TARGETS, VIEW_TARGETS
    from cr2_warehouse.db import MACROS_FILE

    con = duckdb.connect()
    con.execute(MACROS_FILE.read_text())
    assert [r[0] for r in con.execute("SELECT target FROM target_grid() ORDER BY target").fetchall()] == list(VIEW_TARGETS)
    assert [r[0] for r in con.execute("SELECT target FROM paper_targets() ORDER BY target").fetchall()] == list(PAPER_TARGETS)
