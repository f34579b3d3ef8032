"""Equal-risk comparison: every certified router at the same risk bound, and CR²'s result against a baseline split
into the quality of its score and the price of its guarantee.

A *side* is one λ sweep of one router: certified (`<router>@<rule>` at a fixed α — every point of its frontier has
risk ≤ α under the rule's risk) or uncertified (the router's own decision: a baseline's one-shot argmax of
p̂ − λĉ, `<router>@uncertified`; CR²'s gate at s ≥ 0.5, i.e. Δ̂ ≥ 0, method `cr2-fixed-0.5` — both accept the device
model exactly where their own estimated margin is ≥ 0). Each side's frontier gives its cost at every target
accuracy (cr2.evaluation.fixed_accuracy); a comparison is the paired saving of side A against side B at every target both
reach and its mean over them, on one bootstrap index shared by every side (the evaluation's), so every difference
is paired. Three questions, for CR² against each baseline B (rule R, level α):

- gate-quality:     CR² uncertified vs B uncertified — which score routes cheaper with no guarantee;
- guarantee-price:  X@R at α vs X uncertified, for X = CR² and every B — what the guarantee costs each router;
- certified-score:  CR²@R vs B@R at the same α — which score certifies cheaper at equal risk.

The questions' mean-saving tests are read together per question: their two-sided p-values (from the bootstrap
standard error) are Holm-adjusted over the question's family (every baseline × rule × α), and a mean saving gets a
direction word only where its 95 % interval excludes 0 and its Holm-adjusted p < 0.05 (cr2.evaluation.statistics
.saving_verdict). Per-target rows carry their interval's own verdict, uncorrected.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from cr2.evaluation.statistics import bootstrap_p_value, holm_adjust, percentile_interval, saving_verdict
from cr2.routers.certify import UNCERTIFIED, certified_name
from cr2.evaluation.fixed_accuracy import MethodOutcomes, cost_samples, mean_over_reached, saving_pct, stacked_points

SUBJECT = "cr2"
CR2_UNCERTIFIED = "cr2-fixed-0.5"  # CR²'s gate without a calibrated threshold: accept where s ≥ 0.5 (Δ̂ ≥ 0)
QUESTIONS = ("gate-quality", "guarantee-price", "certified-score")
COST, SAVING, MEAN_SAVING = "cost_at_accuracy", "saving_pct", "mean_saving_pct"


@dataclass(frozen=True)
class Side:
    """One λ sweep: an evaluated method at one α (None: an uncertified method, evaluated without α)."""

    method: str
    alpha: float | None


@dataclass(frozen=True)
class Comparison:
    """Side a against side b under one question; rule and alpha name the certified side(s), None for gate-quality."""

    question: str
    router: str  # the router whose side a is
    against: str  # the baseline of side b, or 'uncertified' (guarantee-price)
    rule: str | None
    alpha: float | None
    a: Side
    b: Side


def uncertified_side(router: str) -> Side:
    """A router's own decision with no guarantee (see the module docstring)."""
    return Side(CR2_UNCERTIFIED if router == SUBJECT else certified_name(router, UNCERTIFIED), None)


def certified_side(router: str, rule: str, alpha: float) -> Side:
    return Side(certified_name(router, rule), float(alpha))


def decomposition(routers: Sequence[str], rules: Sequence[str], alphas: Sequence[float]) -> list[Comparison]:
    """The comparisons of the three questions for CR² against every other router of `routers` (certified ones)."""
    baselines = [r for r in routers if r != SUBJECT]
    out = [Comparison("gate-quality", SUBJECT, b, None, None, uncertified_side(SUBJECT), uncertified_side(b))
           for b in baselines]
    for rule in rules:
        for alpha in alphas:
            out += [Comparison("guarantee-price", r, UNCERTIFIED, rule, float(alpha), certified_side(r, rule, alpha),
                               uncertified_side(r)) for r in [SUBJECT, *baselines]]
            out += [Comparison("certified-score", SUBJECT, b, rule, float(alpha), certified_side(SUBJECT, rule, alpha),
                               certified_side(b, rule, alpha)) for b in baselines]
    return out


