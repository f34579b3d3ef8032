"""The headline tables of one evaluation run (`cr2 results`, docs/results.md): stored rows in, display frames and
markdown out, every cell written by cr2.report.cells.

The fixed-accuracy savings vs KNN (interpolated with their intervals, and at the grid point), the verdict per target,
the operating points with their intervals, the deploy decision, the equal-risk cost table, and the paper's numbers
beside ours (PAPER_*: copied from the paper, §VII; the .tex line of each in brackets).
"""
from __future__ import annotations

from typing import Any, Callable

import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.evaluation.fixed_accuracy import PAPER_TARGETS, VIEW_TARGETS
from cr2.report.cells import ci_cell, mean_sd_cell, num, pct
from cr2.report.tables import NOT_REACHED
from cr2.routers import method_router, reference_router, routers_tagged, short_name

TARGETS = PAPER_TARGETS
VIEW_TARGET_RANGE = (float(VIEW_TARGETS[0]), float(VIEW_TARGETS[-1]))  # the targets v_fixed_accuracy evaluates
NO_MEAN_SAVING = ("no learned method reaches a target together with KNN, or the run has no intervals "
                  "(`cr2 run` stores them)")
COST_ANCHOR = 0.45  # the paper's operating-point anchor c̄ ≈ 0.45
LAMS = HEADLINE_LAMS  # the λ the summary quotes (cr2.config)


def share_cell(share, spec: str = ".1f") -> str:
    """A share as 'x.y %', or why there is none."""
    return pct(share, spec, "— (no rows)")


def default_targets(reached: pd.DataFrame, method: str | None = None) -> tuple[tuple[float, ...], str]:
    """The targets `cr2 results` shows when none are given, and a line saying why.

    The paper's four targets (0.79–0.82) where CR² and KNN both reach 0.82; otherwise the four consecutive
    targets ending at the highest one both reach (a pool whose routers top out lower still gets a comparison).
    `method`: the router whose reach decides (None: the method under study, cr2.routers.method_router)."""
    top = reached.loc[reached["method"] == (method or method_router()), "max_target"]
    if top.empty or pd.isna(top.iloc[0]):
        return PAPER_TARGETS, (f"Targets: the paper's {target_span(PAPER_TARGETS)}; CR² and KNN reach no common target in "
                               f"{VIEW_TARGET_RANGE[0]:.2f} … {VIEW_TARGET_RANGE[1]:.2f} in this run.")
    highest = round(float(top.iloc[0]), 2)
    if highest >= PAPER_TARGETS[-1] - 1e-9:
        return PAPER_TARGETS, (f"Targets: the paper's {target_span(PAPER_TARGETS)} (CR² and KNN both reach up to "
                               f"{highest:.2f}; `--targets` picks others).")
    targets = tuple(round(highest - 0.01 * i, 2) for i in range(len(PAPER_TARGETS) - 1, -1, -1)
                    if highest - 0.01 * i >= VIEW_TARGET_RANGE[0] - 1e-9)
    return targets, (f"Targets: {target_span(targets)}, the four highest CR² and KNN both reach — not the paper's "
                     f"{target_span(PAPER_TARGETS)}, which they do not both reach (highest common target {highest:.2f}); "
                     "`--targets` picks others.")


def which_targets(targets) -> str:
    return "the paper's targets" if tuple(targets) == PAPER_TARGETS else f"the targets {target_span(targets)}"


def target_span(targets) -> str:
    t = sorted(targets)
    return f"{t[0]:.2f}–{t[-1]:.2f}" if len(t) > 1 else f"{t[0]:.2f}"


def why_no_target(reached: pd.DataFrame, targets) -> str:
    """Why a fixed-accuracy table has no rows at `targets`: what the methods reach instead."""
    top = reached.loc[reached["method"] == method_router(), "max_target"].dropna()
    where = (f"the highest target CR² and KNN both reach is {float(top.iloc[0]):.2f}" if len(top)
             else "CR² and KNN reach no common target in this run")
    return f"no method reaches the targets {target_span(targets)} together with KNN — {where}; pass --targets"


def verdict_table(fa: pd.DataFrame, method: str | None = None) -> pd.DataFrame:
    """One method's saving vs KNN per target with the Holm p over its stored family and the test's stored word
    (v_fixed_accuracy_ci); None: the method under study (cr2.routers.method_router)."""
    from cr2.report.tables import holm_cell

    method = method or method_router()
    d = fa[fa["method"] == method]
    return pd.DataFrame({"target": d["target"].round(2),
                         f"{method} saving vs KNN % [95 % CI]": [ci_cell(r.saving_vs_knn_pct, r.saving_lower,
                                                                         r.saving_upper) for r in d.itertuples()],
                         "p, Holm (family size)": [holm_cell(r) for r in d.itertuples()],
                         "verdict": d["verdict"].fillna("–")})


