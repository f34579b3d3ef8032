"""Mondrian (group-conditional) thresholds: one ThresholdTable per value of a query attribute.

calibrate_group_tables calibrates each group on its own calibration queries; table_from_records is the
one loader of stored threshold records, pooled or Mondrian.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Sequence

import numpy as np

from cr2.crc.registry import Rule, rule_spec
from cr2.crc.rules import _scores_array, ltt_delta_per_lam, min_n_calib
from cr2.crc.table import ThresholdTable, _optional, _sorted_unique, calibrate_table
from cr2.core.errors import DataValidationError, GroupTooSmallError, InvalidValueError, UncalibratedOperatingPointError

# ---------------------------------------------------------------- Mondrian (group-conditional) calibration
SMALL_GROUP_POLICIES = ("error", "defer")


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
            raise InvalidValueError("a Mondrian threshold table needs at least one group")
        first = next(iter(self.tables.values()))
        for name, t in self.tables.items():
            for attr in ("lams", "alphas", "gate_fingerprint", "dist_id", "label_source", "rule", "delta", "score_dtype"):
                if getattr(t, attr) != getattr(first, attr):
                    raise InvalidValueError(f"group '{name}' has another {attr} than the others; calibrate all groups at once")
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
    if rule_spec(rule).procedure not in ("crc", "ltt"):
        raise InvalidValueError(f"Mondrian thresholds are calibrated with a crc or ltt rule, not '{rule}'")
    if small_group not in SMALL_GROUP_POLICIES:
        raise InvalidValueError(f"small_group must be one of {SMALL_GROUP_POLICIES}, got '{small_group}'")
    scores = _scores_array(scores)
    groups = np.asarray(groups).astype(str)
    if groups.shape != (scores.shape[0],):
        raise InvalidValueError(f"groups {groups.shape} must be one value per calibration query: [{scores.shape[0]}]")
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
