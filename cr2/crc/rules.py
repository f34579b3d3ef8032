"""The calibration rules: each one function from (scores, risks, α) to the exact threshold τ (paper §VI-F).

crc (eq. crc_tau), empirical (eq. rhat_tau, no +1), ltt (Learn-then-Test, binomial-tail p-values) and the
uncalibrated fixed (τ = 0.5) and rate (top f of the calibration scores) rules; see cr2/crc/__init__.py for
how thresholds are represented and compared.
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from cr2.crc.registry import FIXED_THRESHOLD, RULES, Rule, rule_spec
from cr2.core.errors import DataValidationError, InvalidValueError

# ---------------------------------------------------------------- inputs
def _scores_array(scores: np.ndarray) -> np.ndarray:
    arr = np.asarray(scores)
    if not np.issubdtype(arr.dtype, np.floating):
        arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise DataValidationError("scores contain NaN or ±inf; a calibration score must be a finite number for every query")
    return arr


def _check_pair(scores: np.ndarray, risks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    scores = _scores_array(scores)
    risks = np.asarray(risks)
    if scores.ndim != 1 or risks.shape != scores.shape:
        raise InvalidValueError(f"scores {scores.shape} and risks {risks.shape} must be two [N] vectors of one length")
    if len(scores) == 0:
        raise DataValidationError("the calibration set is empty; CRC needs N ≥ 1 calibration queries")
    if risks.dtype != bool:
        if not np.isin(risks, (0, 1)).all():
            raise DataValidationError("risks must be 0/1 (the disagreement label r)")
        risks = risks.astype(bool)
    return scores, risks


def _alphas(alpha: float | Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.atleast_1d(np.asarray(alpha, dtype=np.float64))
    if arr.ndim != 1 or np.any(~np.isfinite(arr)) or np.any(arr < 0):
        raise InvalidValueError(f"α must be finite and ≥ 0, got {alpha!r}")
    return arr


# ---------------------------------------------------------------- the rules
def max_risky_count(n_calib: int, alpha: np.ndarray, rule: Rule = "crc") -> np.ndarray:
    """Return the largest k ∈ {−1, …, N} with (k + 1)/(N + 1) ≤ α (crc) or k/N ≤ α (empirical), per α.

    The bound is decided by the same floating-point expression the validity check uses, so a returned
    k always satisfies it and k + 1 never does.
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    rule = rule_spec(rule).procedure  # crc-oracle / crc-avoidable count like crc: only the risk label differs
    if rule == "crc":
        # eq. (crc_tau): CRC(τ) = (d_τ + 1)/(N + 1)
        def ok(k: np.ndarray) -> np.ndarray:
            return (k + 1) / (n_calib + 1) <= alpha

        k = np.floor(np.minimum(alpha, 1.0) * (n_calib + 1)).astype(np.int64) - 1
    elif rule == "empirical":
        # eq. (rhat_tau): R̂(τ) = d_τ / N, without the conformal +1 correction
        def ok(k: np.ndarray) -> np.ndarray:
            return k / n_calib <= alpha

        k = np.floor(np.minimum(alpha, 1.0) * n_calib).astype(np.int64)
    else:
        raise InvalidValueError(f"unknown calibration rule '{rule}'; available: crc, empirical")
    lowest = -1 if rule == "crc" else 0  # crc: k = −1 marks "no τ qualifies"; empirical: d = 0 always qualifies
    k = np.clip(k, lowest, n_calib)
    # the floor above can be off by one through rounding; settle it with the exact check
    while True:
        up = (k < n_calib) & ok(k + 1)
        down = (k > lowest) & ~ok(k)
        if not (up.any() or down.any()):
            break
        k = k + up - down
    return k


# ---------------------------------------------------------------- Learn-then-Test p-values
def binomial_cdf(k: np.ndarray | int, n: int, p: float) -> np.ndarray:
    """Return P(Bin(n, p) ≤ k) per integer k (k < 0 → 0, k ≥ n → 1), float64, from log-space pmf terms (numpy only)."""
    k = np.asarray(k, dtype=np.int64)
    if n < 0 or not 0.0 <= p <= 1.0:
        raise InvalidValueError(f"binomial_cdf needs n ≥ 0 and p ∈ [0, 1], got n={n}, p={p}")
    cdf = _binomial_cdf_table(int(n), float(p))
    out = np.where(k < 0, 0.0, cdf[np.clip(k, 0, n)])
    return np.where(k >= n, 1.0, out)


