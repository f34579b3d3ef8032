"""Evaluation metrics of a routing policy on a test set (paper §VII): one function per metric, arrays in.

Test queries that no model answers correctly are excluded from test metrics (paper §VII-A):
`evaluable_mask` gives the rows to keep.

Risks. "Accepted locally" is the gate's own acceptance 1[s ≥ τ] where the router has a gate
(Decisions.extra["gate_accept"], the event every CR² guarantee is about), else the choice of m0. Three risks:
- teacher disagreement (`risk`, the paper's eq. disagree_label): accepted while the teacher's m_full* is an
  edge model — agreement with a learned selector, not a statement about answers;
- oracle disagreement on real labels: accepted while argmax_m y_m − λ·ĉ_m over the real correctness is an edge
  model — eq. disagree_label with y in place of the teacher's p, the same decision cost ĉ (ties → cheaper
  model, then the device: cr2.method.utility.oracle_choice);
- avoidable error: accepted, the device model wrong and some edge model right.
Each has a per-query function returning a [n] bool array (its mean is the metric), so a paired bootstrap
(cr2.evaluation.statistics.resampled_means) can put an interval on it; `local_accuracy` is a ratio, with per-query
numerator and denominator in `local_accuracy_terms`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from cr2.core.data import Decisions, RoutingSet
from cr2.crc import RISKS
from cr2.method.utility import DEVICE_INDEX, avoidable_error_label, disagree_label, oracle_disagree_label


def evaluable_mask(data: RoutingSet) -> np.ndarray:
    """[n] bool: queries at least one model answers correctly."""
    return np.asarray(data.correct, dtype=bool).any(axis=1)


def _mean(values: np.ndarray) -> float:
    return float(np.mean(values)) if len(values) else float("nan")


# ---- per-query values: every test metric is the mean of one of these over its rows, so the paired bootstrap
# (cr2.evaluation.intervals) resamples exactly what the metrics table reports
def correct_of_choice(data: RoutingSet, decisions: Decisions) -> np.ndarray:
    """[n] float: y_m̂(x), the chosen model's correctness."""
    return np.asarray(data.correct, dtype=bool)[np.arange(len(data)), decisions.chosen].astype(np.float64)


def cost_of_choice(data: RoutingSet, decisions: Decisions) -> np.ndarray:
    """[n] float: c_m̂(x, ξ), the realised normalised cost of the chosen model."""
    return np.asarray(data.cost, dtype=np.float64)[np.arange(len(data)), decisions.chosen]


def local_of_choice(decisions: Decisions) -> np.ndarray:
    """[n] float: 1[m̂ = m0], answered on the device."""
    return (np.asarray(decisions.chosen) == DEVICE_INDEX).astype(np.float64)


def accepted_locally(decisions: Decisions) -> np.ndarray:
    """[n] bool: the gate's acceptance 1[s ≥ τ] when the router has a gate, else the choice of the device model m0."""
    return np.asarray(decisions.extra.get("gate_accept", decisions.chosen == DEVICE_INDEX), dtype=bool)


# ---- the risks: 1[accepted locally] · a label that does not depend on the decisions. The labels of a test set
# at one λ are computed once (MetricInputs) and shared by every operating point at that λ and by every row subset.
RISK_LABELS: dict[str, Callable[[np.ndarray | None, RoutingSet, float | None], np.ndarray]] = {
    # eq. (disagree_label): r = 1[m_full* ≠ m0] under the teacher's p
    "teacher": lambda proba, data, lam: np.asarray(disagree_label(proba, data.decision_cost, lam), dtype=bool),
    # eq. (disagree_label) over the real labels: r = 1[m_oracle* ≠ m0], the same decision cost ĉ
    "oracle": lambda proba, data, lam: oracle_disagree_label(data.correct, data.decision_cost, lam),
    "avoidable": lambda proba, data, lam: avoidable_error_label(data.correct),
}


class MetricInputs:
    """What a per-query metric reads besides the decisions: the test rows, the frozen teacher's p on them and λ.

    Each risk label (RISK_LABELS) is computed at most once per instance; `subset` slices the labels of the whole
    set (a label is a per-row function, so a slice equals the label of the subset), which lets an evaluation
    compute them once per λ for all its operating points, benchmarks and row sets.
    """

    def __init__(self, data: RoutingSet, proba: np.ndarray | None, lam: float | None,
                 labels: dict[str, np.ndarray] | None = None) -> None:
        self.data, self.proba, self.lam = data, proba, lam
        self._labels: dict[str, np.ndarray] = dict(labels or {})

    def label(self, name: str) -> np.ndarray:
        """[n] bool: risk label `name` of RISK_LABELS on these rows."""
        if name not in self._labels:
            self._labels[name] = RISK_LABELS[name](self.proba, self.data, self.lam)
        return self._labels[name]

    def subset(self, idx: np.ndarray, data: RoutingSet | None = None) -> "MetricInputs":
        """The inputs of rows `idx` (`data`: data.subset(idx) when the caller has it), every risk label sliced."""
        labels = {name: self.label(name)[idx] for name in RISK_LABELS}
        proba = None if self.proba is None else self.proba[idx]
        return MetricInputs(self.data.subset(idx) if data is None else data, proba, self.lam, labels)


