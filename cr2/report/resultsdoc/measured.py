"""Section "Measured scenario (MMLU-Pro)": the newest evaluation run of the measured warehouse — models, CR² at α,
the fixed-accuracy comparison counted in interval words, the pooled Pareto frontier, CR²'s risk against α over
re-splits, the local rate over λ and per-category accuracy at three cost targets."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.evaluation.fixed_accuracy import frontier_segments
from cr2.report.intervals import RouterTargetCounts
from cr2.report.measured import (CategoryAccuracy, FrontierSegments, LocalRate, ModelSummary, OperatingPoints,
                                 RiskVsAlpha)
from cr2.report.pools import family_sizes
from cr2.report.resultsdoc.scenario import learned, Scenario, banner, name, target_family
from cr2.report.resultsdoc.words import PLAIN, Words, homes, missing
from cr2.routers import routers_tagged

KEY = "mmlu-pro"
TITLE = "## Measured scenario (MMLU-Pro)"
def frontier() -> tuple[str, ...]:
    """The routers pooled into the Pareto frontier (the catalogue's `paper` tag, read when a page renders)."""
    return routers_tagged("paper")


@dataclass(frozen=True)
class MeasuredData:
    """The measured scenario (None: no warehouse or run) and the views of its run the section shows."""

    scenario: Scenario | None
    models: pd.DataFrame | None = None  # model_summary of the run's label source, states and split
    points: pd.DataFrame | None = None  # operating_points, pooled over benchmarks
    risk: pd.DataFrame | None = None  # v_risk_vs_alpha
    local: pd.DataFrame | None = None  # v_local_rate
    at_cost: pd.DataFrame | None = None  # v_benchmark_at_cost
    by_category: pd.DataFrame | None = None  # v_subset_at_cost
    cost_assumptions: pd.DataFrame | None = None  # v_cost_assumptions (headline_results)


def render(data: MeasuredData, words: Words = PLAIN) -> str:
    s = data.scenario
    if s is None:
        return f"{TITLE}\n\n" + missing(KEY, "the measured run")
    models, ops, ca = data.models, data.points, data.cost_assumptions
    models = models.groupby("model_id", sort=False).first().reset_index() if len(models) else models
    cr2 = ops[(ops["method"] == "cr2") & np.isclose(ops["alpha"].fillna(-1), s.alpha)]
    return "\n\n".join([header(s), shows(s, models, ca),
                        models_part(models), cr2_part(cr2, s.alpha), fixed_part(words, s), pareto_part(ops),
                        risk_part(words, data.risk), local_part(data.local, s.alpha),
                        category_part(data.at_cost, data.by_category)]) + "\n"


def header(s: Scenario) -> str:
    n_risk, n_solv = s.test_sizes()
    home, make = homes()[KEY]
    return (f"{TITLE}\n\n{banner(s)} Label source `{s.source}` (the MMLU-Pro authors' published outputs; "
            f"docs/measured.md). Warehouse `{home}` ({sum(s.queries.values()):,} questions), built by `{make}`; "
            f"evaluation run `{s.run_id}` — the one run every table of this section shows; test: {n_risk:,} queries "
            f"for the risk, {n_solv:,} that some model solves for accuracy, cost and local rate. From the views "
            f"model_summary, operating_points, v_fixed_accuracy_ci, v_risk_vs_alpha, v_local_rate, v_benchmark_at_cost "
            f"and v_subset_at_cost; `make results-doc` prints this page.")


def shows(s: Scenario, models: pd.DataFrame, ca: pd.DataFrame) -> str:
    out = []
    if len(ca):
        out.append(f"The device model costs more than the cheapest edge model on "
                   f"{100 * ca['device_dearer_share_estimated'].iloc[0]:.0f} % of (query, state) rows under the "
                   f"pre-execution estimate ĉ and on {100 * ca['device_dearer_share_realised'].iloc[0]:.0f} % under the "
                   f"realised cost (v_cost_assumptions); on those rows the paper's premise that answering locally is "
                   f"the cheap option is not met.")
    if len(models) >= 3:
        dev, edge = models.iloc[0], models.iloc[1:-1]
        cheap = edge.loc[edge["mean_cost_norm"].idxmin()]
        out.append(f"On all questions the device model {dev['model_id']} has normalised cost "
                   f"{dev['mean_cost_norm']:.3f} at accuracy {dev['accuracy']:.3f}; the cheapest edge model, "
                   f"{cheap['model_id']}, {cheap['mean_cost_norm']:.3f} at {cheap['accuracy']:.3f} (model_summary).")
    out.append("How CR² and the other learned routers compare with KNN, with intervals, Holm and the seeds: the "
               "measured part of the intervals section above (the mean savings are printed there only).")
    return "**What it shows.** " + " ".join(out)


def models_part(models: pd.DataFrame) -> str:
    if models.empty:
        return "_(no model_summary rows for this run's label source and states)_"
    return ("**Models on all questions** (model_summary; accuracy is the mean of the measured `correct`):\n\n"
            + ModelSummary(models).markdown().rstrip())


def cr2_part(cr2: pd.DataFrame, alpha: float) -> str:
    return (f"**CR² on test at α = {alpha:g}** (operating_points; risk, local rate, accuracy and cost over the test "
            "queries some model solves, the paper's test set; risk also over all test rows; intervals: the section "
            "above):\n\n" + OperatingPoints(cr2, HEADLINE_LAMS).markdown().rstrip())


def fixed_part(w: Words, s: Scenario) -> str:
    tf = target_family(w, s)
    table = RouterTargetCounts(tf, learned(), "targets reached with KNN", "median saving %",
                               why="no learned router reaches a target with KNN")
    n = family_sizes(tf) if len(tf) else "0"
    return (f"**Fixed-accuracy cost saving vs KNN, counted in words** (v_fixed_accuracy_ci: the interpolated monotone "
            f"frontier, targets 0.50 … 0.99 that both the router and KNN reach; positive saving = lower cost than KNN; "
            f"each target's word its test's stored one: the 95 % interval and Holm over the {n} tests of every "
            f"target × learned router):\n\n" + table.markdown().rstrip())


def pareto_part(ops: pd.DataFrame) -> str:
    segs = frontier_segments(ops[ops["method"].isin(frontier())][["method", "accuracy", "cost"]])
    per = {m: [x for x in segs if x[0] == m] for m in frontier()}
    line = "; ".join(f"{name(m)} {len(v)} stretch(es)" + (f" between cost {min(a for _, a, _ in v):.3f} and "
                                                           f"{max(b for _, _, b in v):.3f}" if v else "")
                     for m, v in per.items())
    return (f"**Pareto frontier** (operating_points of the {len(frontier())} routers pooled, CR² over every α; the "
            "upper-left envelope, cost ranges where each router defines it; points of one run, no interval):\n\n"
            + FrontierSegments(segs).markdown().rstrip() + f"\n\nStretches of the pooled frontier: {line}.")


def risk_part(w: Words, risk: pd.DataFrame) -> str:
    r = risk[risk["lam"].isin(HEADLINE_LAMS)].sort_values(["lam", "alpha"])
    if r.empty:
        return "_(no CR² risk rows at the headline λ)_"
    every = risk.dropna(subset=["risk_mean"])
    lines = "; ".join(f"α = {a:g}: {w.bound(g['risk_mean'], g['risk_se'], a)} over the {len(g)} λ (one-sided test "
                      f"per λ, Holm over them)" for a, g in every.groupby("alpha"))
    return ("**CR² risk vs α** (v_risk_vs_alpha: test false-acceptance risk over all test rows, and the mean, "
            "Monte-Carlo standard error and 5–95 % band over the random calibration/test re-splits stored with the "
            "run; the promise is E[risk] ≤ α at every λ):\n\n" + RiskVsAlpha(risk, HEADLINE_LAMS).markdown().rstrip()
            + (f"\n\nAt every λ of the sweep: {lines}." if lines else ""))


def local_part(local: pd.DataFrame, alpha: float) -> str:
    return (f"**Local rate vs λ** (v_local_rate, CR² at α = {alpha:g}):\n\n"
            + LocalRate(local, alpha).markdown().rstrip())


def category_part(at_cost: pd.DataFrame, by_cat: pd.DataFrame) -> str:
    if by_cat.empty:
        return "_(no per-category rows: v_subset_at_cost is empty for this run)_"
    t = CategoryAccuracy(at_cost, by_cat)
    targets = " / ".join(f"{x:.2f}" for x in t.targets)
    return (f"**Per-category accuracy at three cost targets** (v_subset_at_cost / v_benchmark_at_cost: each router's "
            f"operating point whose pooled cost is nearest {targets}; (–): the target lies outside the router's cost "
            "range, nearest point shown; one run, no interval):\n\n" + t.markdown().rstrip())
