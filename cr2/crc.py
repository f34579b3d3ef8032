"""Per-λ conformal risk control of the local-acceptance threshold, and the rules it is compared with (paper §VI-F).

Risk: r_i(λ) = 1[m_full*(x_i, ξ_i; λ) ≠ m0]; loss ℓ_i(τ) = r_i·1[s_i ≥ τ]; d_τ = #{i : s_i ≥ τ, r_i = 1}.
CRC picks τ*(λ; α) = inf{τ : (d_τ + 1)/(N + 1) ≤ α} and accepts locally iff s ≥ τ*.

How thresholds are represented and compared
-------------------------------------------
d_τ only changes at the calibration scores, and {τ : d_τ ≤ k} = (v_{k+1}, ∞) where v_{k+1} is the
(k+1)-th largest risky score: the feasible set is open at its left end, so its infimum is not
attained. A threshold returned here is therefore the smallest number of the scores' own dtype that is
strictly above v_{k+1} (np.nextafter in that dtype). It is exactly representable in that dtype (and in
float64), so `scores >= tau` gives the same answer whether tau is a Python float, np.float32 or np.float64,
as long as `scores` keep the dtype they were calibrated in. Callers must compute the deployment scores
in the calibration dtype (cr2.gate returns float32) and compare with `>=`, e.g. via `accept()`.
±inf are the two degenerate thresholds: −inf accepts everything, +inf accepts nothing.

Rules (each one function below; docs/guarantees.md says which to choose)
------------------------------------------------------------------------
- crc        E[risk] ≤ α for each λ separately, in expectation over calibration sets (paper eq. crc_tau).
- empirical  d_τ/N ≤ α without the +1 correction (an ablation; no guarantee).
- ltt        Learn-then-Test (Angelopoulos et al., 2021): P(every λ of the grid has risk ≤ α) ≥ 1 − δ, per α.
- Mondrian   any of the above within each group (benchmark by default): calibrate_group_tables().
Every rule ends in the same form — "accept at most k risky calibration points" — so every threshold is
the same exact next-score-above v_{k+1}; the rules differ only in k (max_risky_count / ltt_max_risky_count).

Only numpy is imported here, so the calibration and evaluation path stays light.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence

import numpy as np

from cr2.errors import (
    DataValidationError,
    FingerprintMismatchError,
    InvalidValueError,
    GroupTooSmallError,
    UncalibratedOperatingPointError,
)

FIXED_THRESHOLD = 0.5  # the uncalibrated baseline rule: accept iff s ≥ 0.5
LAM_RTOL = 1e-9  # relative tolerance when matching a requested λ (or α) to the calibrated grid


# ---------------------------------------------------------------- the catalogue: rules and the risk each controls
@dataclass(frozen=True)
class RiskSpec:
    """A 0/1 risk label r_i(λ) a calibration rule can control: R(τ) = E[r · 1[s ≥ τ]] (issue 26)."""

    name: str  # the stored / exported name, e.g. "oracle-disagreement"
    display: str  # the words every output uses, e.g. "oracle disagreement on real labels"
    definition: str  # what r_i = 1 means, one sentence
    needs_labels: bool  # computed from the calibration queries' real correctness y_m (not from the teacher)


RISKS: dict[str, RiskSpec] = {r.name: r for r in (
    RiskSpec("teacher-disagreement", "teacher disagreement",
             "the frozen teacher's full-information choice m_full* = argmax_m p_m − λ·ĉ_m is an edge model "
             "(paper eq. disagree_label); a promise about agreement with a learned selector, not about answers", False),
    RiskSpec("oracle-disagreement", "oracle disagreement on real labels",
             "the real-label choice argmax_m y_m − λ·ĉ_m (real correctness, the same decision cost as the teacher's "
             "reference; ties → cheaper, then the device) is an edge model", True),
    RiskSpec("avoidable-error", "avoidable error",
             "the device model answers wrongly while some edge model answers correctly (independent of λ)", True),
)}


@dataclass(frozen=True)
class RuleSpec:
    """A catalogued threshold rule: how many risky calibration points it may accept (procedure) and which risk."""

    name: str  # what config `calibration.rule`, `cr2 calibrate --rule` and the `thresholds` table say
    procedure: str  # crc | empirical | ltt (the count k of accepted risky points) | fixed | rate (uncalibrated)
    risk: str | None  # a RISKS key: the risk label the rule is calibrated on; None: no risk is controlled
    promise: str  # one line for tables and help text

    @property
    def needs_delta(self) -> bool:
        return self.procedure == "ltt"

    @property
    def calibrated(self) -> bool:
        return self.procedure in ("crc", "empirical", "ltt")


RULE_CATALOGUE: dict[str, RuleSpec] = {r.name: r for r in (
    RuleSpec("crc", "crc", "teacher-disagreement", "E[teacher disagreement] ≤ α per λ (paper)"),
    RuleSpec("empirical", "empirical", "teacher-disagreement", "teacher disagreement d/N ≤ α on val (ablation; no guarantee)"),
    RuleSpec("ltt", "ltt", "teacher-disagreement", "P(every λ has teacher disagreement ≤ α) ≥ 1 − δ"),
    RuleSpec("crc-oracle", "crc", "oracle-disagreement", "E[oracle disagreement on real labels] ≤ α per λ"),
    RuleSpec("crc-avoidable", "crc", "avoidable-error", "E[avoidable error] ≤ α per λ"),
    RuleSpec("ltt-oracle", "ltt", "oracle-disagreement", "P(every λ has oracle disagreement on real labels ≤ α) ≥ 1 − δ"),
    RuleSpec("ltt-avoidable", "ltt", "avoidable-error", "P(every λ has avoidable error ≤ α) ≥ 1 − δ"),
    # the uncalibrated comparison rules of the ablation (built by cr2.routers.cr2_router): τ = 0.5, α read as a rate f
    RuleSpec("fixed", "fixed", None, "τ = 0.5 (uncalibrated; no guarantee)"),
    RuleSpec("rate", "rate", None, "a fixed local rate f on val (uncalibrated; no guarantee)"),
)}
Rule = str  # a RULE_CATALOGUE key
RULES = tuple(name for name, r in RULE_CATALOGUE.items() if r.calibrated)  # what calibrate_table computes
TABLE_RULES = tuple(RULE_CATALOGUE)  # what a ThresholdTable may hold


def rule_spec(rule: str) -> RuleSpec:
    """Return the catalogued rule; an unknown name is an error with a did-you-mean and the list."""
    if rule not in RULE_CATALOGUE:
        from cr2.errors import did_you_mean

        raise did_you_mean("calibration rule", rule, list(RULE_CATALOGUE))
    return RULE_CATALOGUE[rule]


def rule_risk(rule: str) -> RiskSpec | None:
    """Return the risk a rule controls (None for the uncalibrated rules)."""
    spec = rule_spec(rule)
    return None if spec.risk is None else RISKS[spec.risk]


def rule_for(procedure: str, risk: str) -> str:
    """Return the catalogued rule with this procedure (crc | empirical | ltt) and risk, e.g. ("crc", "avoidable-error")."""
    for r in RULE_CATALOGUE.values():
        if r.procedure == procedure and r.risk == risk:
            return r.name
    raise InvalidValueError(f"no catalogued rule controls '{risk}' with procedure '{procedure}'")


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
        raise DataValidationError(f"scores {scores.shape} and risks {risks.shape} must be two [N] vectors of one length")
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
        raise DataValidationError(f"α must be finite and ≥ 0, got {alpha!r}")
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
        raise DataValidationError(f"binomial_cdf needs n ≥ 0 and p ∈ [0, 1], got n={n}, p={p}")
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
        raise DataValidationError(f"the Hoeffding–Bentkus p-value needs α ∈ (0, 1), got {alpha}")
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
        raise DataValidationError(f"LTT needs δ ∈ (0, 1), got {delta}")
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
    alpha = _alphas(alphas)
    risky_desc = np.sort(scores[risks])[::-1]
    procedure = rule_spec(rule).procedure
    if procedure not in ("crc", "empirical", "ltt"):
        raise DataValidationError(f"rule '{rule}' is not calibrated from risks; calibrated rules: {', '.join(RULES)}")
    if procedure == "ltt":
        if delta is None:
            raise DataValidationError("rule 'ltt' needs δ (the probability that some threshold misses α), e.g. delta=0.1")
        k = ltt_max_risky_count(len(scores), alpha, float(delta))
    else:
        if delta is not None:
            raise DataValidationError(f"δ applies to the ltt rules only; rule '{rule}' takes no δ")
        k = max_risky_count(len(scores), alpha, procedure)
    # eq. (tau_star): τ* = inf{τ : (d_τ + 1)/(N + 1) ≤ α} = next score above v_{k+1}
    return _threshold_from_risky(risky_desc, k, scores.dtype)


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
        raise DataValidationError(f"a local rate must lie in [0, 1], got {rate}")
    # every point counts as 'risky', so the empirical rule caps the accepted count at ⌊f N⌋
    return float(calibrate_thresholds(scores, np.ones(len(scores), dtype=bool), [rate], rule="empirical")[0])


def accept(scores: np.ndarray, tau: float) -> np.ndarray:
    """Return the local-acceptance mask 1[s ≥ τ] decided in exact arithmetic (bool [n]).

    Scores are widened to float64 (exact for float16/32) before the comparison, so the answer does not
    depend on how τ is typed; for a τ returned by this module it equals `scores >= tau` in the scores' dtype.
    """
    # eq. (cr2_rule): accept locally (m0) iff s_φ(e(x), λ) ≥ τ*(λ; α)
    return np.asarray(scores).astype(np.float64, copy=False) >= float(tau)


def false_acceptance_risk(scores: np.ndarray, risks: np.ndarray, tau: float) -> float:
    """Return the empirical marginal false-acceptance risk (1/N) Σ r_i·1[s_i ≥ τ]."""
    scores, risks = _check_pair(scores, risks)
    # eq. (rhat_tau): R̂(τ) = (1/N) Σ_i r_i 1[s_i ≥ τ]
    return float(np.mean(risks & accept(scores, tau)))


# ---------------------------------------------------------------- the shipped artifact
def _grid_text(values: Sequence[float]) -> str:
    if len(values) <= 6:
        return "[" + ", ".join(f"{v:g}" for v in values) + "]"
    return f"[{values[0]:g} … {values[-1]:g}, {len(values)} points]"


def _optional(value: Any) -> Any:
    """Return None for a missing value (None, '', NaN or pandas' NA read back from the warehouse), else the value."""
    if value is None or (isinstance(value, str) and value == ""):
        return None
    try:
        if value != value:  # NaN and NA
            return None
    except (TypeError, ValueError):  # pandas NA refuses comparison
        return None
    return value


def _find(values: Sequence[float], x: float) -> int | None:
    for i, v in enumerate(values):
        if abs(v - x) <= LAM_RTOL * max(abs(v), abs(x)):
            return i
    return None


def _sorted_unique(name: str, values: Iterable[float]) -> tuple[np.ndarray, tuple[float, ...]]:
    """Return (argsort order, sorted values); raises when two values coincide within LAM_RTOL."""
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.ndim != 1 or len(arr) == 0:
        raise DataValidationError(f"the {name} grid must be a non-empty list of numbers")
    order = np.argsort(arr, kind="stable")
    srt = arr[order]
    for a, b in zip(srt[:-1], srt[1:]):
        if abs(b - a) <= LAM_RTOL * max(abs(a), abs(b)):
            raise DataValidationError(f"the {name} grid lists {a:g} twice (within relative tolerance {LAM_RTOL:g})")
    return order, tuple(float(v) for v in srt)


@dataclass(frozen=True, eq=False)
class ThresholdTable:
    """The calibrated thresholds τ*(λ; α) over a λ grid × α grid, bound to the gate they calibrate."""

    lams: tuple[float, ...]  # [n_lam] ascending cost weights λ
    alphas: tuple[float, ...]  # [n_alpha] ascending risk levels α
    taus: np.ndarray  # [n_lam, n_alpha] float64 τ*, each exact in score_dtype; ±inf allowed
    n_calib: int  # N, calibration queries per λ
    gate_fingerprint: str  # cr2.checkpoint.fingerprint of the gate whose scores were calibrated
    dist_id: str  # the channel-state distribution of the calibration set
    label_source: str  # where the correctness labels came from
    rule: str = "crc"  # crc | empirical | ltt (| fixed | rate: the ablation's uncalibrated rules)
    score_dtype: str = "float32"  # dtype the scores were calibrated in (compare in it)
    delta: float | None = None  # ltt: P(some λ of the grid has risk > α) ≤ δ, per α; None for the other rules
    group: str | None = None  # Mondrian: "attribute=value" of the calibration group (e.g. "benchmark=gpqa"); None: pooled

    def __post_init__(self) -> None:
        if self.rule not in TABLE_RULES:
            raise DataValidationError(f"unknown calibration rule '{self.rule}'; available: {', '.join(TABLE_RULES)}")
        delta = _optional(self.delta)
        needs_delta = RULE_CATALOGUE[self.rule].needs_delta
        if needs_delta and (delta is None or not 0.0 < float(delta) < 1.0):
            raise DataValidationError(f"an '{self.rule}' threshold table needs δ ∈ (0, 1), got {self.delta!r}")
        if not needs_delta and delta is not None:
            raise DataValidationError(f"δ applies to the ltt rules only; this table's rule is '{self.rule}'")
        object.__setattr__(self, "delta", None if delta is None else float(delta))
        object.__setattr__(self, "group", _optional(self.group))
        taus = np.array(self.taus, dtype=np.float64)
        if taus.shape != (len(self.lams), len(self.alphas)):
            raise DataValidationError(
                f"ThresholdTable.taus has shape {taus.shape}, expected (n_lam, n_alpha) = ({len(self.lams)}, {len(self.alphas)})"
            )
        if np.isnan(taus).any():
            raise DataValidationError("ThresholdTable.taus contains NaN")
        if list(self.lams) != sorted(self.lams) or list(self.alphas) != sorted(self.alphas):
            raise DataValidationError("ThresholdTable.lams and .alphas must be ascending")
        taus.setflags(write=False)
        object.__setattr__(self, "lams", tuple(float(v) for v in self.lams))
        object.__setattr__(self, "alphas", tuple(float(v) for v in self.alphas))
        object.__setattr__(self, "taus", taus)

    @property
    def scored_lams(self) -> tuple[float, ...]:
        """The λ of the grid where the gate is scored: every λ > 0 (λ = 0 is CR²'s defer-everything row, τ = +∞)."""
        return tuple(v for v in self.lams if v > 0)

    # ------------------------------------------------------------ lookup
    def has_lam(self, lam: float) -> bool:
        """Return whether λ is on the calibrated grid (relative tolerance 1e-9)."""
        return _find(self.lams, float(lam)) is not None

    def lam_index(self, lam: float) -> int:
        """Return the grid row of λ; raises UncalibratedOperatingPointError naming the grid when it is off-grid."""
        i = _find(self.lams, float(lam))
        if i is None:
            raise UncalibratedOperatingPointError(
                f"λ={lam:g} is not on the calibrated grid {_grid_text(self.lams)}; "
                f"run `cr2 calibrate --lam {lam:g}` or pick a grid value"
            )
        return i

    def alpha_index(self, alpha: float) -> int:
        """Return the grid column of α; raises UncalibratedOperatingPointError naming the grid when it is off-grid."""
        j = _find(self.alphas, float(alpha))
        if j is None:
            raise UncalibratedOperatingPointError(
                f"α={alpha:g} is not on the calibrated grid {_grid_text(self.alphas)}; "
                f"run `cr2 calibrate --alpha {alpha:g}` or pick a grid value"
            )
        return j

    def check_fingerprint(self, gate_fingerprint: str) -> None:
        """Raise FingerprintMismatchError unless the table was calibrated for this gate."""
        if gate_fingerprint != self.gate_fingerprint:
            raise FingerprintMismatchError(
                f"this threshold table was calibrated for gate {self.gate_fingerprint}, but the gate in use is "
                f"{gate_fingerprint}; recalibrate (`cr2 calibrate`) for this gate or load the gate the table was made for"
            )

    def tau(self, lam: float, alpha: float, gate_fingerprint: str) -> float:
        """Return τ*(λ; α) for the gate with this fingerprint (exact in score_dtype; accept iff s ≥ τ*)."""
        self.check_fingerprint(gate_fingerprint)
        return float(self.taus[self.lam_index(lam), self.alpha_index(alpha)])

    # ------------------------------------------------------------ composition and persistence
    def merge(self, other: "ThresholdTable") -> "ThresholdTable":
        """Return a table with the λ rows of both (same α grid, gate, calibration set); `other` wins on shared λ."""
        if RULE_CATALOGUE[self.rule].needs_delta or RULE_CATALOGUE[other.rule].needs_delta:
            raise DataValidationError(
                "LTT threshold tables cannot be merged: the family-wise correction (δ over the λ grid) covers only "
                "the λ they were calibrated with; recalibrate with every λ at once (`cr2 calibrate --rule ltt --lam …`)"
            )
        same = ("alphas", "n_calib", "gate_fingerprint", "dist_id", "label_source", "rule", "score_dtype", "group")
        for name in same:
            if getattr(self, name) != getattr(other, name):
                raise DataValidationError(
                    f"cannot merge threshold tables with different {name}: {getattr(self, name)!r} vs {getattr(other, name)!r}"
                )
        rows = {lam: self.taus[i] for i, lam in enumerate(self.lams) if not other.has_lam(lam)}
        rows.update({lam: other.taus[i] for i, lam in enumerate(other.lams)})
        lams = sorted(rows)
        return ThresholdTable(
            lams=tuple(lams),
            alphas=self.alphas,
            taus=np.stack([rows[lam] for lam in lams]),
            n_calib=self.n_calib,
            gate_fingerprint=self.gate_fingerprint,
            dist_id=self.dist_id,
            label_source=self.label_source,
            rule=self.rule,
            score_dtype=self.score_dtype,
            group=self.group,
        )

    def to_records(self) -> list[dict[str, Any]]:
        """Return one dict per (λ, α): lam, alpha, tau and the table's metadata (tidy, for the warehouse)."""
        meta = {
            "n_calib": self.n_calib,
            "gate_fingerprint": self.gate_fingerprint,
            "dist_id": self.dist_id,
            "label_source": self.label_source,
            "rule": self.rule,
            "score_dtype": self.score_dtype,
            "delta": self.delta,
            "group": self.group,
        }
        return [
            {"lam": lam, "alpha": alpha, "tau": float(self.taus[i, j]), **meta}
            for i, lam in enumerate(self.lams)
            for j, alpha in enumerate(self.alphas)
        ]

    @classmethod
    def from_records(cls, records: Sequence[dict[str, Any]]) -> "ThresholdTable":
        """Return the table written by to_records(); raises DataValidationError on a gap or mixed metadata."""
        records = list(records)
        if not records:
            raise DataValidationError("no threshold records to build a table from; run `cr2 calibrate` first")
        meta_keys = ("n_calib", "gate_fingerprint", "dist_id", "label_source", "rule", "score_dtype")
        opt_keys = ("delta", "group")  # absent in records of schema version 1: crc/empirical, pooled
        meta = {k: records[0].get(k) for k in meta_keys}
        opt = {k: _optional(records[0].get(k)) for k in opt_keys}
        for rec in records:
            for k in opt_keys:
                if _optional(rec.get(k)) != opt[k]:
                    raise DataValidationError(
                        f"threshold records mix {k} values: {opt[k]!r} and {_optional(rec.get(k))!r}"
                        + ("; a Mondrian table has one group per value — load it with table_from_records()" if k == "group" else "")
                    )
            for k in meta_keys:
                if rec.get(k) != meta[k]:
                    raise DataValidationError(f"threshold records mix {k} values: {meta[k]!r} and {rec.get(k)!r}")
        _, lams = _sorted_unique("λ", {float(r["lam"]) for r in records})
        _, alphas = _sorted_unique("α", {float(r["alpha"]) for r in records})
        taus = np.full((len(lams), len(alphas)), np.nan)
        for rec in records:
            taus[lams.index(float(rec["lam"])), alphas.index(float(rec["alpha"]))] = float(rec["tau"])
        if np.isnan(taus).any():
            i, j = np.argwhere(np.isnan(taus))[0]
            raise DataValidationError(f"threshold records miss (λ={lams[i]:g}, α={alphas[j]:g}); the grid must be complete")
        return cls(lams=lams, alphas=alphas, taus=taus, n_calib=int(meta["n_calib"]), **{k: str(meta[k]) for k in meta_keys[1:]},
                   delta=None if opt["delta"] is None else float(opt["delta"]),
                   group=None if opt["group"] is None else str(opt["group"]))


def ltt_delta_per_lam(delta: float, n_lam: int) -> float:
    """Return the level each λ's fixed-sequence test runs at: δ / n_lam (Bonferroni over the λ grid).

    Why Bonferroni and not something sharper: a λ's risk curve and the next λ's are neither ordered
    (the risk label r(λ) moves with λ in both directions across queries) nor independent (one
    calibration set serves every λ), so neither fixed-sequence testing across λ nor Šidák is valid
    in general; Bonferroni needs no assumption. On the default 28-point grid it costs little: the
    certified risky count k moves from the δ- to the δ/28-quantile of Bin(N, α).
    """
    return float(delta) / int(n_lam)


def calibrate_table(
    scores: np.ndarray | Callable[[np.ndarray], np.ndarray],
    risks: np.ndarray,
    lams: Sequence[float] | np.ndarray,
    alphas: Sequence[float] | np.ndarray,
    *,
    gate_fingerprint: str,
    dist_id: str,
    label_source: str,
    rule: Rule = "crc",
    delta: float | None = None,
    group: str | None = None,
) -> ThresholdTable:
    """Return the ThresholdTable τ*(λ; α) calibrated column by column, one λ at a time.

    scores: [n, n_lam] gate scores on the calibration set (column j at lams[j]), or a function
    lams → [n, n_lam]; risks: [n, n_lam] bool r_i(λ_j). The table is stored with λ and α ascending.
    rule "crc"/"empirical" are pointwise in λ; rule "ltt" with δ tests every λ at δ/n_lam
    (ltt_delta_per_lam), so that for each α, P(some λ's threshold has risk > α) ≤ δ.
    """
    lam_order, lam_sorted = _sorted_unique("λ", lams)
    alpha_order, alpha_sorted = _sorted_unique("α", alphas)
    lam_arr = np.asarray(lams, dtype=np.float64)
    score_mat = scores(lam_arr) if callable(scores) else scores
    score_mat = _scores_array(score_mat)
    risk_mat = np.asarray(risks)
    expected = (score_mat.shape[0], len(lam_arr))
    if score_mat.shape != expected or risk_mat.shape != expected:
        raise DataValidationError(
            f"scores {score_mat.shape} and risks {risk_mat.shape} must both be [n_calib, n_lam] = [n, {len(lam_arr)}]"
        )
    ltt = rule_spec(rule).needs_delta
    if ltt:
        if delta is None or not 0.0 < float(delta) < 1.0:
            raise DataValidationError(f"rule '{rule}' needs δ ∈ (0, 1), got {delta!r}; e.g. `--delta 0.1`")
        per_lam = ltt_delta_per_lam(float(delta), len(lam_arr))
    elif delta is not None:
        raise DataValidationError(f"δ applies to the ltt rules only; rule '{rule}' takes no δ")
    alpha_vals = np.asarray(alpha_sorted)
    taus = np.stack([
        calibrate_thresholds(score_mat[:, j], risk_mat[:, j], alpha_vals, rule, per_lam if ltt else None)
        for j in lam_order
    ])
    return ThresholdTable(
        lams=lam_sorted,
        alphas=alpha_sorted,
        taus=taus,
        n_calib=int(score_mat.shape[0]),
        gate_fingerprint=gate_fingerprint,
        dist_id=dist_id,
        label_source=label_source,
        rule=rule,
        score_dtype=str(score_mat.dtype),
        delta=None if delta is None else float(delta),
        group=group,
    )


# ---------------------------------------------------------------- Mondrian (group-conditional) calibration
SMALL_GROUP_POLICIES = ("error", "defer")


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


@dataclass(frozen=True, eq=False)
class GroupedThresholdTable:
    """Mondrian thresholds: one ThresholdTable per value of a query attribute (the benchmark by default).

    Each group's table is calibrated on that group's calibration queries only, so its guarantee holds
    conditionally on the group: crc → E[risk | group] ≤ α per λ; ltt → P(some λ misses α within the
    group) ≤ δ, per group. `too_small` lists every (group, α, N_g, N_min) where the group has fewer
    calibration queries than the rule needs to accept anything; with small_group="defer" those cells
    hold τ = +inf (the group always defers at that α — valid, and visible here and in the warehouse).
    """

    group_by: str  # the query attribute, e.g. "benchmark"
    tables: dict  # group value → ThresholdTable (same λ/α grid, gate, rule)
    too_small: tuple = ()  # ((group value, α, N_g, N_min), …) cells that defer everything for lack of data

    def __post_init__(self) -> None:
        if not self.tables:
            raise DataValidationError("a Mondrian threshold table needs at least one group")
        first = next(iter(self.tables.values()))
        for name, t in self.tables.items():
            for attr in ("lams", "alphas", "gate_fingerprint", "dist_id", "label_source", "rule", "delta", "score_dtype"):
                if getattr(t, attr) != getattr(first, attr):
                    raise DataValidationError(f"group '{name}' has another {attr} than the others; calibrate all groups at once")
        object.__setattr__(self, "tables", dict(sorted(self.tables.items())))

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(self.tables)

    def __getattr__(self, name: str) -> Any:  # the shared grid and metadata (lams, alphas, rule, delta, …)
        if name == "n_calib":  # calibration queries over all groups
            return sum(t.n_calib for t in self.tables.values())
        if name in ("lams", "scored_lams", "alphas", "gate_fingerprint", "dist_id", "label_source", "rule", "delta",
                    "score_dtype"):
            return getattr(next(iter(self.tables.values())), name)
        raise AttributeError(name)

    def table(self, group: str) -> ThresholdTable:
        """Return the group's own table; raises UncalibratedOperatingPointError naming the calibrated groups."""
        if group not in self.tables:
            raise UncalibratedOperatingPointError(
                f"{self.group_by}='{group}' has no Mondrian thresholds; calibrated groups: {', '.join(self.groups)}. "
                f"Recalibrate with calibration data of that {self.group_by}, or use a pooled table (calibration.group: null)"
            )
        return self.tables[group]

    def check_fingerprint(self, gate_fingerprint: str) -> None:
        """Raise FingerprintMismatchError unless the tables were calibrated for this gate."""
        next(iter(self.tables.values())).check_fingerprint(gate_fingerprint)

    def tau(self, lam: float, alpha: float, gate_fingerprint: str, group: str | None = None) -> float:
        """Return the group's τ*(λ; α) for the gate with this fingerprint (accept iff s ≥ τ*)."""
        if group is None:
            raise UncalibratedOperatingPointError(
                f"these thresholds are per {self.group_by} (Mondrian); a threshold needs the query's {self.group_by} "
                f"(one of {', '.join(self.groups)}) — use taus_for(groups, …) for a batch, or calibrate a pooled table "
                "(calibration.group: null) for code that routes with one τ per (λ, α)"
            )
        return self.table(group).tau(lam, alpha, gate_fingerprint)

    def taus_for(self, groups: np.ndarray, lam: float, alpha: float, gate_fingerprint: str) -> np.ndarray:
        """Return each query's own group threshold τ*_g(λ; α), float64 [n] (accept iff s ≥ τ, element-wise)."""
        groups = np.asarray(groups).astype(str)
        out = np.empty(len(groups), dtype=np.float64)
        for g in np.unique(groups):
            out[groups == g] = self.tau(lam, alpha, gate_fingerprint, str(g))
        return out

    def to_records(self) -> list[dict[str, Any]]:
        """Return the records of every group (column `group` = "attribute=value")."""
        return [rec for t in self.tables.values() for rec in t.to_records()]


def group_key(group_by: str, value: str) -> str:
    """Return the stored group label "attribute=value" (e.g. "benchmark=gpqa")."""
    return f"{group_by}={value}"


def table_from_records(records: Sequence[dict[str, Any]]) -> ThresholdTable | GroupedThresholdTable:
    """Return a ThresholdTable, or a GroupedThresholdTable when the records carry Mondrian groups."""
    records = list(records)
    keys = {_optional(r.get("group")) for r in records}
    if keys == {None}:
        return ThresholdTable.from_records(records)
    if None in keys:
        raise DataValidationError("threshold records mix pooled (group NULL) and Mondrian rows; one version is one kind")
    by: dict[str, list] = {}
    for r in records:
        by.setdefault(str(r["group"]), []).append(r)
    attrs = {k.split("=", 1)[0] for k in by}
    if len(attrs) != 1 or any("=" not in k for k in by):
        raise DataValidationError(f"Mondrian threshold records must share one 'attribute=value' group key, got {sorted(by)}")
    tables = {k.split("=", 1)[1]: ThresholdTable.from_records(v) for k, v in by.items()}
    too_small = tuple(
        (g, a, t.n_calib, min_n_calib(a, t.rule, None if t.delta is None else ltt_delta_per_lam(t.delta, len(t.lams))))
        for g, t in tables.items() for a in t.alphas
        if t.n_calib < min_n_calib(a, t.rule, None if t.delta is None else ltt_delta_per_lam(t.delta, len(t.lams)))
    )
    return GroupedThresholdTable(group_by=attrs.pop(), tables=tables, too_small=too_small)


def calibrate_group_tables(
    scores: np.ndarray,
    risks: np.ndarray,
    groups: np.ndarray,
    lams: Sequence[float] | np.ndarray,
    alphas: Sequence[float] | np.ndarray,
    *,
    group_by: str = "benchmark",
    gate_fingerprint: str,
    dist_id: str,
    label_source: str,
    rule: Rule = "crc",
    delta: float | None = None,
    small_group: Literal["error", "defer"] = "error",
) -> GroupedThresholdTable:
    """Return Mondrian thresholds: calibrate_table on each group's calibration queries alone.

    groups: [n] the attribute value of every calibration query. A group smaller than the rule needs at
    some α (CRC: N_g < 1/α − 1; LTT: (1 − α)^N_g > δ/n_lam) raises GroupTooSmallError naming the group,
    its size and the size it needs (small_group="error", the default), or keeps τ = +inf there — the
    group always defers at that α — and lists the cell in `too_small` (small_group="defer"). A group is
    never silently given a pooled threshold: that would not carry the group's guarantee.
    """
    if small_group not in SMALL_GROUP_POLICIES:
        raise DataValidationError(f"small_group must be one of {SMALL_GROUP_POLICIES}, got '{small_group}'")
    scores = _scores_array(scores)
    groups = np.asarray(groups).astype(str)
    if groups.shape != (scores.shape[0],):
        raise DataValidationError(f"groups {groups.shape} must be one value per calibration query: [{scores.shape[0]}]")
    _, alpha_sorted = _sorted_unique("α", alphas)
    n_lam = len(np.atleast_1d(np.asarray(lams)))
    per_lam = ltt_delta_per_lam(float(delta), n_lam) if rule_spec(rule).needs_delta and delta is not None else None
    tables, too_small = {}, []
    for value in sorted(set(groups.tolist())):
        rows = groups == value
        n_g = int(rows.sum())
        for a in alpha_sorted:
            need = min_n_calib(a, rule, per_lam)
            if n_g < need:
                too_small.append((value, a, n_g, need))
        tables[value] = calibrate_table(scores[rows], np.asarray(risks)[rows], lams, alpha_sorted,
                                        gate_fingerprint=gate_fingerprint, dist_id=dist_id, label_source=label_source,
                                        rule=rule, delta=delta, group=group_key(group_by, value))
    if too_small and small_group == "error":
        cells = "; ".join(f"{group_by}='{g}' has N={n} < {need} needed at α={a:g}" for g, a, n, need in too_small)
        raise GroupTooSmallError(
            f"Mondrian calibration ({rule}{'' if delta is None else f', δ={delta:g}'}): {cells}. Add calibration data for "
            f"these groups, drop the α values they cannot reach, or set calibration.small_group: defer (those groups "
            f"then always defer at those α)"
        )
    return GroupedThresholdTable(group_by=group_by, tables=tables, too_small=tuple(too_small))
