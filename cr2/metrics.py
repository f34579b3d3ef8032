"""Evaluation metrics of a routing policy on a test set (paper §VII): one function per metric, arrays in.

Test queries that no model answers correctly are excluded from test metrics (paper §VII-A):
`evaluable_mask` gives the rows to keep.
"""
from __future__ import annotations

import numpy as np

from cr2.data import Decisions, RoutingSet
from cr2.utility import DEVICE_INDEX, disagree_label


def evaluable_mask(data: RoutingSet) -> np.ndarray:
    """[n] bool: queries at least one model answers correctly."""
    return np.asarray(data.correct, dtype=bool).any(axis=1)


def accuracy(data: RoutingSet, decisions: Decisions) -> float:
    """Mean y_m̂(x) over queries: the chosen model's correctness."""
    rows = np.arange(len(data))
    return float(np.asarray(data.correct, dtype=bool)[rows, decisions.chosen].mean()) if len(data) else float("nan")


def mean_cost(data: RoutingSet, decisions: Decisions) -> float:
    """Normalised deployment cost of the policy: mean c_m̂(x, ξ) over its choices (cr2.md §3)."""
    rows = np.arange(len(data))
    return float(np.asarray(data.cost, dtype=np.float64)[rows, decisions.chosen].mean()) if len(data) else float("nan")


def local_rate(decisions: Decisions) -> float:
    """Fraction of queries answered by the device model m0."""
    return float(np.mean(decisions.chosen == DEVICE_INDEX)) if len(decisions.chosen) else float("nan")


def false_acceptance_risk(proba: np.ndarray, data: RoutingSet, decisions: Decisions, lam: float) -> float:
    """Marginal false-acceptance risk: mean of 1[accepted locally] · r(λ), r = 1[m_full* ≠ m0] under the teacher (§VI-F)."""
    accepted = decisions.extra.get("gate_accept", decisions.chosen == DEVICE_INDEX)
    risk = disagree_label(proba, data.decision_cost, lam)
    return float(np.mean(np.asarray(accepted, dtype=bool) & np.asarray(risk, dtype=bool))) if len(data) else float("nan")


def oracle_accuracy(data: RoutingSet) -> float:
    """Fraction of queries some model answers correctly (the ceiling of any router)."""
    return float(evaluable_mask(data).mean()) if len(data) else float("nan")


def false_defer_rate(proba: np.ndarray, data: RoutingSet, decisions: Decisions, lam: float) -> float:
    """Gate false defers: mean of 1[deferred by the gate] · (1 − r(λ)), i.e. deferred although m0 is teacher-optimal."""
    accepted = decisions.extra.get("gate_accept", decisions.chosen == DEVICE_INDEX)
    risk = disagree_label(proba, data.decision_cost, lam)
    return float(np.mean(~np.asarray(accepted, dtype=bool) & ~np.asarray(risk, dtype=bool))) if len(data) else float("nan")


def resplit_risk(scores: np.ndarray, risks: np.ndarray, n_calib: int, alphas: np.ndarray, n_resplits: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Test false-acceptance risk of CRC over random calibration/test re-splits: [n_resplits, n_alpha].

    scores, risks: one λ's pooled (calibration ∪ test) scores s_i and r_i; each re-split calibrates τ*(α)
    on n_calib random points and measures R̂ on the rest — the Monte-Carlo check of E[R] ≤ α.
    """
    from cr2.crc import accept, calibrate_thresholds

    out = np.empty((n_resplits, len(alphas)))
    for b in range(n_resplits):
        perm = rng.permutation(len(scores))
        cal, test = perm[:n_calib], perm[n_calib:]
        taus = calibrate_thresholds(scores[cal], risks[cal], alphas)
        for j, tau in enumerate(taus):
            out[b, j] = np.mean(accept(scores[test], tau) & risks[test])
    return out


def risk_tolerance(alpha: float, n: int, z: float = 3.0) -> float:
    """Monte-Carlo tolerance of a test-split risk estimate at level α: z binomial standard errors, z·sqrt(α(1−α)/n)."""
    return float(z * np.sqrt(alpha * (1.0 - alpha) / max(n, 1)))
