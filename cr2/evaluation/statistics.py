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

class Verdict(str):
    """A verdict word as a verdict function returns it (saving_verdict, test_verdict, …): equal to the plain word,
    but of its own type, so a page can refuse a word that was typed or taken from a constant instead of computed."""


#: the words a comparison may use: a direction only where the 95 % interval excludes 0
NO_DIFFERENCE = "no difference detected"


@dataclass(frozen=True)
class Interval:
    """A point estimate with its bootstrap percentile interval and the two-sided p-value of the same resamples."""

    estimate: float  # the statistic on the full test set
    lower: float  # lower end of the interval (order statistic r + 1 of the resamples, see `tail_rank`)
    upper: float  # upper end (order statistic B − r)
    level: float = 0.95  # nominal coverage
    n_resamples: int = 0  # resamples the interval was computed from (finite ones)
    p_value: float = float("nan")  # two-sided bootstrap p of "the statistic is 0" (`bootstrap_p_values`)

    @property
    def excludes_zero(self) -> bool:
        """True when the whole interval lies on one side of 0 (a detected difference)."""
        return bool(np.isfinite(self.lower) and np.isfinite(self.upper) and (self.lower > 0 or self.upper < 0))


def resample_indices(n: int, n_resamples: int, rng: np.random.Generator, strata: np.ndarray | None = None
                     ) -> np.ndarray:
    """[n_resamples, n] int32 row indices drawn with replacement: resample b is row b.

    Draw it once per evaluation and hand the same array to every method so that the intervals are paired.
    strata ([n] labels, optional): each stratum is resampled within itself, keeping its size — e.g. the solvable
    test rows apart from the rest, so every resample holds as many solvable rows as the test set and a mean over
    them exists on every resample (a stratified bootstrap, conditional on the strata's sizes).
    """
    if int(n) < 1:
        raise InvalidValueError(f"bootstrap needs at least one test query, got n={n}")
    if int(n_resamples) < 1:
        raise InvalidValueError(f"n_resamples must be ≥ 1, got {n_resamples}")
    if strata is None:
        return rng.integers(0, int(n), size=(int(n_resamples), int(n)), dtype=np.int32)
    labels = np.asarray(strata)
    if labels.shape != (int(n),):
        raise InvalidValueError(f"strata of shape {labels.shape} do not label {n} rows")
    idx = np.empty((int(n_resamples), int(n)), dtype=np.int32)
    for value in np.unique(labels):  # in sorted order: the same draws on any machine
        rows = np.flatnonzero(labels == value).astype(np.int32)
        idx[:, rows] = rows[rng.integers(0, rows.size, size=(int(n_resamples), rows.size))]
    return idx


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


def _check_level(level: float) -> None:
    if not 0.0 < level < 1.0:
        raise InvalidValueError(f"level must be in (0, 1), got {level}")


def tail_rank(n_resamples: int, level: float = 0.95) -> int:
    """r, the resamples each tail of the interval leaves out: the interval is [s_(r+1), s_(B−r)] of the sorted
    resamples s_(1) ≤ … ≤ s_(B), with r = ⌈(1 − level)·B/2⌉ − 1 (B = 10,000, level 0.95: r = 249). This r makes the
    interval and `bootstrap_p_values` one test: the interval excludes 0 exactly where p < 1 − level."""
    _check_level(level)
    return max(0, math.ceil((1.0 - level) * int(n_resamples) / 2.0 - 1e-9) - 1)


def bootstrap_p_values(samples: np.ndarray) -> np.ndarray:
    """Two-sided bootstrap p-values of "the statistic is 0" from resamples [B] or [B, k] (finite): p = 2·min(#{s ≤ 0},
    #{s ≥ 0}) / B, capped at 1 — the smallest 1 − level at which the percentile interval (`tail_rank`) still
    contains 0, read off the same resamples as the interval, with no normal approximation (a skewed distribution
    gets its own p). Resolution 2 / B: p = 0 means no resample reached 0."""
    s = np.asarray(samples, dtype=np.float64)
    b = s.shape[0]
    if b == 0:
        raise InvalidValueError("bootstrap p-value needs at least one resample")
    below, above = (s <= 0.0).sum(axis=0), (s >= 0.0).sum(axis=0)
    return np.minimum(1.0, 2.0 * np.minimum(below, above) / b)


