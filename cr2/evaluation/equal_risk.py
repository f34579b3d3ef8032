"""Equal-risk comparison: every certified router at the same risk bound, and CR²'s result against a baseline split
into the quality of its score and the effect of calibrating its threshold.

A *side* is one λ sweep of one router: certified (`<router>@<rule>` at a fixed α — every point of its frontier has
risk ≤ α under the rule's risk) or uncertified (the router's own decision: a baseline's one-shot argmax of
p̂ − λĉ, `<router>@uncertified`; CR²'s gate at s ≥ 0.5, i.e. Δ̂ ≥ 0, method `cr2-fixed-0.5` — both accept the device
model exactly where their own estimated margin is ≥ 0). Each side's frontier gives its cost at every target
accuracy (cr2.evaluation.fixed_accuracy); a comparison is the paired saving of side A against side B at every target
and its mean over the target grid fixed from the validation split, on one bootstrap index shared by every side. Every
side is charged what a deployer pays (cr2.evaluation.fixed_accuracy.FallbackCost.charge): the lower of its own frontier
cost and the cheapest Always-model reaching the target on the same rows, so the statistic exists on every resample;
grid targets no Always-model reaches on the test set are left out of the mean, and which and why is stored beside it
(column dropped_targets).
Questions, for rule R at level α:

- gate-quality:          CR² uncertified vs B uncertified — which score routes cheaper with no guarantee;
- calibrated-vs-default: X@R at α vs X uncertified, for X = CR² and every B — what moving from the router's default
                         threshold to the calibrated one does to cost (a change of decision rule, not a price paid
                         at equal risk: it can come out either way);
- certified-score:       CR²@R vs B@R at the same α — which score certifies cheaper at equal risk;
- pairwise:              every ordered pair of certified routers at R and the default α — stored for the router study,
                         whose pre-registered estimand it is (a candidate against the reference); its family holds both
                         orders of every pair.

Which router to deploy is cr2.evaluation.deploy's rule over the same side costs (question "deploy").

Family (docs/guarantees.md, "One family rule"; cr2.evaluation.families): the mean savings of one scenario × question ×
rule × α are one family, its per-target savings another; each p comes from its own bootstrap distribution
(cr2.evaluation.statistics.bootstrap_p_values), is Holm-adjusted over its family, and a direction word needs the Holm
p < 0.05 (which implies the interval excludes 0). Every row stores its family, the family's size, p, Holm p and that
one word (`verdict`); the interval's own word is `verdict_uncorrected`, never printed as a conclusion.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from cr2.evaluation.families import annotate, equal_risk_family
from cr2.evaluation.statistics import bootstrap_intervals
from cr2.routers.certify import UNCERTIFIED, certified_name
from cr2.evaluation.fixed_accuracy import (FallbackCost, MethodOutcomes, cost_samples, grid_columns, saving_pct,
                                          stacked_points)

if TYPE_CHECKING:
    import pandas as pd

SUBJECT = "cr2"
CR2_UNCERTIFIED = "cr2-fixed-0.5"  # CR²'s gate without a calibrated threshold: accept where s ≥ 0.5 (Δ̂ ≥ 0)

QUESTIONS = ("gate-quality", "calibrated-vs-default", "certified-score")  # what the results surfaces show
PAIRWISE = "pairwise"  # every ordered pair at the default α: the router study's estimand, stored, not a results question
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
    against: str  # the router of side b, or 'uncertified' (calibrated-vs-default)
    rule: str | None
    alpha: float | None
    a: Side
    b: Side


def uncertified_side(router: str) -> Side:
    """A router's own decision with no guarantee (see the module docstring)."""
    return Side(CR2_UNCERTIFIED if router == SUBJECT else certified_name(router, UNCERTIFIED), None)


def certified_side(router: str, rule: str, alpha: float) -> Side:
    return Side(certified_name(router, rule), float(alpha))


