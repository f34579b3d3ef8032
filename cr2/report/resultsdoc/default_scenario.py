"""Section "Default scenario: the paper's protocol, paper beside ours": the full default run's tables (the ones `cr2
results --paper` prints) and the paper's numbers beside ours, every word from a stored interval (Holm over every
target × router, scenario.target_family) or a Monte-Carlo bound."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from cr2.report.cells import ci_cell
from cr2.report.headline import COST_ANCHOR, PAPER_SAVING_VS_KNN, PAPER_TARGETS, points_table
from cr2.report.intervals import RouterTargetCounts
from cr2.report.markdown import markdown_table
from cr2.report.resultsdoc.scenario import learned, Scenario, banner, num, target_family
from cr2.report.resultsdoc.words import PLAIN, Words, homes, missing
from cr2.report.table import rows_where as pick

KEY = "default"


@dataclass(frozen=True)
class DefaultData:
    """The default scenario (None: no warehouse or run) and what the section reads of its run."""

    scenario: Scenario | None
    headline: dict | None = None  # cr2_warehouse.repository.headline_results at the paper's targets and anchor
    risk: pd.DataFrame | None = None  # v_risk_vs_alpha of the run
    pool: tuple[str, ...] = ()  # the pool's models (pool order)
    paper: dict | None = None  # the paper-beside-ours frames `cr2 results --paper` prints (cr2_cli.results)


def render(data: DefaultData, words: Words = PLAIN) -> str:
    s = data.scenario
    if s is None:
        return "## Default scenario: the paper's protocol, paper beside ours\n\n" + missing(KEY, "the default run")
    f, risk, cmp = data.headline, data.risk, data.paper
    tf = target_family(words, s)
    return "\n\n".join([intro(s, list(data.pool)), full_run(s, f, tf), beside(words, s, f, cmp, tf, risk),
                        "### What the protocol change did\n\nThe before/after table of the protocol change "
                        " was measured on runs made by code older than this warehouse, which are not stored; "
                        "it is in the git history of docs/results.md before the page was generated."]) + "\n"


def intro(s: Scenario, pool: list[str]) -> str:
    n_risk, n_solv = s.test_sizes()
    home, make = homes()[KEY]
    sizes = ", ".join(f"{b} {n:,}" for b, n in s.queries.items())
    what = ("none is a measurement of these models" if s.kind == "SIMULATED"
            else "measured correctness of these models")
    return (f"## Default scenario ({s.kind} labels): the paper's protocol, paper beside ours\n\n"
            f"{banner(s)} Every number in this section comes from the label source `{s.source}` "
            f"(docs/labels.md) on the pool {' / '.join(pool)}: {what}.\n\n"
            f"**Which data.** Warehouse `{home}` ({sum(s.queries.values()):,} queries: {sizes}), built by `{make}`; "
            f"evaluation run `{s.run_id}`, states `{s.run['dist_id']}`, decision cost `{s.run['decision_cost']}`; "
            f"{n_risk:,} test queries, of which some model solves {n_solv:,} (the paper's test set: accuracy, cost and "
            f"local rate are over these). `cr2 results --paper --home {home}` prints these tables from the warehouse "
            f"(views `v_fixed_accuracy_ci`, `operating_points`, `v_ablation`, `v_gate_errors`, "
            f"`v_router_complexity`, `v_cost_assumptions`); `make results-doc` prints this page. Which differences "
            f"are detected is read off the intervals of the section above.")


def full_run(s: Scenario, f: dict, tf: pd.DataFrame) -> str:
    ca = f["cost_assumptions"]
    dearer = (f"{100 * ca['device_dearer_share_estimated'].iloc[0]:.1f} % of (query, state) rows under ĉ (routing), "
              f"{100 * ca['device_dearer_share_realised'].iloc[0]:.1f} % under c (realised)") if len(ca) else "–"
    fa = f["fixed_accuracy"]
    grid = fa.pivot_table(index="target", columns="method", values="saving_vs_knn_grid_pct").round(1).reset_index()
    ab = f["ablation"][["method", "alpha", "lam", "accuracy", "cost", "local_rate"]].sort_values(["method", "alpha"])
    return "\n\n".join([
        f"### The full default run ({s.kind}, `{s.source}`)",
        f"_{s.kind} labels (label source `{s.source}`); run `{s.run_id}`, states `{s.run['dist_id']}`, decision cost "
        f"`{s.run['decision_cost']}`._",
        f"Device model costs more than the cheapest edge model (v_cost_assumptions): {dearer}.",
        "The fixed-accuracy savings at the paper's targets on the interpolated monotone frontier, with their intervals "
        "and words, are in the table of the section above and in \"Paper beside ours\" below.",
        "**Fixed-accuracy saving vs KNN, % — rule: the best grid point with accuracy ≥ target, no interpolation** "
        "(v_fixed_accuracy.saving_vs_knn_grid_pct; no interval is stored for this rule, so these numbers carry no word)",
        markdown_table(grid, 3, "no router reaches the paper's targets together with KNN").rstrip(),
        f"**CR² local rate at c̄ ≈ {COST_ANCHOR} per α (operating_points: the point whose pooled cost is nearest)**",
        markdown_table(f["local_at_cost"]).rstrip(),
        f"**CR² at α = {s.alpha:g} [95 % CI] (v_operating_points_ci, v_gate_errors)**",
        markdown_table(points_table(f["operating_points"], ("lam", "alpha"))).rstrip(),
        f"**Largest local rate and smallest cost over the λ sweep, α = {s.alpha:g} (operating_points)**",
        markdown_table(f["sweep"]).rstrip(),
        f"**Ablation at c̄ ≈ {COST_ANCHOR} (v_ablation)**", markdown_table(ab).rstrip(),
        "**Router complexity (v_router_complexity)**", markdown_table(f["complexity"][["kind", "params", "flops"]]).rstrip(),
        summary(s, tf)])


def summary(s: Scenario, tf: pd.DataFrame) -> str:
    """Per learned router over every target both reach: the median saving, the counts of per-target words (Holm over
    every target × router) and the grid-point mean. The mean saving with its interval is printed once, in
    the intervals section."""
    table = RouterTargetCounts(tf, learned(), "targets both reach", "median saving, interpolated %", lambda g: {
        "mean saving, grid-point rule % (no interval)": num(g["saving_vs_knn_grid_pct"].mean())})
    lo, hi = (tf["target"].min(), tf["target"].max()) if len(tf) else (np.nan, np.nan)
    return (f"**Fixed-accuracy saving vs KNN over every target both reach** (v_fixed_accuracy_ci, targets "
            f"{num(lo, '.2f')} … {num(hi, '.2f')} in steps of 0.01; interpolated monotone frontier unless a column "
            f"names the grid-point rule; the mean over these targets with its interval: the section above)\n\n"
            + table.markdown().rstrip())


def beside(w: Words, s: Scenario, f: dict, cmp: dict, tf: pd.DataFrame, risk: pd.DataFrame) -> str:
    fixed = cmp["fixed"].iloc[:, :4].copy()  # target, paper, ours interpolated [CI], ours grid
    cr2 = tf[tf["method"] == "cr2"]
    holm = []
    for t in fixed["target accuracy"]:
        r = pick(cr2, target=float(t))
        holm.append(r["word_holm"].iloc[0] if len(r) else "– (not stored at this target)")
    fixed.insert(3, "word (Holm over every target × router)", holm)
    fixed = fixed.rename(columns={"ours CR² vs KNN % (grid)": "ours CR² vs KNN % (grid-point rule, no interval)"})
    return "\n\n".join([
        f"### Paper beside ours ({s.kind}, `{s.source}`, run `{s.run_id}`)",
        "The paper's values are copied from the paper (§VII; the .tex line of each is cited in `cr2/report/headline.py`). "
        "The paper gives fixed-accuracy savings only against KNN and no per-benchmark sizes or model accuracies.",
        "**Fixed-accuracy cost saving vs KNN, CR² (v_fixed_accuracy_ci; interpolated monotone frontier unless the "
        "column names the grid-point rule)** — the other routers at these targets, with their words: the section above",
        markdown_table(fixed).rstrip(),
        f"**Local rate at c̄ ≈ {COST_ANCHOR} (paper tab:ablation; ours: operating_points / v_ablation)**",
        markdown_table(cmp["local"]).rstrip(),
        f"**Gate-error decomposition at α = {s.alpha:g} (paper fig:misdefer; ours: v_gate_errors at the λ whose pooled "
        f"cost is nearest c̄)**", markdown_table(cmp["gate_errors"]).rstrip(),
        "**Router complexity (paper tab:router_complexity; ours: v_router_complexity)**",
        markdown_table(cmp["complexity"]).rstrip(),
        reading(w, s, f, cmp, cr2, risk)])


def reading(words: Words, s: Scenario, f: dict, cmp: dict, cr2: pd.DataFrame, risk: pd.DataFrame) -> str:
    lines = []
    at = [pick(cr2, target=float(t)) for t in PAPER_TARGETS]
    cells = [f"{t:.2f}: {ci_cell(r['saving_vs_knn_pct'].iloc[0], r['saving_lower'].iloc[0], r['saving_upper'].iloc[0])} "
             f"% {r['word_holm'].iloc[0]} (Holm over every target × router)" for t, r in zip(PAPER_TARGETS, at) if len(r)]
    inside = sum(1 for t, r in zip(PAPER_TARGETS, at) if len(r)
                 and r["saving_lower"].iloc[0] <= PAPER_SAVING_VS_KNN[t] <= r["saving_upper"].iloc[0])
    paper = " / ".join(f"{PAPER_SAVING_VS_KNN[t]:+.1f}" for t in PAPER_TARGETS)
    lines.append(f"- **Fixed-accuracy savings vs KNN ({PAPER_TARGETS[0]:.2f}–{PAPER_TARGETS[-1]:.2f}).** CR² vs KNN "
                 f"at {'; '.join(cells)}. The paper reports {paper} %; {inside} of these {len(PAPER_TARGETS)} values "
                 f"fall inside our 95 % intervals — values our data cannot tell apart from ours, which does not "
                 f"confirm them. This section compares each router with KNN only; the "
                 f"equal-risk section's pairwise and certified-score tables compare learned routers with one another.")
    loc = cmp["local"]
    if len(loc):
        lines.append("- **Local rate at c̄ ≈ 0.45.** " + "; ".join(
            f"{r['α']}: ours {r['ours local rate']} at accuracy {r['ours accuracy']} (cost {r['ours cost (nearest 0.45)']})"
            f", paper {r['paper local rate']} at {r['paper accuracy']}" for _, r in loc.iterrows()) + ".")
    op = f["operating_points"]
    if len(op):
        lines.append(f"- **Risk.** CR²'s test false-acceptance risk at α = {s.alpha:g} is "
                     + " / ".join(num(v, ".4f") for v in op["risk"]) + " at λ = "
                     + " / ".join(f"{v:g}" for v in op["lam"]) + " (solvable rows; "
                     + " / ".join(num(v, ".4f") for v in op["risk_all"]) + " over all test rows).")
    if len(risk) and risk["risk_mean"].notna().any():
        parts = []
        for a, g in risk.dropna(subset=["risk_mean"]).groupby("alpha"):
            w = g.loc[g["risk_mean"].idxmax()]
            parts.append(f"α = {a:g}: {words.bound(g['risk_mean'], g['risk_se'], a)} (worst λ = {w['lam']:.3g}: "
                         f"{w['risk_mean']:.4f} ± {w['risk_se']:.4f})")
        lines.append("  Over the random calibration/test re-splits stored with the run (v_risk_vs_alpha; the promise "
                     "E[risk] ≤ α at every λ, tested per λ one-sided and Holm over the λ of each α — docs/guarantees.md, "
                     "\"Validity over re-splits\"): " + "; ".join(parts) + ".")
    ge = cmp["gate_errors"]
    if len(ge):
        lines.append("- **Gate errors.** " + "; ".join(
            f"at c̄ = {r['c̄']} (λ = {r['ours λ (nearest c̄)']}): ours false accepts {r['ours false accepts']}, false "
            f"defers {r['ours false defers']}, total {r['ours total']} (paper false defers {r['paper false defers']}, "
            f"total {r['paper total gate error']})" for _, r in ge.iterrows()) + ".")
    ab = f["ablation"]
    base = ab[(ab["method"] == "cr2") & ((ab["alpha"] - s.alpha).abs() < 1e-12)]
    loss = ab[ab["method"].str.startswith("ablation:")]
    if len(base) and len(loss):
        b = base.iloc[0]
        lines.append(f"- **Ablation.** The {len(loss)} loss ablations sit within "
                     f"{(loss['accuracy'] - b['accuracy']).abs().max():.4f} accuracy and "
                     f"{100 * (loss['local_rate'] - b['local_rate']).abs().max():.2f} points of local rate of CR² at "
                     f"α = {s.alpha:g} near c̄ ≈ {COST_ANCHOR} (one operating point each, no interval).")
    cx = cmp["complexity"]
    if len(cx):
        same = sum(1 for _, r in cx.iterrows() if r["paper params"] not in ("—", "–") and r["paper params"] == r["ours params"])
        known = sum(1 for _, r in cx.iterrows() if r["paper params"] not in ("—", "–"))
        lines.append(f"- **Complexity.** {same} of the {known} parameter counts the paper gives equal ours; FLOPs "
                     "follow the paper's unstated counting convention only approximately, and KNN's depend on the "
                     "training-set size.")
    return "**Reading the comparison (every number and word above, from the run)**\n\n" + "\n".join(lines)