def _row(question: str, router: str, against: str | None, rule: str | None, alpha: float | None, a: Side,
         b: Side | None, metric: str, target: float | None, estimate: float, samples: np.ndarray,
         level: float) -> dict[str, Any]:
    iv = percentile_interval(samples, estimate, level)
    return {"question": question, "router": router, "against": against, "rule": rule, "alpha": alpha,
            "method_a": a.method, "method_b": None if b is None else b.method, "metric": metric,
            "target": None if target is None else round(float(target), 6), "estimate": iv.estimate,
            "lower": iv.lower, "upper": iv.upper, "n_resamples": iv.n_resamples, "n_targets": None,
            "p_value": None, "p_holm": None,
            "verdict": None if metric == COST else saving_verdict(iv.lower, iv.upper, level=level)}


def equal_risk_rows(outcomes: Mapping[Side, MethodOutcomes], comparisons: Sequence[Comparison],
                    cost_sides: Mapping[Side, tuple[str, str | None]], targets: np.ndarray, counts: np.ndarray,
                    level: float = 0.95) -> list[dict[str, Any]]:
    """Tidy rows: each side of `cost_sides` ({side: (router, rule)}) — its cost at every target it reaches — and each
    comparison whose two sides were evaluated — its saving at every target both reach and the mean over them (with
    its bootstrap p-value and the Holm-adjusted one over its question's family). counts: [B, n] resample counts
    over the test rows, the evaluation's shared index."""
    t = np.asarray(targets, dtype=np.float64)
    # each side's frontier cost on the test set and on every resample, once (a comparison is a ratio of two)
    sides = list(outcomes)
    points = stacked_points([outcomes[s] for s in sides], counts)
    cost = {side: cost_samples(outcomes[side], t, counts, points=p) for side, p in zip(sides, points)}
    rows: list[dict[str, Any]] = []
    for side, (router, rule) in cost_sides.items():
        if side in cost:
            est, samples = cost[side]
            rows += [_row("cost", router, None, rule, side.alpha, side, None, COST, tt, float(est[i]), samples[:, i],
                          level) for i, tt in enumerate(t) if np.isfinite(est[i])]
    means: list[dict[str, Any]] = []
    for c in comparisons:
        if c.a not in cost or c.b not in cost:
            continue
        est, samples = saving_pct(cost[c.a][0], cost[c.b][0]), saving_pct(cost[c.a][1], cost[c.b][1])
        rows += [_row(c.question, c.router, c.against, c.rule, c.alpha, c.a, c.b, SAVING, tt, float(est[i]),
                      samples[:, i], level) for i, tt in enumerate(t) if np.isfinite(est[i])]
        mean_est, mean_samples = mean_over_reached(est, samples)
        if np.isfinite(mean_est):
            row = _row(c.question, c.router, c.against, c.rule, c.alpha, c.a, c.b, MEAN_SAVING, None, mean_est,
                       mean_samples, level)
            means.append({**row, "n_targets": int(np.isfinite(est).sum()), "p_value": bootstrap_p_value(mean_est, mean_samples)})
    for question in QUESTIONS:  # one family per question
        family = [r for r in means if r["question"] == question]
        for r, p_holm in zip(family, holm_adjust(np.array([r["p_value"] for r in family], dtype=np.float64))):
            r["p_holm"] = float(p_holm)
            r["verdict"] = saving_verdict(r["lower"], r["upper"], p_holm, level)
    return rows + means


def study_statistics(rows: Sequence[Mapping[str, Any]], alpha: float) -> list[dict[str, Any]]:
    """The statistics a study keeps of one run's equal-risk rows (a pool, a seed): every mean saving of gate quality,
    and of the other two questions at level `alpha` — one number per comparison, with its interval and the resamples
    it kept (n_resamples: those on which every target of the mean is reached)."""
    return [{"question": r["question"], "method_a": r["method_a"], "method_b": r["method_b"], "rule": r["rule"],
             "alpha": r["alpha"], "estimate": r["estimate"], "lower": r["lower"], "upper": r["upper"],
             "n_targets": r["n_targets"], "n_resamples": r.get("n_resamples")}
            for r in rows if r["metric"] == MEAN_SAVING
            and (r["question"] == "gate-quality" or (r["alpha"] is not None and abs(float(r["alpha"]) - alpha) < 1e-12))
            and r["estimate"] is not None and np.isfinite(r["estimate"])]


__all__ = ["COST", "CR2_UNCERTIFIED", "Comparison", "MEAN_SAVING", "QUESTIONS", "SAVING", "Side", "certified_side",
           "decomposition", "equal_risk_rows", "study_statistics", "uncertified_side"]