def decomposition(routers: Sequence[str], rules: Sequence[str], alphas: Sequence[float],
                  pairwise_alpha: float | None = None) -> list[Comparison]:
    """The comparisons of the questions for CR² against every other router of `routers` (certified ones), and with
    `pairwise_alpha` (the default α) every ordered pair of certified routers at it — PAIRWISE, the router study's
    pre-registered estimand (a candidate's saving against the reference, configs/studies/router-study.yaml). Which
    router to deploy is neither: cr2.evaluation.deploy tests every unordered pair of candidates on an antisymmetric
    estimand."""
    baselines = [r for r in routers if r != SUBJECT]
    out = [Comparison("gate-quality", SUBJECT, b, None, None, uncertified_side(SUBJECT), uncertified_side(b))
           for b in baselines]
    for rule in rules:
        for alpha in alphas:
            out += [Comparison("calibrated-vs-default", r, UNCERTIFIED, rule, float(alpha),
                               certified_side(r, rule, alpha), uncertified_side(r)) for r in [SUBJECT, *baselines]]
            out += [Comparison("certified-score", SUBJECT, b, rule, float(alpha), certified_side(SUBJECT, rule, alpha),
                               certified_side(b, rule, alpha)) for b in baselines]
        if pairwise_alpha is not None:  # both orders: a saving is a ratio, so b over a is not −(a over b)
            ordered = [SUBJECT, *baselines] if SUBJECT in routers else list(baselines)
            out += [Comparison(PAIRWISE, a, b, rule, float(pairwise_alpha), certified_side(a, rule, pairwise_alpha),
                               certified_side(b, rule, pairwise_alpha))
                    for a in ordered for b in ordered if a != b]
    return out


def no_device_side(router: str) -> Side:
    """A router with the device switched off (τ = +∞): no α, its risk is 0 under every rule."""
    from cr2.evaluation.deploy import NO_DEVICE

    return Side(certified_name(router, NO_DEVICE), None)


def side_costs(outcomes: Mapping[Side, MethodOutcomes], targets: np.ndarray, counts: np.ndarray,
               fallback: FallbackCost, fallbacks: Mapping[Side, FallbackCost] | None = None
               ) -> tuple[dict[Side, tuple[np.ndarray, np.ndarray]], dict[Side, tuple[np.ndarray, np.ndarray]]]:
    """(own, cost) per side: its frontier's cost at `targets` on the full test set [t] and on each resample [B, t]
    (own: NaN where the frontier misses; cost: what it is charged, FallbackCost.charge of `fallbacks[side]` where
    given — e.g. the edge-only Always-models for a side without a device — else of `fallback`: the lower of its own
    and the cheapest Always-model reaching the target), from one stacked product over every side."""
    t = np.asarray(targets, dtype=np.float64)
    sides = list(outcomes)
    points = stacked_points([outcomes[s] for s in sides], counts)
    own = {side: cost_samples(outcomes[side], t, counts, points=p) for side, p in zip(sides, points)}
    cost = {}
    for side, (e, r) in own.items():
        fb = (fallbacks or {}).get(side, fallback)
        cost[side] = fb.charge(e, r)
    return own, cost


def _rows(c: Comparison | None, side: Side, metric: str, targets: list, estimates: np.ndarray, samples: np.ndarray,
          level: float, *, router: str | None = None, rule: str | None = None) -> list[dict[str, Any]]:
    """One tidy row per column of samples [B, k] (a statistic per target, or one mean), its interval and p from one
    vectorised pass over the resamples (cr2.evaluation.statistics.bootstrap_intervals)."""
    est = np.asarray(estimates, dtype=np.float64).reshape(-1)
    lower, upper, p = bootstrap_intervals(np.asarray(samples, dtype=np.float64).reshape(len(samples), -1), est, level)
    base = {"question": "cost" if c is None else c.question, "router": router if c is None else c.router,
            "against": None if c is None else c.against, "rule": rule if c is None else c.rule,
            "alpha": side.alpha if c is None else c.alpha, "method_a": side.method,
            "method_b": None if c is None else c.b.method, "metric": metric, "n_resamples": int(len(samples)),
            "n_targets": None, "dropped_targets": None, "p_holm": None}
    return [{**base, "target": None if t is None else round(float(t), 6), "estimate": float(e), "lower": float(lo),
             "upper": float(hi), "p_value": float(pv),
             "verdict": None}
            for t, e, lo, hi, pv in zip(targets, est, lower, upper, p)]