def points_table(df: pd.DataFrame, first: tuple[str, ...]) -> pd.DataFrame:
    """Operating points with each metric as 'estimate [lower, upper]' (v_operating_points_ci)."""
    out = df[list(first)].copy()
    for m, fmt in (("accuracy", ".4f"), ("cost", ".4f"), ("local_rate", ".4f"), ("risk", ".4f"),
                   ("oracle_risk_all", ".4f"), ("avoidable_risk_all", ".4f")):
        if m in df.columns:
            out[m + " [95 % CI]"] = [ci_cell(e, lo, hi, fmt) for e, lo, hi in
                                     zip(df[m], df.get(m + "_lower", pd.Series([None] * len(df))),
                                         df.get(m + "_upper", pd.Series([None] * len(df))))]
    for extra in ("risk_all", "local_accuracy", "false_defer"):
        if extra in df.columns:
            out[extra] = df[extra]
    return out


def resamples_text(f: dict) -> str:
    ms = f.get("mean_saving", pd.DataFrame())
    ops = f.get("operating_points", pd.DataFrame())
    if "n_resamples" in ops.columns and ops["n_resamples"].notna().any():
        return f"{int(ops['n_resamples'].max()):,}"
    return f"{int(ms['n_resamples'].max()):,}" if len(ms) and ms["n_resamples"].notna().any() else "–"


# The paper's comparable numbers (../paper/cr2-paper.tex, §VII; line numbers of the .tex in brackets). The
# paper gives fixed-accuracy savings against KNN only (fig:dumbbell_cost_saving, L998–1002).
PAPER_SAVING_VS_KNN = {0.79: 4.8, 0.80: 5.6, 0.81: 16.9, 0.82: 16.2}
PAPER_LOCAL_AT_045 = {0.002: (0.8201, 0.023), 0.010: (0.8197, 0.043), 0.050: (0.8180, 0.094)}  # tab:ablation (acc, local)
PAPER_FIXED_RATE = {0.10: (0.8167, 0.106), 0.20: (0.7970, 0.219)}  # tab:ablation L1117–1118
PAPER_GATE_ERRORS = {0.35: (3.56, 4.9), 0.55: (0.78, 1.9)}  # fig:misdefer L1131: false defers %, total gate error %
# tab:router_complexity (params, FLOPs per decision), keyed by the paper's own names: a baseline by its catalogue `short`
# name, CR²'s two networks by their `complexity` kind. The rows shown are the catalogue's paper baselines, not these.
PAPER_COMPLEXITY = {"MLP": (235_204, "469.2 k"), "KNN": (None, "13.826 M"), "EmbedLLM": (90_714, "717.4 k"),
                    "LLMRank": (608_516, "1.215 M"), "teacher": (398_340, "789.5 k"), "gate": (104_706, "207.1 k")}
CR2_NETWORKS = ("teacher", "gate")  # CR²'s rows of the complexity table (`complexity` kinds)


QUESTION_TITLES = {
    "gate-quality": "Gate quality — CR² uncertified (gate at s ≥ 0.5) vs the baseline uncertified (its one-shot argmax)",
    "calibrated-vs-default": "Calibrated vs default threshold — each router certified at α vs itself with its default "
                             "threshold (a change of rule, not a price at equal risk)",
    "certified-score": "Which score certifies cheaper — CR²@rule vs baseline@rule at the same α",
}


def equal_risk_cell(r) -> str:
    """'estimate [lower, upper] word (Holm p)' of one equal-risk row: the test's stored word and the Holm p over its
    stored family it rests on."""
    from cr2.report.tables import holm_cell

    word = r["verdict"] if isinstance(r.get("verdict"), str) else "–"
    return f"{ci_cell(r['estimate'], r['lower'], r['upper'])} {word} (Holm p {holm_cell(pd.Series(r))})"


def side_label(rule, alpha) -> str:
    return ("uncertified" if rule is None or pd.isna(rule) else str(rule)) + ("" if alpha is None or pd.isna(alpha)
                                                                              else f" α={float(alpha):g}")