def _risk(inputs: MetricInputs, decisions: Decisions, label: str) -> np.ndarray:
    """[n] bool: accepted locally while risk label `label` is set — the loss whose mean is the risk."""
    return accepted_locally(decisions) & inputs.label(label)


def false_acceptance(proba: np.ndarray, data: RoutingSet, decisions: Decisions, lam: float) -> np.ndarray:
    """[n] float: 1[accepted locally] · r(λ), r = 1[m_full* ≠ m0] under the teacher (teacher disagreement, §VI-F)."""
    return _risk(MetricInputs(data, proba, lam), decisions, "teacher").astype(np.float64)


def oracle_disagreement_per_query(data: RoutingSet, decisions: Decisions, lam: float) -> np.ndarray:
    """[n] bool: accepted locally while argmax_m y_m − λ·ĉ_m (real labels, decision cost) is an edge model."""
    return _risk(MetricInputs(data, None, lam), decisions, "oracle")


def avoidable_error_per_query(data: RoutingSet, decisions: Decisions) -> np.ndarray:
    """[n] bool: accepted locally, the device model wrong and some edge model right."""
    return _risk(MetricInputs(data, None, None), decisions, "avoidable")


def local_accuracy_terms(data: RoutingSet, decisions: Decisions) -> np.ndarray:
    """[n, 2] float: (accepted locally and the device right, accepted locally) per query; local accuracy = Σ col 0 / Σ col 1."""
    acc = accepted_locally(decisions)
    right = acc & np.asarray(data.correct, dtype=bool)[:, DEVICE_INDEX]
    return np.stack([right, acc], axis=1).astype(np.float64)


def accuracy(data: RoutingSet, decisions: Decisions) -> float:
    """Mean y_m̂(x) over queries: the chosen model's correctness."""
    return _mean(correct_of_choice(data, decisions))


def mean_cost(data: RoutingSet, decisions: Decisions) -> float:
    """Normalised deployment cost of the policy: mean c_m̂(x, ξ) over its choices (docs/cost-model.md)."""
    return _mean(cost_of_choice(data, decisions))


def local_rate(decisions: Decisions) -> float:
    """Fraction of queries answered by the device model m0."""
    return _mean(local_of_choice(decisions))


def false_acceptance_risk(proba: np.ndarray, data: RoutingSet, decisions: Decisions, lam: float) -> float:
    """Marginal false-acceptance risk: mean of 1[accepted locally] · r(λ), r = 1[m_full* ≠ m0] under the teacher (§VI-F)."""
    return _mean(false_acceptance(proba, data, decisions, lam))


def oracle_disagreement_risk(data: RoutingSet, decisions: Decisions, lam: float) -> float:
    """Realised risk (a): the share of queries accepted locally although the real-label oracle prefers an edge model."""
    return _mean(oracle_disagreement_per_query(data, decisions, lam))


def avoidable_error_risk(data: RoutingSet, decisions: Decisions) -> float:
    """Realised risk (b): the share of queries answered wrongly on the device where an edge model would have been right."""
    return _mean(avoidable_error_per_query(data, decisions))


def local_accuracy(data: RoutingSet, decisions: Decisions) -> float:
    """The device model's accuracy on the queries accepted locally (NaN when none is accepted)."""
    t = local_accuracy_terms(data, decisions).sum(axis=0)
    return float(t[0] / t[1]) if t[1] > 0 else float("nan")


def risk_per_query(data: RoutingSet, decisions: Decisions, lam: float, proba: np.ndarray) -> dict[str, np.ndarray]:
    """The per-query loss of every risk metric, metric name → [n] bool (the metric is its mean): what a paired
    bootstrap over test queries resamples. Names are those of the `metrics` rows (cr2.evaluation.sweep.metric_rows)."""
    inputs = MetricInputs(data, proba, lam)
    return {name: PER_QUERY_METRICS[name].values(inputs, decisions).astype(bool)
            for name in ("risk", "oracle_risk", "avoidable_risk")}


@dataclass(frozen=True)
class PerQueryMetric:
    """A test metric that is the mean of a per-query value: what the bootstrap resamples (cr2.evaluation.intervals)."""

    name: str  # as in the metrics table
    values: Callable[[MetricInputs, Decisions], np.ndarray]  # (inputs on the metric's rows, decisions) → [n]
    rows: str  # 'solvable': the rows accuracy/cost/local rate use (queries some model solves); 'all': every test row


