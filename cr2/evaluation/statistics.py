"""Paired bootstrap over test queries: one set of resamples shared by every method, percentile intervals.

Every comparison cr2 publishes (a saving vs KNN, a metric at an operating point) is a statistic of the test
queries. Resampling the queries with replacement — the same resample for every method, so differences are
paired — and recomputing the statistic on each resample gives its sampling distribution; the 2.5 % and
97.5 % quantiles are the 95 % interval (Efron & Tibshirani, percentile method). A difference whose interval
contains 0 is "no difference detected", never a win or a loss.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cr2.core.errors import InvalidValueError

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


def resample_counts(idx: np.ndarray, n: int) -> np.ndarray:
    """[B, n] float64: how often each of the n rows is drawn in each resample (resample b is row b of idx).

    Every resampled mean is a matrix product with these counts; compute them once per evaluation and pass
    them to every method (`counts=`) so the paired statistics share one pass over the index.
    """
    if idx.ndim != 2 or (idx.size and int(idx.max()) >= n):
        raise InvalidValueError(f"resample indices of shape {idx.shape} do not index {n} rows")
    return np.stack([np.bincount(row, minlength=n) for row in idx]).astype(np.float64)


def resampled_means(values: np.ndarray, idx: np.ndarray | None, rows: np.ndarray | None = None, *,
                    counts: np.ndarray | None = None) -> np.ndarray:
    """Mean of per-query values on every resample: values [n] or [n, k] → [B] or [B, k] float64.

    rows ([n] bool, optional): the mean is over these rows only — on a resample, the drawn rows among them
    (a ratio of resampled sums; NaN on a resample that draws none). The resample itself always indexes all n
    rows, so statistics over different row sets (solvable queries, one benchmark) stay paired. Computed from
    counts (`resample_counts`; pass them in to reuse), so memory stays O(B·n).
    """
    v = np.asarray(values, dtype=np.float64)
    n = v.shape[0]
    c = resample_counts(idx, n) if counts is None else counts
    if c.shape[1] != n:
        raise InvalidValueError(f"resample counts of shape {c.shape} do not count {n} rows")
    if rows is None:
        return c @ v / c[0].sum()
    mask = np.asarray(rows, dtype=bool)
    denom = c @ mask.astype(np.float64)  # [B] drawn rows of the scope
    num = c[:, mask] @ v[mask]
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / (denom if v.ndim == 1 else denom[:, None])


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


def percentile_intervals(samples: np.ndarray, estimates: np.ndarray, level: float = 0.95
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-wise `percentile_interval` of samples [B, k]: (lower [k], upper [k], finite resamples [k])."""
    if not 0.0 < level < 1.0:
        raise InvalidValueError(f"level must be in (0, 1), got {level}")
    s = np.asarray(samples, dtype=np.float64)
    q = [(1.0 - level) / 2.0, (1.0 + level) / 2.0]
    finite = np.isfinite(s)
    n_ok = finite.sum(axis=0)
    lower, upper = np.full(s.shape[1], np.nan), np.full(s.shape[1], np.nan)
    full = n_ok == s.shape[0]
    if full.any():
        lower[full], upper[full] = np.quantile(s[:, full], q, axis=0)
    for j in np.flatnonzero(~full & (n_ok > 0)):  # columns with dropped resamples: one at a time
        iv = percentile_interval(s[:, j], float(estimates[j]), level)
        lower[j], upper[j] = iv.lower, iv.upper
    return lower, upper, n_ok


def _normal_p(estimate: float, se: float) -> float:
    """Two-sided p-value of "the statistic is 0" for an estimate with standard error se (normal approximation)."""
    if se <= 0.0:
        return 1.0 if estimate == 0 else 0.0
    return float(math.erfc(abs(estimate) / se / math.sqrt(2.0)))