def equal_risk_rows(outcomes: Mapping[Side, MethodOutcomes], comparisons: Sequence[Comparison],
                    cost_sides: Mapping[Side, tuple[str, str | None]], targets: np.ndarray, counts: np.ndarray,
                    fallback: FallbackCost, grid: np.ndarray, level: float = 0.95,
                    costs: tuple[dict, dict] | None = None) -> list[dict[str, Any]]:
    """Tidy rows: each side of `cost_sides` ({side: (router, rule)}) — what it is charged at every target its frontier
    reaches on the full test set — and each comparison whose two sides were evaluated — its saving at every target and
    its mean over `grid` less the targets no Always-model reaches on the test set (FallbackCost.reachable_grid;
    n_targets = the targets kept, dropped_targets = which were left out and why), with the bootstrap p, its family
    (cr2.evaluation.families.equal_risk_family), the family's size, the Holm-adjusted p over it and the one word it
    allows. counts: [B, n] resample counts over the test
    rows, the evaluation's shared index; fallback: the Always-model cost at `targets` on the same resamples; costs:
    side_costs(…) when the caller computed it already."""
    t = np.asarray(targets, dtype=np.float64)
    kept = fallback.reachable_grid(grid)
    cols = grid_columns(t, kept.targets)
    own, cost = costs if costs is not None else side_costs(outcomes, t, counts, fallback)
    rows: list[dict[str, Any]] = []
    for side, (router, rule) in cost_sides.items():
        if side in cost:
            est, samples = cost[side]
            reached = np.flatnonzero(np.isfinite(own[side][0]))
            if reached.size:
                rows += _rows(None, side, COST, list(t[reached]), est[reached], samples[:, reached], level,
                              router=router, rule=rule)
    means: list[dict[str, Any]] = []
    for c in comparisons:
        if c.a not in cost or c.b not in cost:
            continue
        est, samples = saving_pct(cost[c.a][0], cost[c.b][0]), saving_pct(cost[c.a][1], cost[c.b][1])
        rows += _rows(c, c.a, SAVING, list(t), est, samples, level)
        row = _rows(c, c.a, MEAN_SAVING, [None], np.array([est[cols].mean()]), samples[:, cols].mean(axis=1), level)[0]
        means.append({**row, "n_targets": int(cols.size), "dropped_targets": kept.reason})
    return annotate(rows + means, equal_risk_family, level)  # the one family rule (cr2.evaluation.families)


def study_statistics(rows: Sequence[Mapping[str, Any]], alpha: float) -> list[dict[str, Any]]:
    """The statistics a study keeps of one run's equal-risk rows (a pool, a seed): every mean saving of gate quality,
    and of the other questions at level `alpha` — one number per comparison, with its interval, its bootstrap p and
    the resamples it rests on (all of them), and its stored family, Holm p and word (the run's own: a study prints them,
    it never re-corrects them)."""
    return [{"question": r["question"], "method_a": r["method_a"], "method_b": r["method_b"], "rule": r["rule"],
             "alpha": r["alpha"], "estimate": r["estimate"], "lower": r["lower"], "upper": r["upper"],
             "n_targets": r["n_targets"], "n_resamples": r.get("n_resamples"), "p_value": r.get("p_value"),
             "family": r.get("family"), "family_size": r.get("family_size"), "p_holm": r.get("p_holm"),
             "verdict": r.get("verdict")}
            for r in rows if r["metric"] == MEAN_SAVING
            and (r["question"] == "gate-quality" or (r["alpha"] is not None and abs(float(r["alpha"]) - alpha) < 1e-12))
            and r["estimate"] is not None and np.isfinite(r["estimate"])]


__all__ = ["COST", "CR2_UNCERTIFIED", "Comparison", "MEAN_SAVING", "QUESTIONS", "SAVING", "Side", "certified_side",
           "PAIRWISE", "decomposition", "equal_risk_rows", "no_device_side", "side_costs", "study_statistics",
           "uncertified_side"]


def side_rule(side: str) -> str:
    """The calibration rule of an equal-risk side ('knn@crc' → 'crc'); '–' for an uncertified or rule-less side."""
    return side.split("@", 1)[1] if "@" in side and not side.endswith("@uncertified") else "–"


def seed_spread(rows: pd.DataFrame) -> pd.DataFrame:
    """The equal-risk savings of a seed study over its seeds (seed_results rows `equal-risk:<question>`: metric,
    method 'a vs b', alpha, value per seed): per (question, comparison, α) of a question still asked (QUESTIONS),
    the mean, the sample sd and the number of seeds with a finite saving — two at least — in sorted order, with the
    rule of side a and a family key for α (alpha_key: −1 where a comparison has no α). The input of
    cr2.evaluation.families.over_seeds."""
    import pandas as pd

    out = []
    for (metric, method, alpha), g in rows.groupby(["metric", "method", "alpha"], dropna=False, sort=True):
        question = metric.split(":", 1)[1]
        if question not in QUESTIONS:
            continue  # a question a seed stored that is no longer asked (the deploy rule's former ordered pairs)
        v = g["value"].to_numpy(dtype=float)
        v = v[np.isfinite(v)]
        if v.size < 2:
            continue
        out.append({"question": question, "rule": side_rule(method.split(" vs ", 1)[0]), "comparison": method,
                    "alpha": alpha, "alpha_key": -1.0 if pd.isna(alpha) else float(alpha),
                    "seed_mean": float(v.mean()), "seed_sd": float(v.std(ddof=1)), "n_seeds": int(v.size)})
    return pd.DataFrame(out)
