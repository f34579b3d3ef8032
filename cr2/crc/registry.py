"""The registry of threshold rules and of the risk each one controls — the one list every caller reads.

config `calibration.rule`, `cr2 calibrate --rule`, the `thresholds` table, CR2Router.calibrate and the
device export all name a RULE_REGISTRY key; docs/guarantees.md says which rule to choose. A risk is one RISKS entry:
its label function, the metrics it is reported under and its words; cr2.method.utility.risk_label, the guarantee
study's metrics, the evaluation's test metrics and the report read it from there.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

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
    # the label function as module:function, imported when a label is computed: the functions are the method's
    # (cr2.method.utility), a layer above this numpy-only package, as a router's class is named in its catalogue
    label: str
    inputs: tuple[str, ...]  # its positional arguments, of proba | decision_cost | correct (λ follows if per_lam)
    per_lam: bool  # the label depends on λ; otherwise it is computed once and broadcast over the λ axis
    metric: str  # its test metric in the guarantee study's re-splits (cr2.evaluation.guarantees)
    all_metric: str  # its evaluation metric over every test row (cr2.evaluation.metrics.PER_QUERY_METRICS)

    def label_function(self) -> Callable:
        """The function computing r_i(λ) (imported on first use)."""
        module, _, name = self.label.partition(":")
        return getattr(importlib.import_module(module), name)


RISKS: dict[str, RiskSpec] = {r.name: r for r in (
    RiskSpec("teacher-disagreement", "teacher disagreement",
             "the frozen teacher's full-information choice m_full* = argmax_m p_m − λ·ĉ_m is an edge model "
             "(paper eq. disagree_label); a promise about agreement with a learned selector, not about answers", False,
             label="cr2.method.utility:disagree_label", inputs=("proba", "decision_cost"), per_lam=True,
             metric="teacher_risk", all_metric="risk_all"),
    RiskSpec("oracle-disagreement", "oracle disagreement on real labels",
             "the real-label choice argmax_m y_m − λ·ĉ_m (real correctness, the same decision cost as the teacher's "
             "reference; ties → cheaper, then the device) is an edge model", True,
             label="cr2.method.utility:oracle_disagree_label", inputs=("correct", "decision_cost"), per_lam=True,
             metric="oracle_risk", all_metric="oracle_risk_all"),
    RiskSpec("avoidable-error", "avoidable error",
             "the device model answers wrongly while some edge model answers correctly (independent of λ)", True,
             label="cr2.method.utility:avoidable_error_label", inputs=("correct",), per_lam=False,
             metric="avoidable_risk", all_metric="avoidable_risk_all"),
)}


def risk_spec(risk: str) -> RiskSpec:
    """Return the registered risk; an unknown name is an error with a did-you-mean and the list."""
    if risk not in RISKS:
        from cr2.core.errors import did_you_mean

        raise did_you_mean("risk", risk, list(RISKS))
    return RISKS[risk]


@dataclass(frozen=True)
class RuleSpec:
    """A registered threshold rule: how many risky calibration points it may accept (procedure) and which risk."""

    name: str  # what config `calibration.rule`, `cr2 calibrate --rule` and the `thresholds` table say
    procedure: str  # crc | empirical | ltt (the count k of accepted risky points) | fixed | rate (uncalibrated)
    risk: str | None  # a RISKS key: the risk label the rule is calibrated on; None: no risk is controlled
    promise: str  # one line for tables and help text
    colour: str | None = None  # CR² under this rule in figures (cr2.evaluation.sweep); None: CR²'s own colour

    @property
    def needs_delta(self) -> bool:
        return self.procedure == "ltt"

    @property
    def calibrated(self) -> bool:
        return self.procedure in ("crc", "empirical", "ltt")


RULE_REGISTRY: dict[str, RuleSpec] = {r.name: r for r in (
    RuleSpec("crc", "crc", "teacher-disagreement", "E[teacher disagreement] ≤ α per λ (paper)"),
    RuleSpec("empirical", "empirical", "teacher-disagreement", "teacher disagreement d/N ≤ α on val (ablation; no guarantee)"),
    RuleSpec("ltt", "ltt", "teacher-disagreement", "P(every λ has teacher disagreement ≤ α) ≥ 1 − δ", "#16a085"),
    RuleSpec("crc-oracle", "crc", "oracle-disagreement", "E[oracle disagreement on real labels] ≤ α per λ", "#d35400"),
    RuleSpec("crc-avoidable", "crc", "avoidable-error", "E[avoidable error] ≤ α per λ", "#8e44ad"),
    RuleSpec("ltt-oracle", "ltt", "oracle-disagreement", "P(every λ has oracle disagreement on real labels ≤ α) ≥ 1 − δ",
             "#e67e22"),
    RuleSpec("ltt-avoidable", "ltt", "avoidable-error", "P(every λ has avoidable error ≤ α) ≥ 1 − δ", "#a569bd"),
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