def cost_at_target_table(rows: pd.DataFrame, reach: pd.DataFrame, target: float) -> tuple[pd.DataFrame, list[str]]:
    """The equal-risk cost table at `target`: one row per certified router, one column per side (uncertified, then
    each rule × α the run certified), every cell the cost [95 % CI] or why there is none; and one note per column
    that no router reaches (with the highest accuracy any of them reaches there).

    rows: the run's `equal_risk` rows; reach: side_reach (the highest accuracy of every method and α)."""
    from cr2.evaluation.equal_risk import uncertified_side
    from cr2.routers.certify import UNCERTIFIED, certified_name

    sides = rows[rows["question"] == "cost"] if len(rows) else rows
    # every certified side the run evaluated, whether or not its frontier reaches any target (a side that reaches none
    # has no cost row at all, and would otherwise vanish from the table without a word)
    certified = reach[reach["method"].str.contains("@", regex=False)]
    split = certified["method"].str.split("@", n=1, expand=True) if len(certified) else pd.DataFrame(columns=[0, 1])
    routers = sorted(set(split[0]) | set(sides["router"] if len(sides) else []))
    if not routers:
        return pd.DataFrame(), []
    pairs = {(str(rule), float(a)) for rule, a in zip(split[1], certified["alpha"]) if rule != UNCERTIFIED and pd.notna(a)}
    if len(sides):
        pairs |= {(str(r), float(a)) for r, a in sides[["rule", "alpha"]].itertuples(index=False)
                  if pd.notna(r) and pd.notna(a)}
    columns = [(None, None), *sorted(pairs)]
    at = sides[(sides["target"] - target).abs() < 1e-9] if len(sides) else sides
    top = {(str(m), None if pd.isna(a) else round(float(a), 9)): float(x)
           for m, a, x in reach[["method", "alpha", "max_accuracy"]].itertuples(index=False) if pd.notna(x)}
    out, short = [], {c: [] for c in columns}
    for router in routers:
        row = {"router": router}
        for rule, alpha in columns:
            hit = at[(at["router"] == router) & (at["rule"].isna() if rule is None else at["rule"] == rule)
                     & (at["alpha"].isna() if alpha is None else (at["alpha"] - alpha).abs() < 1e-12)]
            label = side_label(rule, alpha)
            if len(hit):
                r = hit.iloc[0]
                row[label] = ci_cell(r["estimate"], r["lower"], r["upper"], ".3f")
                continue
            method = uncertified_side(router).method if rule is None else certified_name(router, rule)
            best = top.get((method, None if alpha is None else round(alpha, 9)))
            if best is None:
                row[label] = "— (not evaluated)"
            elif best < target - 1e-9:
                row[label] = f"does not reach {target:.2f} (tops out at {best:.3f})"
                short[(rule, alpha)].append(best)
            else:
                row[label] = f"— (no cost row at {target:.2f})"
        out.append(row)
    notes = [f"_{side_label(rule, alpha)}: no router reaches {target:.2f} (the highest accuracy any reaches there is "
             f"{max(short[(rule, alpha)]):.3f}: under this rule and α the calibrated thresholds accept more locally "
             "than the target allows)._" for rule, alpha in columns if len(short[(rule, alpha)]) == len(routers)]
    return pd.DataFrame(out), notes


