"""Section "Measured scenario (MMLU-Pro)": the newest evaluation run of the measured warehouse — models, CR² at α,
the fixed-accuracy comparison counted in interval words, the pooled Pareto frontier, CR²'s risk against α over
re-splits, the local rate over λ and per-category accuracy at three cost targets."""
from __future__ import annotations

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.report.markdown import markdown_table
from cr2.routers import routers_tagged
from cr2.report.headline import COST_ANCHOR, LAMS
from cr2_cli.resultsdoc.core import HOMES, Doc
from cr2_cli.resultsdoc.scenario_stats import Scenario, banner, load, name, router_target_rows, target_family

KEY = "mmlu-pro"
TITLE = "## Measured scenario (MMLU-Pro)"
FRONTIER = routers_tagged("paper")  # the routers pooled into the Pareto frontier (router catalogue)


def render(doc: Doc) -> str:
    s = load(doc, KEY)
    if s is None:
        return f"{TITLE}\n\n" + doc.missing(KEY, "the measured run")
    from cr2_warehouse.reads import model_summary
    from cr2_warehouse.repository import headline_results, view_for_run

    with doc.warehouse(KEY) as wh:
        models = model_summary(wh, s.source, s.run["dist_id"], int(s.run.get("split_seed") or 0))
        ops = view_for_run(wh, "operating_points", s.run_id)
        ops = ops[ops["benchmark"] == "all"]
        risk = view_for_run(wh, "v_risk_vs_alpha", s.run_id)
        local = view_for_run(wh, "v_local_rate", s.run_id)
        at_cost = view_for_run(wh, "v_benchmark_at_cost", s.run_id)
        by_cat = view_for_run(wh, "v_subset_at_cost", s.run_id)
        ca = headline_results(wh, s.run_id, targets=(), cost_anchor=COST_ANCHOR, alpha=s.alpha,
                              lams=LAMS)["cost_assumptions"]
    models = models.groupby("model_id", sort=False).first().reset_index() if len(models) else models
    cr2 = ops[(ops["method"] == "cr2") & np.isclose(ops["alpha"].fillna(-1), s.alpha)]
    return "\n\n".join([header(s), shows(s, models, ca),
                        models_part(models), cr2_part(cr2, s.alpha), fixed_part(doc, s), pareto_part(ops),
                        risk_part(doc, risk), local_part(local, s.alpha), category_part(at_cost, by_cat)]) + "\n"


def header(s: Scenario) -> str:
    n_risk, n_solv = s.test_sizes()
    home, make = HOMES[KEY]
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
    t = pd.DataFrame({"model": models["model_id"], "accuracy": models["accuracy"].map("{:.3f}".format),
                      "mean norm. cost": models["mean_cost_norm"].map("{:.3f}".format),
                      "latency s": models["mean_latency_s"].map("{:.2f}".format),
                      "energy J": models["mean_energy_j"].map("{:.1f}".format)})
    return ("**Models on all questions** (model_summary; accuracy is the mean of the measured `correct`):\n\n"
            + markdown_table(t).rstrip())


def cr2_part(cr2: pd.DataFrame, alpha: float) -> str:
    rows = cr2[cr2["lam"].isin(HEADLINE_LAMS)].sort_values("lam")
    t = pd.DataFrame({"λ": rows["lam"].map("{:g}".format), "false-accept risk": rows["risk"].map("{:.4f}".format),
                      "risk, all test rows": rows["risk_all"].map("{:.4f}".format),
                      "local rate": rows["local_rate"].map("{:.1%}".format),
                      "accuracy": rows["accuracy"].map("{:.3f}".format), "cost": rows["cost"].map("{:.3f}".format)})
    return (f"**CR² on test at α = {alpha:g}** (operating_points; risk, local rate, accuracy and cost over the test "
            "queries some model solves, the paper's test set; risk also over all test rows; intervals: the section "
            "above):\n\n" + markdown_table(t, why="no CR² point at the headline λ").rstrip())


def fixed_part(doc: Doc, s: Scenario) -> str:
    tf = target_family(doc, s)
    rows = router_target_rows(tf, "targets reached with KNN", "median saving %")
    from cr2_cli.resultsdoc.pools import family_sizes

    n = family_sizes(tf) if len(tf) else "0"
    return (f"**Fixed-accuracy cost saving vs KNN, counted in words** (v_fixed_accuracy_ci: the interpolated monotone "
            f"frontier, targets 0.50 … 0.99 that both the router and KNN reach; positive saving = lower cost than KNN; "
            f"each target's word its test's stored one: the 95 % interval and Holm over the {n} tests of every "
            f"target × learned router):\n\n" + markdown_table(pd.DataFrame(rows), why="no learned router reaches a target with KNN").rstrip())