#: the per-query metrics the paired bootstrap gives an interval for, by name. A new per-query metric (e.g. a
#: realised risk) is one entry here: `metric_rows` records its mean and the intervals task resamples it.
PER_QUERY_METRICS: dict[str, PerQueryMetric] = {m.name: m for m in (
    PerQueryMetric("accuracy", lambda q, dec: correct_of_choice(q.data, dec), "solvable"),
    PerQueryMetric("cost", lambda q, dec: cost_of_choice(q.data, dec), "solvable"),
    PerQueryMetric("local_rate", lambda q, dec: local_of_choice(dec), "solvable"),
    PerQueryMetric("risk", lambda q, dec: _risk(q, dec, "teacher").astype(np.float64), "solvable"),
    PerQueryMetric("risk_all", lambda q, dec: _risk(q, dec, "teacher").astype(np.float64), "all"),
    # the realised risks on the real labels, on the same two row sets
    PerQueryMetric("oracle_risk", lambda q, dec: _risk(q, dec, "oracle"), "solvable"),
    PerQueryMetric("oracle_risk_all", lambda q, dec: _risk(q, dec, "oracle"), "all"),
    PerQueryMetric("avoidable_risk", lambda q, dec: _risk(q, dec, "avoidable"), "solvable"),
    PerQueryMetric("avoidable_risk_all", lambda q, dec: _risk(q, dec, "avoidable"), "all"),
)}
#: the metric of each risk a rule can control (cr2.crc.RISKS key → PER_QUERY_METRICS name), over every test row: the
#: population a rule's promise is stated for, so a deployed table's test risk is read against α here
RISK_ALL_METRICS: dict[str, str] = {name: r.all_metric for name, r in RISKS.items()}


def oracle_accuracy(data: RoutingSet) -> float:
    """Fraction of queries some model answers correctly (the ceiling of any router)."""
    return float(evaluable_mask(data).mean()) if len(data) else float("nan")


def false_defer_rate(proba: np.ndarray, data: RoutingSet, decisions: Decisions, lam: float) -> float:
    """Gate false defers: mean of 1[deferred by the gate] · (1 − r(λ)), i.e. deferred although m0 is teacher-optimal."""
    return false_defers(MetricInputs(data, proba, lam), decisions)


def false_defers(inputs: MetricInputs, decisions: Decisions) -> float:
    """false_defer_rate on MetricInputs (their teacher label computed once)."""
    return _mean(~accepted_locally(decisions) & ~inputs.label("teacher"))


def resplit_risk(scores: np.ndarray, risks: np.ndarray, n_calib: int, alphas: np.ndarray, n_resplits: int,
                 rng: np.random.Generator, rule: str = "crc", delta: float | None = None) -> np.ndarray:
    """Test false-acceptance risk of a rule (default CRC) over random calibration/test re-splits: [n_resplits, n_alpha].

    scores, risks: one λ's pooled (calibration ∪ test) scores s_i and r_i (the rule's risk label); each re-split
    calibrates τ*(α) on n_calib random points and measures R̂ on the rest — the Monte-Carlo check of E[R] ≤ α.
    rule / delta: as cr2.crc.calibrate_thresholds takes them (δ for one λ, for the ltt rules).
    """
    from cr2.crc.rules import _check_pair, allowed_risky_count, thresholds_from_risky

    scores, risks = _check_pair(scores, risks)
    k = allowed_risky_count(n_calib, alphas, rule, delta)  # the same for every re-split: N and α are fixed
    wide = scores.astype(np.float64)  # 1[s ≥ τ] decided exactly, as cr2.crc.accept decides it
    n_test = len(scores) - n_calib
    out = np.empty((n_resplits, len(k)))
    for b in range(n_resplits):
        perm = rng.permutation(len(scores))
        cal, test = perm[:n_calib], perm[n_calib:]
        taus = thresholds_from_risky(np.sort(scores[cal][risks[cal]])[::-1], k, scores.dtype)
        risky_test = np.sort(wide[test][risks[test]])
        # R̂ = #{test i : r_i = 1, s_i ≥ τ} / n_test, per α
        out[b] = (len(risky_test) - np.searchsorted(risky_test, taus, side="left")) / n_test
    return out


def risk_tolerance(alpha: float, n: int, z: float = 3.0) -> float:
    """Monte-Carlo tolerance of a test-split risk estimate at level α: z binomial standard errors, z·sqrt(α(1−α)/n)."""
    return float(z * np.sqrt(alpha * (1.0 - alpha) / max(n, 1)))