@functools.lru_cache(maxsize=1024)
def _binomial_cdf_table(n: int, p: float) -> np.ndarray:
    """Return P(Bin(n, p) ≤ k) for k = 0 … n (read-only; cached: re-calibrations reuse the same (N, α))."""
    j = np.arange(n + 1)
    if p == 0.0:
        cdf = np.ones(n + 1)
    elif p == 1.0:
        cdf = (j == n).astype(np.float64)
    else:
        log_choose = np.concatenate([[0.0], np.cumsum(np.log((n - j[1:] + 1) / j[1:]))])  # log C(n, j)
        cdf = np.minimum(np.cumsum(np.exp(log_choose + j * np.log(p) + (n - j) * np.log1p(-p))), 1.0)
    cdf.setflags(write=False)
    return cdf


def binomial_tail_pvalue(n_risky: np.ndarray | int, n: int, alpha: float) -> np.ndarray:
    """Return the exact p-value P(Bin(N, α) ≤ d) of H0: risk > α after d risky of N i.i.d. 0/1 losses.

    Why the binomial tail and not Hoeffding–Bentkus: the gate loss r·1[s ≥ τ] and the accuracy loss
    1 − y are 0/1, so d is Binomial(N, risk) exactly; its lower tail is the smallest valid p-value
    (HB bounds this same tail by e·P(Bin ≤ d) or a Hoeffding term, both larger). Valid: under H0 the
    risk exceeds α and Bin(N, risk) is stochastically larger than Bin(N, α), so P(p ≤ u) ≤ u.
    """
    # LTT (Angelopoulos et al. 2021, §3.1, binomial tail): p = P(Bin(n, α) ≤ n R̂)
    return binomial_cdf(n_risky, n, alpha)


