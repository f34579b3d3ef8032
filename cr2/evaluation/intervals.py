"""Paired bootstrap intervals of one evaluation run: every operating point and every saving vs KNN.

The unit of resampling is the test query. One index array (cr2.evaluation.statistics.resample_indices over all n test
rows) serves every method, operating point, benchmark and metric, so every difference is paired. Per
resample:
  - each per-query metric of cr2.evaluation.metrics.PER_QUERY_METRICS (accuracy, cost, local rate, risk, …) is the mean
    over its rows (the solvable queries of the benchmark, or all of them for risk_all) among the drawn ones;
  - each learned method's monotone frontier, its cost at every target accuracy and its saving vs the reference
    router (KNN) are recomputed (cr2.evaluation.fixed_accuracy.saving_intervals), and so is the mean saving over the
    target grid fixed from the validation split (less its targets no Always-model reaches on the test set); each
    side is charged the lower of its frontier cost and the cheapest Always-model reaching the target
    (fixed_accuracy.FallbackCost.charge), so every interval rests on every resample.
A method swept over several α (CR²) is compared at ONE α, grids.default_alpha (`points_by_method`): an envelope
over α mixes guarantees and is never compared.
What the intervals do not cover: training, calibration and the split are held fixed (test-query noise only);
the seed study (flows/study_seeds.py) varies those.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from cr2.evaluation.statistics import percentile_intervals, resampled_means
from cr2.core.data import Decisions, RoutingSet
from cr2.core.errors import InvalidValueError
from cr2.evaluation.fixed_accuracy import (FallbackCost, MethodOutcomes, always_outcomes, frontier_cost_at,
                                          saving_intervals)
from cr2.evaluation.metrics import PER_QUERY_METRICS, RISK_ALL_METRICS, MetricInputs, PerQueryMetric

SAVING = "saving_vs_knn_pct"  # metric name of a per-target saving row (as the column of v_fixed_accuracy)
#: the risks over ALL test rows (a guarantee is over every query, never over a subset chosen by the labels) that a
#: point at α is also tested against α: metric '<risk>_minus_alpha', its interval and p of "risk − α = 0"
RISKS_VS_ALPHA = tuple(RISK_ALL_METRICS.values())
MINUS_ALPHA = "_minus_alpha"
MEAN_SAVING = "mean_saving_vs_knn_pct"  # metric name of the mean over the validation target grid


@dataclass(frozen=True)
class OperatingPoint:
    """One evaluated (method, λ, α) with its per-query decisions on the test rows."""

    method: str
    lam: float
    alpha: float | None
    chosen: np.ndarray  # [n] int, pool index of the chosen model
    gate_accept: np.ndarray  # [n] bool, the gate's own acceptance (the chosen == m0 event for routers without a gate)

    def decisions(self) -> Decisions:
        return Decisions(chosen=self.chosen, accepted_local=self.chosen == 0, extra={"gate_accept": self.gate_accept})


def metric_intervals(points: Sequence[OperatingPoint], test: RoutingSet, proba: np.ndarray, keep: np.ndarray,
                     counts: np.ndarray, level: float = 0.95, *, per_benchmark: bool = True,
                     metrics: Mapping[str, PerQueryMetric] = PER_QUERY_METRICS) -> list[dict[str, Any]]:
    """Tidy interval rows (method, λ, α, benchmark, metric, estimate, lower, upper, n_resamples) of every point.

    counts: [B, n] resample counts over all n test rows (cr2.evaluation.statistics.resample_counts), shared by all points.
    The estimate is the metric on the full test set — the value the metrics table holds.
    """
    n = len(test)
    if counts.shape[1] != n or np.shape(keep) != (n,):
        raise InvalidValueError(f"counts {counts.shape} and keep {np.shape(keep)} must cover the {n} test rows")
    keep = np.asarray(keep, dtype=bool)
    benches = ["all", *sorted(set(test.benchmark))] if per_benchmark else ["all"]
    rows: list[dict[str, Any]] = []
    inputs: dict[float, MetricInputs] = {}  # per λ: the risk labels computed once for all its points
    for m in metrics.values():
        values = np.stack([m.values(inputs.setdefault(float(p.lam), MetricInputs(test, proba, p.lam)), p.decisions())
                           for p in points], axis=1)  # [n, P]
        for bench in benches:
            in_b = np.ones(n, dtype=bool) if bench == "all" else np.asarray(test.benchmark) == bench
            scope = in_b & keep if m.rows == "solvable" else in_b
            if not scope.any():
                continue
            est = values[scope].mean(axis=0)
            samples = resampled_means(values, None, scope, counts=counts)
            lower, upper, p_value, n_ok = percentile_intervals(samples, est, level)
            rows += [{"method": p.method, "lam": p.lam, "alpha": p.alpha, "benchmark": bench, "metric": m.name,
                      "target": None, "estimate": float(est[j]), "lower": float(lower[j]), "upper": float(upper[j]),
                      "p_value": float(p_value[j]), "n_resamples": int(n_ok[j]), "n_targets": None}
                     for j, p in enumerate(points)]
            at = [j for j, p in enumerate(points) if p.alpha is not None]
            if m.name in RISKS_VS_ALPHA and bench == "all" and at:
                alpha = np.array([points[j].alpha for j in at])
                lo, hi, pv, ok = percentile_intervals(samples[:, at] - alpha, est[at] - alpha, level)
                rows += [{"method": points[j].method, "lam": points[j].lam, "alpha": points[j].alpha,
                          "benchmark": bench, "metric": m.name + MINUS_ALPHA, "target": None,
                          "estimate": float(est[j] - points[j].alpha), "lower": float(lo[i]), "upper": float(hi[i]),
                          "p_value": float(pv[i]), "n_resamples": int(ok[i]), "n_targets": None}
                         for i, j in enumerate(at)]
    return rows


def points_by_method(points: Sequence[OperatingPoint], alpha: float) -> dict[str, list[OperatingPoint]]:
    """Each method's λ sweep at one α: a method evaluated at several α (CR²'s sweep over grids.alpha) keeps its
    points at `alpha` (grids.default_alpha) only; a method without α keeps all of them. The one rule every
    comparison of methods applies, so no frontier pools guarantees."""
    by_method: dict[str, list[OperatingPoint]] = {}
    for p in points:
        by_method.setdefault(p.method, []).append(p)
    out = {}
    for method, pts in by_method.items():
        alphas = {p.alpha for p in pts if p.alpha is not None}
        if len(alphas) > 1:
            pts = [p for p in pts if p.alpha is not None and abs(p.alpha - float(alpha)) < 1e-12]
            if not pts:
                raise InvalidValueError(f"method {method} has no operating point at α = {alpha} (it has {sorted(alphas)})")
        out[method] = pts
    return out


def method_outcomes(points: Sequence[OperatingPoint], test: RoutingSet, keep: np.ndarray) -> MethodOutcomes:
    """A method's per-query correctness and cost at each of its operating points (the solvable rows counted)."""
    chosen = np.stack([p.chosen for p in points], axis=1)  # [n, k]
    rows = np.arange(len(test))[:, None]
    return MethodOutcomes(np.asarray(test.correct, dtype=bool)[rows, chosen],
                          np.asarray(test.cost, dtype=np.float64)[rows, chosen], rows=np.asarray(keep, dtype=bool))


