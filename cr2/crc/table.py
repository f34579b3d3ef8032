"""The shipped artefact: ThresholdTable τ*(λ; α) over a λ × α grid, bound to the gate it calibrates.

calibrate_table builds one for any registered rule (crc, empirical, ltt, fixed, rate); to_records /
from_records are the tidy form the warehouse and the router bundle store (cr2.crc.table_from_records
reads pooled and Mondrian records alike).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from cr2.crc.registry import LAM_RTOL, RULE_REGISTRY, TABLE_RULES, Rule, rule_spec
from cr2.crc.rules import _scores_array, calibrate_thresholds, fixed_threshold, ltt_delta_per_lam, rate_threshold
from cr2.core.errors import (DataValidationError, FingerprintMismatchError, InvalidValueError,
                        UncalibratedOperatingPointError)

# ---------------------------------------------------------------- the shipped artifact
def grid_text(values: Sequence[float]) -> str:
    """Return a grid as text: every value when short, else "[first … last, n points]" (for error messages)."""
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


def _grid_index(symbol: str, option: str, grid: Sequence[float], x: float) -> int:
    """Index of x on a calibrated grid; UncalibratedOperatingPointError naming the grid and the fix when off-grid."""
    i = _find(grid, float(x))
    if i is None:
        raise UncalibratedOperatingPointError(
            f"{symbol}={x:g} is not on the calibrated grid {grid_text(grid)}; "
            f"run `cr2 calibrate --{option} {x:g}` or pick a grid value"
        )
    return i


def _sorted_unique(name: str, values: Iterable[float]) -> tuple[np.ndarray, tuple[float, ...]]:
    """Return (argsort order, sorted values); raises when two values coincide within LAM_RTOL."""
    arr = np.asarray(list(values), dtype=np.float64)
    if arr.ndim != 1 or len(arr) == 0:
        raise InvalidValueError(f"the {name} grid must be a non-empty list of numbers")
    order = np.argsort(arr, kind="stable")
    srt = arr[order]
    for a, b in zip(srt[:-1], srt[1:]):
        if abs(b - a) <= LAM_RTOL * max(abs(a), abs(b)):
            raise InvalidValueError(f"the {name} grid lists {a:g} twice (within relative tolerance {LAM_RTOL:g})")
    return order, tuple(float(v) for v in srt)


@dataclass(frozen=True, eq=False)
class ThresholdTable:
    """The calibrated thresholds τ*(λ; α) over a λ grid × α grid, bound to the gate they calibrate."""

    lams: tuple[float, ...]  # [n_lam] ascending cost weights λ
    alphas: tuple[float, ...]  # [n_alpha] ascending risk levels α
    taus: np.ndarray  # [n_lam, n_alpha] float64 τ*, each exact in score_dtype; ±inf allowed
    n_calib: int  # N, calibration queries per λ
    gate_fingerprint: str  # cr2.method.checkpoint.fingerprint of the gate whose scores were calibrated
    dist_id: str  # the channel-state distribution of the calibration set
    label_source: str  # where the correctness labels came from
    rule: str = "crc"  # crc | empirical | ltt (| fixed | rate: the ablation's uncalibrated rules)
    score_dtype: str = "float32"  # dtype the scores were calibrated in (compare in it)
    delta: float | None = None  # ltt: P(some λ of the grid has risk > α) ≤ δ, per α; None for the other rules
    group: str | None = None  # Mondrian: "attribute=value" of the calibration group (e.g. "benchmark=gpqa"); None: pooled

    def __post_init__(self) -> None:
        if self.rule not in TABLE_RULES:
            raise InvalidValueError(f"unknown calibration rule '{self.rule}'; available: {', '.join(TABLE_RULES)}")
        delta = _optional(self.delta)
        needs_delta = RULE_REGISTRY[self.rule].needs_delta
        if needs_delta and (delta is None or not 0.0 < float(delta) < 1.0):
            raise InvalidValueError(f"an '{self.rule}' threshold table needs δ ∈ (0, 1), got {self.delta!r}")
        if not needs_delta and delta is not None:
            raise InvalidValueError(f"δ applies to the ltt rules only; this table's rule is '{self.rule}'")
        object.__setattr__(self, "delta", None if delta is None else float(delta))
        object.__setattr__(self, "group", _optional(self.group))
        taus = np.array(self.taus, dtype=np.float64)
        if taus.shape != (len(self.lams), len(self.alphas)):
            raise InvalidValueError(
                f"ThresholdTable.taus has shape {taus.shape}, expected (n_lam, n_alpha) = ({len(self.lams)}, {len(self.alphas)})"
            )
        if np.isnan(taus).any():
            raise InvalidValueError("ThresholdTable.taus contains NaN")
        if list(self.lams) != sorted(self.lams) or list(self.alphas) != sorted(self.alphas):
            raise InvalidValueError("ThresholdTable.lams and .alphas must be ascending")
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
        return _grid_index("λ", "lam", self.lams, lam)

    def alpha_index(self, alpha: float) -> int:
        """Return the grid column of α; raises UncalibratedOperatingPointError naming the grid when it is off-grid."""
        return _grid_index("α", "alpha", self.alphas, alpha)

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
        if RULE_REGISTRY[self.rule].needs_delta or RULE_REGISTRY[other.rule].needs_delta:
            raise InvalidValueError(
                "LTT threshold tables cannot be merged: the family-wise correction (δ over the λ grid) covers only "
                "the λ they were calibrated with; recalibrate with every λ at once (`cr2 calibrate --rule ltt --lam …`)"
            )
        same = ("alphas", "n_calib", "gate_fingerprint", "dist_id", "label_source", "rule", "score_dtype", "group")
        for name in same:
            if getattr(self, name) != getattr(other, name):
                raise InvalidValueError(
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


def calibrated_lams(lams: Sequence[float] | np.ndarray, *, require_all: bool = False) -> np.ndarray:
    """The λ of `lams` that get a calibrated threshold (and gate scores): every λ > 0, in the given order.

    λ = 0 is not calibrated. It is the accuracy-only end of the sweep: the gate (FiLM on log λ) is defined for λ > 0
    only, and CR² defers every query there, exactly and whatever the rule (τ = +∞, risk 0 ≤ α; CR2Router adds that
    row). The rule lives here once; the calibrate task, the gate-score cache and CR2Router.calibrate all ask.
    A negative or NaN λ is an error, never a λ quietly skipped; with `require_all` (λ asked for by name, e.g.
    `cr2 calibrate --lam`) so is λ = 0.
    """
    lam_arr = np.asarray(lams, dtype=np.float64).reshape(-1)
    bad = lam_arr[~(lam_arr > 0)] if require_all else lam_arr[~(lam_arr >= 0)]
    if len(bad):
        raise InvalidValueError(f"λ must be > 0 (λ = 0 is not calibrated: CR² defers every query there), "
                                f"got {bad.tolist()}" if require_all else f"λ must be ≥ 0, got {bad.tolist()}")
    return lam_arr[lam_arr > 0]


def calibrate_table(
    scores: np.ndarray | Callable[[np.ndarray], np.ndarray],
    risks: np.ndarray | None,
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
    (ltt_delta_per_lam), so that for each α, P(some λ's threshold has risk > α) ≤ δ. The uncalibrated
    rules take no risks (None): "fixed" is τ = 0.5 everywhere, "rate" reads each α as a local rate f and
    takes the smallest τ accepting at most ⌊f·N⌋ of the scores (the ablation's comparison rows).
    """
    lam_order, lam_sorted = _sorted_unique("λ", lams)
    alpha_order, alpha_sorted = _sorted_unique("α", alphas)
    lam_arr = np.asarray(lams, dtype=np.float64)
    score_mat = scores(lam_arr) if callable(scores) else scores
    score_mat = _scores_array(score_mat)
    spec = rule_spec(rule)
    risk_mat = np.asarray(risks) if spec.calibrated or risks is not None else np.zeros(score_mat.shape, dtype=bool)
    expected = (score_mat.shape[0], len(lam_arr))
    if score_mat.shape != expected or risk_mat.shape != expected:
        raise InvalidValueError(
            f"scores {score_mat.shape} and risks {risk_mat.shape} must both be [n_calib, n_lam] = [n, {len(lam_arr)}]"
        )
    ltt = spec.needs_delta
    if ltt:
        if delta is None or not 0.0 < float(delta) < 1.0:
            raise InvalidValueError(f"rule '{rule}' needs δ ∈ (0, 1), got {delta!r}; e.g. `--delta 0.1`")
        per_lam = ltt_delta_per_lam(float(delta), len(lam_arr))
    elif delta is not None:
        raise InvalidValueError(f"δ applies to the ltt rules only; rule '{rule}' takes no δ")
    alpha_vals = np.asarray(alpha_sorted)
    if spec.procedure == "fixed":
        taus = np.full((len(lam_sorted), len(alpha_sorted)), fixed_threshold())
    elif spec.procedure == "rate":  # α read as the local rate f
        taus = np.array([[rate_threshold(score_mat[:, j], f) for f in alpha_sorted] for j in lam_order])
    else:
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


