"""Paired bootstrap over test queries: one set of resamples shared by every method, percentile intervals.

Every comparison cr2 publishes (a saving vs KNN, a metric at an operating point) is a statistic of the test
queries. Resampling the queries with replacement — the same resample for every method, so differences are
paired — and recomputing the statistic on each resample gives its sampling distribution; the 2.5 % and
97.5 % quantiles are the 95 % interval (Efron & Tibshirani, percentile method). A difference whose interval
contains 0 is "no difference detected", never a win or a loss.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from cr2.errors import InvalidValueError

#: the words a comparison may use: a direction only where the 95 % interval excludes 0
NO_DIFFERENCE = "no difference detected"


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap percentile interval."""

    estimate: float  # the statistic on the full test set
    lower: float  # lower end of the interval (quantile (1 − level)/2 of the resampled statistic)
    upper: float  # upper end (quantile (1 + level)/2)
    level: float = 0.95  # nominal coverage
    n_resamples: int = 0  # resamples the interval was computed from (finite ones)

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0 (a detected difference)."""
        return bool(np.isfinite(self.lower) and np.isfinite(self.upper) and (self.lower > 0 or self.upper < 0))


def resample_indices(n: int, n_resamples: int, rng: np.random.Generator) -> np.ndarray:
    """[n_resamples, n] int32 row indices drawn with replacement: resample b is row b.

    Draw it once per evaluation and hand the same array to every method so that the intervals are paired.
    """
    if int(n) < 1:
        raise InvalidValueError(f"bootstrap needs at least one test query, got n={n}")
    if int(n_resamples) < 1:
        raise InvalidValueError(f"n_resamples must be ≥ 1, got {n_resamples}")
    return rng.integers(0, int(n), size=(int(n_resamples), int(n)), dtype=np.int32)


def resampled_means(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Mean of per-query values on every resample: values [n] or [n, k] → [B] or [B, k] float64.

    Computed from counts (bincount per resample row), so memory stays O(B·n) for the index only.
    """
    v = np.asarray(values, dtype=np.float64)
    n = v.shape[0]
    if idx.ndim != 2 or (idx.size and int(idx.max()) >= n):
        raise InvalidValueError(f"resample indices of shape {idx.shape} do not index {n} rows")
    counts = np.stack([np.bincount(row, minlength=n) for row in idx]).astype(np.float64)  # [B, n]
    return counts @ v / idx.shape[1]


def percentile_interval(samples: np.ndarray, estimate: float, level: float = 0.95) -> Interval:
    """Percentile interval of a resampled statistic [B]; non-finite resamples (e.g. a target not reached) drop out."""
    if not 0.0 < level < 1.0:
        raise InvalidValueError(f"level must be in (0, 1), got {level}")
    s = np.asarray(samples, dtype=np.float64).ravel()
    s = s[np.isfinite(s)]
    if s.size == 0:
        return Interval(float(estimate), float("nan"), float("nan"), level, 0)
    lo, hi = np.quantile(s, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return Interval(float(estimate), float(lo), float(hi), level, int(s.size))


def bootstrap(statistic: Callable[[np.ndarray], float], idx: np.ndarray, level: float = 0.95) -> Interval:
    """Interval of any statistic of the test rows: statistic(row_indices) -> float, on all rows and on each resample."""
    n = idx.shape[1]
    est = float(statistic(np.arange(n)))
    samples = np.array([statistic(row) for row in idx], dtype=np.float64)
    return percentile_interval(samples, est, level)


def verdict(diff: Interval, better: str, worse: str) -> str:
    """Words for a paired difference (method − reference): `better` if the interval is all < 0 … `worse` if all > 0."""
    if not diff.excludes_zero:
        return NO_DIFFERENCE
    return better if diff.upper < 0 else worse