def bootstrap_p_value(estimate: float, samples: np.ndarray) -> float:
    """Two-sided p-value of "the statistic is 0" from its bootstrap standard error (normal approximation):
    p = 2 Φ(−|estimate| / sd(finite resamples)). A percentile p-value cannot go below 2 / (B + 1) — with B = 1,000
    and a family of dozens of tests no Holm-adjusted p could fall under 0.05 —, so the standard error is used;
    NaN with fewer than two finite resamples."""
    s = np.asarray(samples, dtype=np.float64).ravel()
    s = s[np.isfinite(s)]
    if s.size < 2 or not np.isfinite(estimate):
        return float("nan")
    return _normal_p(estimate, float(s.std(ddof=1)))


def interval_p_value(estimate: float, lower: float, upper: float, level: float = 0.95) -> float:
    """Two-sided p-value of "the statistic is 0" read off a stored interval: bootstrap_p_value's normal approximation
    with the standard error the interval's width implies, (upper − lower) / (2 z), z the (1 + level)/2 normal
    quantile; for results whose resamples were not kept. NaN where the interval is undefined."""
    from statistics import NormalDist

    if not all(v is not None and np.isfinite(v) for v in (estimate, lower, upper)):
        return float("nan")
    return _normal_p(estimate, (upper - lower) / (2.0 * NormalDist().inv_cdf((1.0 + level) / 2.0)))


def holm_adjust(p_values: np.ndarray) -> np.ndarray:
    """Return Holm's step-down adjusted p-values: p̃_(i) = max_{j ≤ i} min(1, (m − j + 1)·p_(j)) (NaN stays NaN and
    does not count in m). Valid under any dependence between the tests."""
    p = np.asarray(p_values, dtype=np.float64)
    adjusted = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    adjusted[order] = np.maximum.accumulate(scaled) if m else scaled
    return adjusted


# ---------------------------------------------------------------- over seeds: the t-interval
@dataclass(frozen=True)
class SeedInterval:
    """A statistic over independent re-runs (seeds): mean, sd, the t-interval of the mean and the one-sample t-test
    of "the mean is 0" (two-sided). NaN interval and p with fewer than two seeds."""

    n: int  # seeds with a value
    mean: float
    sd: float  # sample standard deviation (ddof = 1)
    lower: float  # mean − t_{n−1, (1+level)/2} · sd / √n
    upper: float
    p_value: float
    level: float = 0.95


def t_interval(mean: float, sd: float, n: int, level: float = 0.95) -> SeedInterval:
    """The Student-t interval and t-test of a mean over n seeds from its summary (mean, sample sd, n) — what
    v_seed_spread stores. A seed-spread conclusion is only ever drawn from this interval (or its Holm-adjusted p),
    never from mean ± sd."""
    from scipy.stats import t as student_t

    if not 0.0 < level < 1.0:
        raise InvalidValueError(f"level must be in (0, 1), got {level}")
    n = int(n)
    if n < 2 or not (np.isfinite(mean) and np.isfinite(sd)):
        return SeedInterval(n, float(mean), float("nan") if n < 2 else float(sd), float("nan"), float("nan"),
                            float("nan"), level)
    se = float(sd) / math.sqrt(n)
    half = float(student_t.ppf((1.0 + level) / 2.0, n - 1)) * se
    p = float(2.0 * student_t.sf(abs(mean) / se, n - 1)) if se > 0 else (0.0 if mean else 1.0)
    return SeedInterval(n, float(mean), float(sd), float(mean) - half, float(mean) + half, p, level)