def bootstrap_intervals(samples: np.ndarray, estimates: np.ndarray, level: float = 0.95
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column-wise interval and p of a statistic defined on EVERY resample: samples [B, k] (all finite) →
    (lower [k], upper [k], p [k]). A NaN resample means the estimand is not defined on it: that is the caller's
    bug (define a fallback), never a resample to drop, so it raises."""
    s = np.asarray(samples, dtype=np.float64)
    if s.ndim != 2 or s.shape[0] == 0:
        raise InvalidValueError(f"bootstrap intervals need samples [B, k] with B ≥ 1, got {s.shape}")
    if not np.isfinite(s).all():
        bad = int((~np.isfinite(s).all(axis=0)).sum())
        raise InvalidValueError(f"{bad} of {s.shape[1]} statistics are undefined on some resample; an interval must "
                                "rest on every resample (give the estimand a fallback)")
    r = tail_rank(s.shape[0], level)
    ordered = np.sort(s, axis=0)
    return ordered[r], ordered[s.shape[0] - 1 - r], bootstrap_p_values(s)


def bootstrap_interval(samples: np.ndarray, estimate: float, level: float = 0.95) -> Interval:
    """`bootstrap_intervals` of one statistic: its interval and p from the same B resamples (all finite)."""
    s = np.asarray(samples, dtype=np.float64).reshape(-1, 1)
    lower, upper, p = bootstrap_intervals(s, np.array([estimate]), level)
    return Interval(float(estimate), float(lower[0]), float(upper[0]), level, int(s.shape[0]), float(p[0]))


def percentile_interval(samples: np.ndarray, estimate: float, level: float = 0.95) -> Interval:
    """`bootstrap_interval` over the finite resamples of a per-query mean whose row set a resample can miss (one
    small benchmark drawn zero times); n_resamples says how many it rests on. Comparisons use bootstrap_interval."""
    _check_level(level)
    s = np.asarray(samples, dtype=np.float64).ravel()
    s = s[np.isfinite(s)]
    if s.size == 0:
        return Interval(float(estimate), float("nan"), float("nan"), level, 0)
    return bootstrap_interval(s, estimate, level)


def percentile_intervals(samples: np.ndarray, estimates: np.ndarray, level: float = 0.95
                         ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Column-wise `percentile_interval` of samples [B, k]: (lower [k], upper [k], p [k], finite resamples [k])."""
    _check_level(level)
    s = np.asarray(samples, dtype=np.float64)
    finite = np.isfinite(s)
    n_ok = finite.sum(axis=0)
    lower, upper, p = (np.full(s.shape[1], np.nan) for _ in range(3))
    full = n_ok == s.shape[0]
    if full.any():
        lower[full], upper[full], p[full] = bootstrap_intervals(s[:, full], np.asarray(estimates)[full], level)
    for j in np.flatnonzero(~full & (n_ok > 0)):  # columns a resample missed: one at a time over the finite ones
        iv = percentile_interval(s[:, j], float(estimates[j]), level)
        lower[j], upper[j], p[j] = iv.lower, iv.upper, iv.p_value
    return lower, upper, p, n_ok


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


def holm_of_stored(p_values) -> np.ndarray:
    """Holm-adjusted p [k] of a family of k stored bootstrap p-values (`bootstrap_p_values`, kept beside each
    interval) read together; undefined ones stay NaN and do not count."""
    return holm_adjust(np.asarray([np.nan if v is None else v for v in p_values], dtype=np.float64))


#: the words of a saving (positive: the method is cheaper than what it is compared with)
CHEAPER, DEARER = "cheaper", "dearer"


def significant(p: float | None, level: float = 0.95) -> bool:
    """p < 1 − level, the one reading of a (corrected) p-value; the tolerance keeps p = 2·25/1,000 = 0.05 from passing
    by the last bit of 1 − 0.95, so a word and its interval never disagree."""
    return p is not None and bool(np.isfinite(p)) and float(p) < (1.0 - level) - 1e-12


def saving_verdict(lower: float, upper: float, p_adjusted: float | None = None, level: float = 0.95) -> str | None:
    """The one verdict of a saving (%, positive = cheaper) from its interval: 'cheaper' where the whole interval is
    above 0, 'dearer' where below, else NO_DIFFERENCE; None where the interval is undefined. With p_adjusted (a
    family-wise corrected p-value of the same comparison) a direction also needs p_adjusted < 1 − level — the SQL
    views' CASE over (lower, upper) is this rule without a family."""
    if lower is None or upper is None or not (np.isfinite(lower) and np.isfinite(upper)):
        return None
    ok = p_adjusted is None or significant(p_adjusted, level)
    if lower > 0 and ok:
        return Verdict(CHEAPER)
    if upper < 0 and ok:
        return Verdict(DEARER)
    return Verdict(NO_DIFFERENCE)


def test_verdict(direction: float, p_adjusted: float, level: float = 0.95) -> str | None:
    """The verdict of a saving from a (family-wise corrected) test instead of an interval — e.g. a signed-rank test
    across pools: 'cheaper' / 'dearer' by the sign of `direction` (the median saving) where p_adjusted < 1 − level,
    else NO_DIFFERENCE; None where the test is undefined."""
    if p_adjusted is None or not np.isfinite(p_adjusted) or direction is None or not np.isfinite(direction):
        return None
    if significant(p_adjusted, level) and direction != 0:
        return Verdict(CHEAPER if direction > 0 else DEARER)
    return Verdict(NO_DIFFERENCE)


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
