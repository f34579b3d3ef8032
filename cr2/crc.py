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

Only numpy is imported here, so the calibration and evaluation path stays light.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Literal, Sequence

import numpy as np

from cr2.errors import DataValidationError, FingerprintMismatchError, InvalidValueError, UncalibratedOperatingPointError

FIXED_THRESHOLD = 0.5  # the uncalibrated baseline rule: accept iff s ≥ 0.5
LAM_RTOL = 1e-9  # relative tolerance when matching a requested λ (or α) to the calibrated grid
Rule = Literal["crc", "empirical"]


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
    scores: np.ndarray, risks: np.ndarray, alphas: Sequence[float] | np.ndarray, rule: Rule = "crc"
) -> np.ndarray:
    """Return τ*(α) for every α, float64 [n_alpha] (each value exact in the scores' dtype; ±inf allowed).

    One sort of the risky scores, O(N log N), serves the whole α vector.
    """
    scores, risks = _check_pair(scores, risks)
    alpha = _alphas(alphas)
    risky_desc = np.sort(scores[risks])[::-1]
    k = max_risky_count(len(scores), alpha, rule)
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
    rule: str = "crc"  # crc | empirical
    score_dtype: str = "float32"  # dtype the scores were calibrated in (compare in it)

    def __post_init__(self) -> None:
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
        same = ("alphas", "n_calib", "gate_fingerprint", "dist_id", "label_source", "rule", "score_dtype")
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
        meta = {k: records[0].get(k) for k in meta_keys}
        for rec in records:
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
        return cls(lams=lams, alphas=alphas, taus=taus, n_calib=int(meta["n_calib"]), **{k: str(meta[k]) for k in meta_keys[1:]})


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
) -> ThresholdTable:
    """Return the ThresholdTable τ*(λ; α) calibrated column by column, one λ at a time (pointwise in λ).

    scores: [n, n_lam] gate scores on the calibration set (column j at lams[j]), or a function
    lams → [n, n_lam]; risks: [n, n_lam] bool r_i(λ_j). The table is stored with λ and α ascending.
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
    alpha_vals = np.asarray(alpha_sorted)
    taus = np.stack([calibrate_thresholds(score_mat[:, j], risk_mat[:, j], alpha_vals, rule) for j in lam_order])
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
    )