def seed_t_interval(values: np.ndarray, level: float = 0.95) -> SeedInterval:
    """t_interval of the finite values (one per seed)."""
    v = np.asarray(values, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    if v.size == 0:
        return SeedInterval(0, float("nan"), float("nan"), float("nan"), float("nan"), float("nan"), level)
    return t_interval(float(v.mean()), float(v.std(ddof=1)) if v.size > 1 else float("nan"), int(v.size), level)


def holm_of_intervals(estimates, lowers, uppers, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """(p [k], Holm-adjusted p [k]) of a family of k stored intervals read together: each p read off its interval
    (interval_p_value), then Holm over the family (undefined intervals stay NaN and do not count)."""
    p = np.array([interval_p_value(e, lo, hi, level) for e, lo, hi in zip(estimates, lowers, uppers)], dtype=float)
    return p, holm_adjust(p)


#: the words of a saving (positive: the method is cheaper than what it is compared with)
CHEAPER, DEARER = "cheaper", "dearer"


def saving_verdict(lower: float, upper: float, p_adjusted: float | None = None, level: float = 0.95) -> str | None:
    """The one verdict of a saving (%, positive = cheaper) from its interval: 'cheaper' where the whole interval is
    above 0, 'dearer' where below, else NO_DIFFERENCE; None where the interval is undefined. With p_adjusted (a
    family-wise corrected p-value of the same comparison) a direction also needs p_adjusted < 1 − level — the SQL
    views' CASE over (lower, upper) is this rule without a family."""
    if lower is None or upper is None or not (np.isfinite(lower) and np.isfinite(upper)):
        return None
    significant = p_adjusted is None or (np.isfinite(p_adjusted) and p_adjusted < 1.0 - level)
    if lower > 0 and significant:
        return CHEAPER
    if upper < 0 and significant:
        return DEARER
    return NO_DIFFERENCE


def test_verdict(direction: float, p_adjusted: float, level: float = 0.95) -> str | None:
    """The verdict of a saving from a (family-wise corrected) test instead of an interval — e.g. a signed-rank test
    across pools: 'cheaper' / 'dearer' by the sign of `direction` (the median saving) where p_adjusted < 1 − level,
    else NO_DIFFERENCE; None where the test is undefined."""
    if p_adjusted is None or not np.isfinite(p_adjusted) or direction is None or not np.isfinite(direction):
        return None
    if p_adjusted < 1.0 - level and direction != 0:
        return CHEAPER if direction > 0 else DEARER
    return NO_DIFFERENCE


# ---------------------------------------------------------------- across pools: the Wilcoxon signed-rank test
@dataclass(frozen=True)
class SignedRank:
    """A paired signed-rank test of x − y over units (pools): W⁺, W⁻ and the two-sided p-value."""

    n: int  # non-zero differences (zeros dropped, Wilcoxon's rule)
    w_plus: float  # sum of the ranks of the positive differences
    w_minus: float  # sum of the ranks of the negative differences
    p_value: float  # two-sided
    method: str  # "exact" (no ties, n ≤ 50) or "normal" (tie-corrected normal approximation, no continuity correction)
    median_diff: float  # median of the differences (zeros included)


def signed_rank_test(x: np.ndarray, y: np.ndarray | None = None) -> SignedRank:
    """Wilcoxon signed-rank test of the paired differences d = x − y (or of x alone), two-sided.

    Zeros are dropped (Wilcoxon's "wilcox" rule) and ties share their mean rank. The p-value is exact (the null
    distribution of W⁺ by counting the 2ⁿ sign patterns) when there are no ties and n ≤ 50, else the normal
    approximation with the tie-corrected variance, as scipy.stats.wilcoxon computes by default.
    """
    from scipy.stats import norm, rankdata

    d = np.asarray(x, dtype=np.float64) - (0.0 if y is None else np.asarray(y, dtype=np.float64))
    if d.ndim != 1 or not np.isfinite(d).all():
        raise InvalidValueError(f"signed-rank test needs one finite difference per unit, got shape {d.shape}")
    med = float(np.median(d)) if d.size else float("nan")
    d = d[d != 0]
    n = int(d.size)
    if n == 0:
        raise InvalidValueError("signed-rank test: every difference is 0 (nothing to test)")
    r = rankdata(np.abs(d))
    w_plus, w_minus = float(r[d > 0].sum()), float(r[d < 0].sum())
    ties = np.unique(np.abs(d), return_counts=True)[1]
    if n <= 50 and (ties == 1).all():
        # number of sign patterns with W⁺ = w, w = 0 … n(n+1)/2 (ranks 1 … n), by dynamic programming
        total = n * (n + 1) // 2
        counts = np.zeros(total + 1, dtype=np.float64)
        counts[0] = 1.0
        for k in range(1, n + 1):
            counts[k:] = counts[k:] + counts[:-k].copy()
        cdf = np.cumsum(counts) / 2.0 ** n
        w = int(round(min(w_plus, w_minus)))
        p = float(min(1.0, 2.0 * cdf[w]))
        return SignedRank(n, w_plus, w_minus, p, "exact", med)
    mean = n * (n + 1) / 4.0
    var = n * (n + 1) * (2 * n + 1) / 24.0 - float((ties ** 3 - ties).sum()) / 48.0
    z = (min(w_plus, w_minus) - mean) / np.sqrt(var)
    return SignedRank(n, w_plus, w_minus, float(min(1.0, 2.0 * norm.cdf(z))), "normal", med)


# ---------------------------------------------------------------- a trend across cells: Spearman's ρ, permutation p
@dataclass(frozen=True)
class SpearmanTest:
    """Spearman's rank correlation of (x, y) over units (e.g. study cells) with its two-sided permutation p-value."""

    n: int  # units
    rho: float  # Spearman's ρ (Pearson's correlation of the mid-ranks)
    p_value: float  # two-sided: share of permutations of y with |ρ| ≥ the observed |ρ|
    n_permutations: int  # permutations the p-value counts over (n! when exact)
    method: str  # "exact" (every permutation, n! ≤ max_exact) or "monte-carlo" ((1 + hits) / (1 + B), seeded)


def _mid_ranks(v: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(v)  # ties share their mean rank


def _pearson_rows(rx: np.ndarray, ry: np.ndarray) -> np.ndarray:
    """Pearson correlation of rx [n] with every row of ry [k, n]; NaN where either is constant."""
    a = rx - rx.mean()
    b = ry - ry.mean(axis=-1, keepdims=True)
    den = np.sqrt((a * a).sum() * (b * b).sum(axis=-1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (b @ a) / den, np.nan)


def spearman_permutation_test(x: np.ndarray, y: np.ndarray, rng: np.random.Generator, n_permutations: int = 10_000,
                              max_exact: int = 40_320) -> SpearmanTest:
    """Spearman's ρ of (x, y) and the two-sided permutation p-value of "no monotone association".

    Under the null every pairing of x with y is equally likely, so p is the share of permutations of y whose |ρ|
    reaches the observed |ρ| (a tolerance of 1e-12 counts ties of ρ as reaching it). With n! ≤ max_exact (n ≤ 8)
    every permutation is counted (exact, no randomness); otherwise `n_permutations` random ones drawn with `rng`
    and p = (1 + hits) / (1 + B), which never reports 0. Ties in x or y share mid-ranks. A trend across cells that
    share test queries and a base gate is a description of those cells, not of independent draws: p tests the
    ordering, not the dependence between cells.
    """
    import itertools
    import math as _math

    xv, yv = np.asarray(x, dtype=np.float64).ravel(), np.asarray(y, dtype=np.float64).ravel()
    if xv.shape != yv.shape or not (np.isfinite(xv).all() and np.isfinite(yv).all()):
        raise InvalidValueError(f"Spearman test needs two finite arrays of one length, got {xv.shape} and {yv.shape}")
    n = int(xv.size)
    if n < 3:
        raise InvalidValueError(f"Spearman test needs at least 3 units, got {n}")
    if int(n_permutations) < 1:
        raise InvalidValueError(f"n_permutations must be ≥ 1, got {n_permutations}")
    rx, ry = _mid_ranks(xv), _mid_ranks(yv)
    rho = float(_pearson_rows(rx, ry[None, :])[0])
    if not np.isfinite(rho):
        return SpearmanTest(n, float("nan"), float("nan"), 0, "exact")
    if _math.factorial(n) <= int(max_exact):
        perms = np.array(list(itertools.permutations(range(n))), dtype=np.int64)
        r = _pearson_rows(rx, ry[perms])
        hits = int((np.abs(r) >= abs(rho) - 1e-12).sum())
        return SpearmanTest(n, rho, hits / len(perms), len(perms), "exact")
    b = int(n_permutations)
    perms = np.argsort(rng.random((b, n)), axis=1)
    r = _pearson_rows(rx, ry[perms])
    hits = int((np.abs(r) >= abs(rho) - 1e-12).sum())
    return SpearmanTest(n, rho, (1 + hits) / (1 + b), b, "monte-carlo")