def always_fallback(test: RoutingSet, keep: np.ndarray, targets: np.ndarray, counts: np.ndarray) -> FallbackCost:
    """The Always-model fallback cost of the test rows at `targets` (fixed_accuracy.FallbackCost)."""
    return FallbackCost.of_always(always_outcomes(test.correct, test.cost, np.asarray(keep, dtype=bool)), targets, counts)


def edge_fallback(test: RoutingSet, keep: np.ndarray, targets: np.ndarray, counts: np.ndarray) -> FallbackCost:
    """The fallback of a deployment without a device model: the cheapest Always edge model at `targets` (the
    always-edge candidate of cr2.evaluation.deploy)."""
    from cr2.method.utility import DEVICE_INDEX

    edge = np.arange(np.shape(test.correct)[1]) != DEVICE_INDEX
    return FallbackCost.of_always(always_outcomes(np.asarray(test.correct)[:, edge], np.asarray(test.cost)[:, edge],
                                                  np.asarray(keep, dtype=bool)), targets, counts)


def _interval_row(base: dict[str, Any], metric: str, target: float | None, iv, n_targets: int | None) -> dict[str, Any]:
    return {**base, "metric": metric, "target": None if target is None else round(float(target), 6),
            "estimate": iv.estimate, "lower": iv.lower, "upper": iv.upper, "p_value": iv.p_value,
            "n_resamples": iv.n_resamples, "n_targets": n_targets}


def saving_interval_rows(outcomes: Mapping[str, MethodOutcomes], reference: str, targets: np.ndarray,
                         counts: np.ndarray, fallback: FallbackCost, grid: np.ndarray,
                         level: float = 0.95) -> list[dict[str, Any]]:
    """Tidy rows of each method's saving vs `reference` at every target and of the mean over the validation grid
    (metric MEAN_SAVING, target NULL, n_targets = the targets it keeps: FallbackCost.reachable_grid), each with its
    interval and bootstrap p."""
    if reference not in outcomes:
        raise InvalidValueError(f"reference router '{reference}' is not among the evaluated methods {sorted(outcomes)}")
    t = np.asarray(targets, dtype=np.float64)
    reaches = {m: np.isfinite(frontier_cost_at(*o.points(), t)) for m, o in outcomes.items()}
    rows: list[dict[str, Any]] = []
    for method, out in outcomes.items():
        per_target, mean = saving_intervals(out, outcomes[reference], t, counts, fallback, grid, level)
        base = {"method": method, "lam": None, "alpha": None, "benchmark": "all"}
        both = reaches[method] & reaches[reference]  # a target both frontiers reach on the test set: a test (the
        # view's row); elsewhere the saving compares fallbacks and is kept as an estimate, in no family
        own = {"reference": method == reference}  # the reference against itself: 0 by construction, no test
        rows += [{**_interval_row(base, SAVING, tt, iv, None), "reached": bool(ok), **own}
                 for tt, iv, ok in zip(t, per_target, both)]
        rows.append({**_interval_row(base, MEAN_SAVING, None, mean, fallback.reachable_grid(grid).n_targets), **own})
    return rows