def frontier_segments(points: pd.DataFrame) -> list[tuple[str, float, float]]:
    """The pooled accuracy–cost frontier over every learned method's points: (method, cost from, cost to) runs."""
    p = points.sort_values(["cost", "accuracy"], ascending=[True, False])
    best, rows = -np.inf, []
    for r in p.itertuples():
        if r.accuracy > best + 1e-12:
            rows.append((r.method, r.cost))
            best = r.accuracy
    segments: list[list] = []
    for method, cost in rows:
        if segments and segments[-1][0] == method:
            segments[-1][2] = cost
        else:
            segments.append([method, cost, cost])
    return [tuple(x) for x in segments]


def pareto_part(ops: pd.DataFrame) -> str:
    segs = frontier_segments(ops[ops["method"].isin(FRONTIER)][["method", "accuracy", "cost"]])
    t = pd.DataFrame([{"router": name(m), "cost from": f"{a:.3f}", "cost to": f"{b:.3f}"} for m, a, b in segs])
    per = {m: [x for x in segs if x[0] == m] for m in FRONTIER}
    line = "; ".join(f"{name(m)} {len(v)} stretch(es)" + (f" between cost {min(a for _, a, _ in v):.3f} and "
                                                           f"{max(b for _, _, b in v):.3f}" if v else "")
                     for m, v in per.items())
    return (f"**Pareto frontier** (operating_points of the {len(FRONTIER)} routers pooled, CR² over every α; the "
            "upper-left envelope, cost ranges where each router defines it; points of one run, no interval):\n\n"
            + markdown_table(t, why="no operating points").rstrip() + f"\n\nStretches of the pooled frontier: {line}.")


def risk_part(doc: Doc, risk: pd.DataFrame) -> str:
    r = risk[risk["lam"].isin(HEADLINE_LAMS)].sort_values(["lam", "alpha"])
    if r.empty:
        return "_(no CR² risk rows at the headline λ)_"
    t = pd.DataFrame({"λ": r["lam"].map("{:g}".format), "α": r["alpha"].map("{:g}".format),
                      "test risk": r["risk"].map("{:.4f}".format),
                      "re-split mean ± MC se": [f"{m:.4f} ± {se:.4f}" if pd.notna(m) else "–"
                                                for m, se in zip(r["risk_mean"], r["risk_se"])],
                      "5–95 %": [f"{a:.4f}–{b:.4f}" if pd.notna(a) else "–" for a, b in zip(r["risk_q05"], r["risk_q95"])]})
    every = risk.dropna(subset=["risk_mean"])
    lines = "; ".join(f"α = {a:g}: {doc.bound(g['risk_mean'], g['risk_se'], a)} over the {len(g)} λ (one-sided test "
                      f"per λ, Holm over them)" for a, g in every.groupby("alpha"))
    return ("**CR² risk vs α** (v_risk_vs_alpha: test false-acceptance risk over all test rows, and the mean, "
            "Monte-Carlo standard error and 5–95 % band over the random calibration/test re-splits stored with the "
            "run; the promise is E[risk] ≤ α at every λ):\n\n" + markdown_table(t).rstrip()
            + (f"\n\nAt every λ of the sweep: {lines}." if lines else ""))


def local_part(local: pd.DataFrame, alpha: float) -> str:
    lr = local[(local["method"] == "cr2") & np.isclose(local["alpha"].fillna(-1), alpha)].sort_values("lam")
    t = pd.DataFrame({"λ": lr["lam"].map("{:g}".format), "local rate": lr["local_rate"].map("{:.1%}".format)})
    return f"**Local rate vs λ** (v_local_rate, CR² at α = {alpha:g}):\n\n" + markdown_table(t, why="no CR² rows").rstrip()


def category_part(at_cost: pd.DataFrame, by_cat: pd.DataFrame) -> str:
    if by_cat.empty:
        return "_(no per-category rows: v_subset_at_cost is empty for this run)_"
    tab = by_cat[by_cat["method"].isin(["cr2", "knn"])].copy()
    tab["cell"] = [f"{a:.3f}" + ("" if ok else " (–)") for a, ok in zip(tab["accuracy"], tab["reachable"])]
    wide = tab.pivot_table(index="subset", columns=["target", "method"], values="cell", aggfunc="first")
    wide.columns = [f"{name(m)} @ c̄≈{t:.2f}" for t, m in wide.columns]
    ac = at_cost[(at_cost["benchmark"] == "all") & at_cost["method"].isin(["cr2", "knn"])]
    pooled = {f"{name(m)} @ c̄≈{t:.2f}": f"{a:.3f}" + ("" if ok else " (–)")
              for m, t, a, ok in zip(ac["method"], ac["target"], ac["accuracy"], ac["reachable"])}
    wide = wide.reset_index().rename(columns={"subset": "category"})
    wide = pd.concat([wide, pd.DataFrame([{"category": "**all**", **pooled}])], ignore_index=True)
    targets = " / ".join(f"{t:.2f}" for t in sorted(tab["target"].unique()))
    return (f"**Per-category accuracy at three cost targets** (v_subset_at_cost / v_benchmark_at_cost: each router's "
            f"operating point whose pooled cost is nearest {targets}; (–): the target lies outside the router's cost "
            "range, nearest point shown; one run, no interval):\n\n" + markdown_table(wide.fillna("–")).rstrip())