def paper_comparison_tables(f: dict, errors: pd.DataFrame, ops: pd.DataFrame, alpha: float) -> dict[str, pd.DataFrame]:
    """The paper beside ours, as display frames: fixed (the paper's targets: paper, ours interpolated with its
    interval, ours at the grid point, every other router), local (local rate at c̄ ≈ 0.45 per α and at fixed local
    rates), gate_errors (at the λ whose pooled cost is nearest each c̄) and complexity. `f`: the headline rows
    (cr2_warehouse.repository.headline_results at the paper's targets), `errors`: v_gate_errors, `ops`: v_pareto."""
    fa = f["fixed_accuracy"]
    ours, ref = method_router(), reference_router()
    rows = []
    for t in TARGETS:
        d = fa[(fa["target"].round(2) == t)].set_index("method")
        cell = lambda m, col: NOT_REACHED if m not in d.index else num(d.loc[m, col], "+.1f")  # noqa: E731
        ci = lambda m: NOT_REACHED if m not in d.index else ci_cell(d.loc[m, "saving_vs_knn_pct"],  # noqa: E731
                                                            d.loc[m].get("saving_lower"), d.loc[m].get("saving_upper"))
        rows.append({"target accuracy": f"{t:.2f}", "paper CR² vs KNN %": f"{PAPER_SAVING_VS_KNN[t]:+.1f}",
                     "ours CR² vs KNN % (interp.) [95 % CI]": ci(ours),
                     "ours CR² vs KNN % (grid)": cell(ours, "saving_vs_knn_grid_pct"),
                     **{f"ours {m} vs KNN % (interp.) [95 % CI]": ci(m)
                        for m in sorted(set(fa["method"]) - {ours, ref})}})
    local = f["local_at_cost"].set_index("alpha")
    lrows = [{"α": f"{a:g}", "paper accuracy": f"{acc:.4f}", "paper local rate": f"{100 * lr:.1f} %",
              "ours accuracy": num(local.loc[a, "accuracy"], ".4f") if a in local.index else "–",
              "ours local rate": share_cell(local.loc[a, "local_rate"]) if a in local.index else "–",
              "ours cost (nearest 0.45)": num(local.loc[a, "cost"], ".3f") if a in local.index else "–"}
             for a, (acc, lr) in PAPER_LOCAL_AT_045.items()]
    ab = f["ablation"].set_index("method")
    for rate, (acc, lr) in PAPER_FIXED_RATE.items():
        m = f"cr2-rate-{rate:g}"
        lrows.append({"α": f"fixed local rate f = {rate:.2f}", "paper accuracy": f"{acc:.4f}",
                      "paper local rate": f"{100 * lr:.1f} %",
                      "ours accuracy": num(ab.loc[m, "accuracy"], ".4f") if m in ab.index else "–",
                      "ours local rate": share_cell(ab.loc[m, "local_rate"]) if m in ab.index else "–",
                      "ours cost (nearest 0.45)": num(ab.loc[m, "cost"], ".3f") if m in ab.index else "–"})
    cr2_pts = ops[(ops["method"] == ours) & ops["alpha"].round(6).eq(round(alpha, 6))]
    erows = []
    for c, (fd, tot) in PAPER_GATE_ERRORS.items():
        near = cr2_pts.iloc[(cr2_pts["cost"] - c).abs().argsort()[:1]] if len(cr2_pts) else cr2_pts
        e = errors[(errors["alpha"].round(6) == round(alpha, 6))]
        if len(near):
            lam = float(near["lam"].iloc[0])
            e = e[e["lam"] == lam]
        ours_fd = share_cell(e["false_defer"].iloc[0], ".2f") if len(e) else "–"
        ours_fa = share_cell(e["false_accept"].iloc[0], ".2f") if len(e) else "–"
        ours_tot = share_cell(e["false_defer"].iloc[0] + e["false_accept"].iloc[0], ".2f") if len(e) else "–"
        erows.append({"c̄": f"{c:.2f}", "paper false defers": f"{fd:.2f} %", "paper total gate error": f"≈ {tot:.1f} %",
                      "ours λ (nearest c̄)": f"{lam:g}" if len(near) else "–", "ours false accepts": ours_fa,
                      "ours false defers": ours_fd, "ours total": ours_tot})
    cx = f["complexity"].set_index("kind")
    crows = []
    for key in [*routers_tagged("paper", kinds=("baseline",)), *CR2_NETWORKS]:
        kind = key if key in CR2_NETWORKS else f"router:{key}"
        params, flops = PAPER_COMPLEXITY.get(key if key in CR2_NETWORKS else short_name(key), (None, "—"))
        crows.append({"router": key, "paper params": "—" if params is None else f"{params:,}", "paper FLOPs": flops,
                      "ours params": num(cx.loc[kind, "params"], ",.0f") if kind in cx.index else "–",
                      "ours FLOPs": num(cx.loc[kind, "flops"], ",.0f") if kind in cx.index else "–"})
    return {"fixed": pd.DataFrame(rows), "local": pd.DataFrame(lrows), "gate_errors": pd.DataFrame(erows),
            "complexity": pd.DataFrame(crows)}


def seed_spread_rows(d: pd.DataFrame, label: Callable[[Any], dict], fmt: str = "+.1f") -> list[dict]:
    """Rows of v_seed_spread as shown: `label(row)`'s columns, the seeds, mean ± sd, min – max over seeds and the base
    seed's value with its 95 % bootstrap interval."""
    return [{**label(r), "seeds": int(r.n_seeds), "mean ± sd": mean_sd_cell(r.seed_mean, r.seed_sd, fmt),
             "min – max": f"{num(r.seed_min, fmt)} – {num(r.seed_max, fmt)}",
             "base seed [95 % bootstrap CI]": ci_cell(r.base_value, r.base_lower, r.base_upper, fmt)}
            for r in d.itertuples()]


def mean_grid_line(means: pd.DataFrame) -> str:
    """The line under `cr2 results --equal-risk` that says how many validation grid targets the mean savings average
    over, and which grid targets were left out (no Always-model reaches them on the test set) and why."""
    if means.empty:
        return ""
    sizes = sorted({int(n) for n in means["n_targets"].dropna()})
    shown = ", ".join(str(n) for n in sizes) or "?"
    if "dropped_targets" not in means:
        return f"Mean-saving grid: {shown} targets (a run stored before targets were left out: re-run `cr2 run` to " \
               "see which are).\n"
    reasons = sorted({str(r) for r in means["dropped_targets"].dropna()})
    if not reasons:
        return f"Mean-saving grid: {shown} targets; every target of the validation grid is reached by some " \
               "Always-model on the test set, none left out.\n"
    return f"Mean-saving grid: {shown} targets; " + "; ".join(reasons) + ".\n"