def hoeffding_bentkus_pvalue(mean_loss: np.ndarray | float, n: int, alpha: float) -> np.ndarray:
    """Return the Hoeffding–Bentkus p-value of H0: E[loss] > α for the mean of N i.i.d. losses in [0, 1].

    For bounded, non-binary losses (the normalised cost of a budget); for 0/1 losses use binomial_tail_pvalue.
    """
    mean = np.clip(np.asarray(mean_loss, dtype=np.float64), 0.0, 1.0)
    if not 0.0 < alpha < 1.0:
        raise InvalidValueError(f"the Hoeffding–Bentkus p-value needs α ∈ (0, 1), got {alpha}")
    a = np.minimum(mean, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        # h1(a, α) = a log(a/α) + (1 − a) log((1 − a)/(1 − α)), the Bernoulli KL divergence
        h1 = np.where(a > 0, a * np.log(a / alpha), 0.0) + np.where(a < 1, (1 - a) * np.log((1 - a) / (1 - alpha)), 0.0)
    # LTT eq. (HB): p = min(exp(−n h1(min(R̂, α), α)), e · P(Bin(n, α) ≤ ⌈n R̂⌉))
    hoeffding = np.exp(-n * h1)
    bentkus = np.e * binomial_cdf(np.ceil(n * mean - 1e-9).astype(np.int64), n, alpha)
    return np.minimum(np.minimum(hoeffding, bentkus), 1.0)


def ltt_max_risky_count(n_calib: int, alpha: np.ndarray, delta: float) -> np.ndarray:
    """Return the largest k ∈ {−1, …, N} with P(Bin(N, α) ≤ k) ≤ δ, per α (−1: no τ is certified).

    Fixed-sequence testing over τ from +∞ (accept nothing) down to −∞: p(τ) = P(Bin(N, α) ≤ d_τ) grows
    as τ falls (d_τ grows), so the sequence rejects H0(τ): risk(τ) > α exactly while d_τ ≤ k and stops at
    the first τ with d_τ > k. Each H0 is tested at the full level δ, which fixed-sequence testing allows
    because the order is fixed before seeing the data (conservative to permissive).
    """
    alpha = np.asarray(alpha, dtype=np.float64)
    if not 0.0 < delta < 1.0:
        raise InvalidValueError(f"LTT needs δ ∈ (0, 1), got {delta}")
    out = np.empty(alpha.shape, dtype=np.int64)
    for idx, a in np.ndenumerate(alpha):
        cdf = binomial_tail_pvalue(np.arange(n_calib + 1), n_calib, float(min(a, 1.0)))
        # the last k whose p-value is ≤ δ; cdf is non-decreasing in k
        out[idx] = int(np.searchsorted(cdf, delta, side="right")) - 1
    return out


def ltt_min_n_calib(alpha: float, delta: float) -> int:
    """Return the smallest N for which LTT can certify any threshold: (1 − α)^N ≤ δ, i.e. N ≥ ln δ / ln(1 − α)."""
    n = int(np.ceil(np.log(delta) / np.log1p(-alpha)))
    while n > 0 and (1 - alpha) ** (n - 1) <= delta:  # settle rounding with the exact check
        n -= 1
    while (1 - alpha) ** n > delta:
        n += 1
    return n


def crc_min_n_calib(alpha: float) -> int:
    """Return the smallest N for which CRC can accept anything: 1/(N + 1) ≤ α."""
    n = max(int(np.ceil(1.0 / alpha)) - 1, 0)
    while 1 / (n + 1) > alpha:
        n += 1
    return n


def _threshold_from_risky(risky_desc: np.ndarray, k: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Return the smallest τ (in `dtype`) with #{risky ≥ τ} ≤ k, per k; risky_desc sorted descending."""
    out = np.empty(len(k), dtype=np.float64)
    out[k < 0] = np.inf  # no τ qualifies: accept nothing
    out[k >= len(risky_desc)] = -np.inf  # every point can be accepted
    mid = (k >= 0) & (k < len(risky_desc))
    deciding = risky_desc[k[mid]]  # v_{k+1}, the (k+1)-th largest risky score
    # the feasible set is (v_{k+1}, ∞): the next representable score above v_{k+1} is its least member
    out[mid] = np.nextafter(deciding, np.array(np.inf, dtype=dtype)).astype(np.float64)
    return out


def calibrate_thresholds(
    scores: np.ndarray,
    risks: np.ndarray,
    alphas: Sequence[float] | np.ndarray,
    rule: Rule = "crc",
    delta: float | None = None,
) -> np.ndarray:
    """Return τ*(α) for every α, float64 [n_alpha] (each value exact in the scores' dtype; ±inf allowed).

    One sort of the risky scores, O(N log N), serves the whole α vector. rule="ltt" needs `delta`, the
    level for this one score (calibrate_table divides the table's δ over the λ grid).
    """
    scores, risks = _check_pair(scores, risks)
    k = allowed_risky_count(len(scores), alphas, rule, delta)
    # eq. (tau_star): τ* = inf{τ : (d_τ + 1)/(N + 1) ≤ α} = next score above v_{k+1}
    return _threshold_from_risky(np.sort(scores[risks])[::-1], k, scores.dtype)


def allowed_risky_count(n_calib: int, alphas: Sequence[float] | np.ndarray, rule: Rule = "crc",
                        delta: float | None = None) -> np.ndarray:
    """Per α, how many risky calibration points a calibrated rule may accept among N = n_calib (−1: none
    qualifies) — all a rule's threshold depends on besides the risky scores themselves."""
    alpha = _alphas(alphas)
    procedure = rule_spec(rule).procedure
    if procedure not in ("crc", "empirical", "ltt"):
        raise InvalidValueError(f"rule '{rule}' is not calibrated from risks; calibrated rules: {', '.join(RULES)}")
    if procedure == "ltt":
        if delta is None:
            raise InvalidValueError("rule 'ltt' needs δ (the probability that some threshold misses α), e.g. delta=0.1")
        return ltt_max_risky_count(n_calib, alpha, float(delta))
    if delta is not None:
        raise InvalidValueError(f"δ applies to the ltt rules only; rule '{rule}' takes no δ")
    return max_risky_count(n_calib, alpha, procedure)


def thresholds_from_risky(risky_desc: np.ndarray, k: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """τ per allowed count k (allowed_risky_count) from the calibration set's risky scores sorted descending:
    what calibrate_thresholds returns, for callers that re-calibrate many times on one N (re-splits)."""
    return _threshold_from_risky(risky_desc, np.asarray(k), np.dtype(dtype))


def calibrate_threshold(scores: np.ndarray, risks: np.ndarray, alpha: float) -> float:
    """Return the CRC threshold τ*(λ; α) = inf{τ : (d_τ + 1)/(N + 1) ≤ α} for one λ's calibration set.

    scores: [N] gate scores (float32 usually); risks: [N] bool r_i. Accept iff `scores >= tau` in the
    scores' dtype (see the module docstring). −inf: every point can be accepted; +inf: α < 1/(N + 1).
    """
    return float(calibrate_thresholds(scores, risks, [alpha], rule="crc")[0])


def empirical_threshold(scores: np.ndarray, risks: np.ndarray, alpha: float) -> float:
    """Return the uncorrected threshold inf{τ : d_τ/N ≤ α} (the 'empirical (marginal)' ablation rule)."""
    return float(calibrate_thresholds(scores, risks, [alpha], rule="empirical")[0])


def ltt_threshold(scores: np.ndarray, risks: np.ndarray, alpha: float, delta: float) -> float:
    """Return the Learn-then-Test threshold for one score: the least τ certified by fixed-sequence testing.

    With probability ≥ 1 − δ over an i.i.d. calibration set, the returned τ (and every larger one) has
    risk E[r·1[s ≥ τ]] ≤ α. Exact: τ is the next score (in the scores' dtype) above v_{k+1} with
    k = max{k : P(Bin(N, α) ≤ k) ≤ δ}; +inf when even k = 0 is not certified ((1 − α)^N > δ).
    """
    return float(calibrate_thresholds(scores, risks, [alpha], rule="ltt", delta=delta)[0])


def fixed_threshold() -> float:
    """Return the uncalibrated threshold 0.5 (accept iff s ≥ 0.5) for every λ."""
    return FIXED_THRESHOLD


def rate_threshold(scores: np.ndarray, rate: float) -> float:
    """Return the smallest τ accepting at most ⌊f·N⌋ of `scores` (fixed local rate f; ties never push past f)."""
    scores = _scores_array(scores)
    if not 0.0 <= rate <= 1.0:
        raise InvalidValueError(f"a local rate must lie in [0, 1], got {rate}")
    # every point counts as 'risky', so the empirical rule caps the accepted count at ⌊f N⌋
    return float(calibrate_thresholds(scores, np.ones(len(scores), dtype=bool), [rate], rule="empirical")[0])


def accept(scores: np.ndarray, tau: float | np.ndarray) -> np.ndarray:
    """Return the local-acceptance mask 1[s ≥ τ] decided in exact arithmetic (bool [n]).

    Scores are widened to float64 (exact for float16/32) before the comparison, so the answer does not
    depend on how τ is typed; for a τ returned by this module it equals `scores >= tau` in the scores' dtype.
    τ is one threshold, or one per query ([n]: each query's Mondrian group threshold, GroupedThresholdTable.taus_for).
    """
    tau = float(tau) if np.ndim(tau) == 0 else np.asarray(tau, dtype=np.float64)
    # eq. (cr2_rule): accept locally (m0) iff s_φ(e(x), λ) ≥ τ*(λ; α)
    return np.asarray(scores).astype(np.float64, copy=False) >= tau


def false_acceptance_risk(scores: np.ndarray, risks: np.ndarray, tau: float) -> float:
    """Return the empirical marginal false-acceptance risk (1/N) Σ r_i·1[s_i ≥ τ]."""
    scores, risks = _check_pair(scores, risks)
    # eq. (rhat_tau): R̂(τ) = (1/N) Σ_i r_i 1[s_i ≥ τ]
    return float(np.mean(risks & accept(scores, tau)))


def ltt_delta_per_lam(delta: float, n_lam: int) -> float:
    """Return the level each λ's fixed-sequence test runs at: δ / n_lam (Bonferroni over the λ grid).

    Why Bonferroni and not something sharper: a λ's risk curve and the next λ's are neither ordered
    (the risk label r(λ) moves with λ in both directions across queries) nor independent (one
    calibration set serves every λ), so neither fixed-sequence testing across λ nor Šidák is valid
    in general; Bonferroni needs no assumption. On the default 28-point grid it costs little: the
    certified risky count k moves from the δ- to the δ/28-quantile of Bin(N, α).
    """
    return float(delta) / int(n_lam)


def min_n_calib(alpha: float, rule: Rule = "crc", delta_per_lam: float | None = None) -> int:
    """Return the fewest calibration queries with which `rule` can accept anything at α (whatever the data).

    Decided by the same functions that calibrate (k ≥ 0 accepts something), so a group is listed as too
    small exactly when its thresholds are +inf for lack of data.
    """
    rule = rule_spec(rule).procedure
    if rule == "empirical":
        return 1

    def certifies(n: int) -> bool:
        if rule == "ltt":
            return bool(ltt_max_risky_count(n, np.array([alpha]), float(delta_per_lam))[0] >= 0)  # type: ignore[arg-type]
        return bool(max_risky_count(n, np.array([alpha]), "crc")[0] >= 0)

    n = ltt_min_n_calib(alpha, float(delta_per_lam)) if rule == "ltt" else crc_min_n_calib(alpha)  # closed form
    while n > 1 and certifies(n - 1):  # then settle it with the calibrating functions themselves
        n -= 1
    while not certifies(n):
        n += 1
    return n


