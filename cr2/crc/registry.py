"""The registry of threshold rules and of the risk each one controls — the one list every caller reads.

config `calibration.rule`, `cr2 calibrate --rule`, the `thresholds` table, CR2Router.calibrate and the
device export all name a RULE_REGISTRY key; docs/guarantees.md says which rule to choose.
"""
from __future__ import annotations

from dataclasses import dataclass

from cr2.core.errors import InvalidValueError

FIXED_THRESHOLD = 0.5  # the uncalibrated baseline rule: accept iff s ≥ 0.5
LAM_RTOL = 1e-9  # relative tolerance when matching a requested λ (or α) to the calibrated grid


# ---------------------------------------------------------------- the registry: rules and the risk each controls
@dataclass(frozen=True)
class RiskSpec:
    """A 0/1 risk label r_i(λ) a calibration rule can control: R(τ) = E[r · 1[s ≥ τ]]."""

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
    """A registered threshold rule: how many risky calibration points it may accept (procedure) and which risk."""

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


RULE_REGISTRY: dict[str, RuleSpec] = {r.name: r for r in (
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
Rule = str  # a RULE_REGISTRY key
RULES = tuple(name for name, r in RULE_REGISTRY.items() if r.calibrated)  # what calibrate_table computes
TABLE_RULES = tuple(RULE_REGISTRY)  # what a ThresholdTable may hold


def rule_spec(rule: str) -> RuleSpec:
    """Return the registered rule; an unknown name is an error with a did-you-mean and the list."""
    if rule not in RULE_REGISTRY:
        from cr2.core.errors import did_you_mean

        raise did_you_mean("calibration rule", rule, list(RULE_REGISTRY))
    return RULE_REGISTRY[rule]


def rule_risk(rule: str) -> RiskSpec | None:
    """Return the risk a rule controls (None for the uncalibrated rules)."""
    spec = rule_spec(rule)
    return None if spec.risk is None else RISKS[spec.risk]


def rule_for(procedure: str, risk: str) -> str:
    """Return the registered rule with this procedure (crc | empirical | ltt) and risk, e.g. ("crc", "avoidable-error")."""
    for r in RULE_REGISTRY.values():
        if r.procedure == procedure and r.risk == risk:
            return r.name
    raise InvalidValueError(f"no registered rule controls '{risk}' with procedure '{procedure}'")

