"""`cr2 results`: the numbers docs/results.md compares with the paper, as markdown, from the warehouse views.

Every table names the view it comes from and carries the run's label source, so simulated results are
never read as measured.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from cr2.config import HEADLINE_LAMS
from cr2.evaluation.fixed_accuracy import PAPER_TARGETS, VIEW_TARGETS
from cr2.labels import is_simulated
from cr2.report.markdown import markdown_table
from cr2.report.tables import ci_cell, mean_saving_table

TARGETS = PAPER_TARGETS
VIEW_TARGET_RANGE = (float(VIEW_TARGETS[0]), float(VIEW_TARGETS[-1]))  # the targets v_fixed_accuracy evaluates
NOT_REACHED = "not reached"  # a fixed-accuracy cell where the router or KNN does not reach the target
NO_MEAN_SAVING = ("no learned method reaches a target together with KNN, or the run has no intervals "
                  "(`cr2 run` stores them)")
COST_ANCHOR = 0.45  # the paper's operating-point anchor c̄ ≈ 0.45
LAMS = HEADLINE_LAMS  # the λ the summary quotes (cr2.config)


def _num(v, fmt: str) -> str:
    return "–" if v is None or pd.isna(v) else format(float(v), fmt)


def _pct(share, fmt: str = ".1f") -> str:
    """A share as 'x.y %', or why there is none."""
    return "— (no rows)" if share is None or pd.isna(share) else f"{100 * float(share):{fmt}} %"


def parse_targets(text: str) -> tuple[float, ...]:
    """`--targets 0.7,0.75`: target accuracies on v_fixed_accuracy's grid (0.50 … 0.99 in steps of 0.01)."""
    from cr2.core.errors import InvalidValueError

    lo, hi = VIEW_TARGET_RANGE
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not (lo - 1e-9 <= v <= hi + 1e-9) or abs(v * 100 - round(v * 100)) > 1e-6 for v in values):
        raise InvalidValueError(f"--targets takes comma-separated accuracies in {lo:.2f} … {hi:.2f} in steps of 0.01 "
                                f"(the targets v_fixed_accuracy evaluates), e.g. 0.70,0.75; got {text!r}")
    return tuple(sorted({round(v, 2) for v in values}))


def default_targets(reached: pd.DataFrame, method: str = "cr2") -> tuple[tuple[float, ...], str]:
    """The targets `cr2 results` shows when none are given, and a line saying why.

    The paper's four targets (0.79–0.82) where CR² and KNN both reach 0.82; otherwise the four consecutive
    targets ending at the highest one both reach (a pool whose routers top out lower still gets a comparison)."""
    top = reached.loc[reached["method"] == method, "max_target"]
    if top.empty or pd.isna(top.iloc[0]):
        return PAPER_TARGETS, (f"Targets: the paper's {_span(PAPER_TARGETS)}; CR² and KNN reach no common target in "
                               f"{VIEW_TARGET_RANGE[0]:.2f} … {VIEW_TARGET_RANGE[1]:.2f} in this run.")
    highest = round(float(top.iloc[0]), 2)
    if highest >= PAPER_TARGETS[-1] - 1e-9:
        return PAPER_TARGETS, (f"Targets: the paper's {_span(PAPER_TARGETS)} (CR² and KNN both reach up to "
                               f"{highest:.2f}; `--targets` picks others).")
    targets = tuple(round(highest - 0.01 * i, 2) for i in range(len(PAPER_TARGETS) - 1, -1, -1)
                    if highest - 0.01 * i >= VIEW_TARGET_RANGE[0] - 1e-9)
    return targets, (f"Targets: {_span(targets)}, the four highest CR² and KNN both reach — not the paper's "
                     f"{_span(PAPER_TARGETS)}, which they do not both reach (highest common target {highest:.2f}); "
                     "`--targets` picks others.")


def _which(targets) -> str:
    return "the paper's targets" if tuple(targets) == PAPER_TARGETS else f"the targets {_span(targets)}"


def _span(targets) -> str:
    t = sorted(targets)
    return f"{t[0]:.2f}–{t[-1]:.2f}" if len(t) > 1 else f"{t[0]:.2f}"


def _why_no_target(reached: pd.DataFrame, targets) -> str:
    """Why a fixed-accuracy table has no rows at `targets`: what the methods reach instead."""
    top = reached.loc[reached["method"] == "cr2", "max_target"].dropna()
    where = (f"the highest target CR² and KNN both reach is {float(top.iloc[0]):.2f}" if len(top)
             else "CR² and KNN reach no common target in this run")
    return f"no method reaches the targets {_span(targets)} together with KNN — {where}; pass --targets"


def saving_table(fa: pd.DataFrame, methods=()) -> pd.DataFrame:
    """Targets × methods: the saving vs KNN with its 95 % interval in every cell (v_fixed_accuracy_ci); a method of
    `methods` (those that reach some target with KNN) without a row at these targets gets a column of NOT_REACHED."""
    if fa.empty:
        return fa
    cells = fa.assign(cell=[ci_cell(r.saving_vs_knn_pct, r.saving_lower, r.saving_upper) for r in fa.itertuples()])
    table = cells.pivot_table(index="target", columns="method", values="cell", aggfunc="first")
    table = table.reindex(columns=sorted(set(table.columns) | set(methods)))
    return table.fillna(NOT_REACHED).reset_index()


def verdict_table(fa: pd.DataFrame, method: str = "cr2") -> pd.DataFrame:
    """One method's saving vs KNN per target with the words its 95 % interval allows (v_fixed_accuracy_ci)."""
    d = fa[fa["method"] == method]
    return pd.DataFrame({"target": d["target"].round(2),
                         f"{method} saving vs KNN % [95 % CI]": [ci_cell(r.saving_vs_knn_pct, r.saving_lower,
                                                                         r.saving_upper) for r in d.itertuples()],
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


def seed_spread_markdown(home: str | Path, study_id: str | None = None, alpha: float | None = None,
                         lams: tuple[float, ...] = LAMS, targets: tuple[float, ...] = TARGETS) -> str:
    """The spread across seeds (v_seed_spread) of the headline numbers, beside the base seed's bootstrap interval."""
    from warehouse.db import Warehouse
    from warehouse.repository import seed_spread

    with Warehouse(home, read_only=True) as wh:
        if not _has_table(wh, "seed_runs"):
            return "_(no seed study in this warehouse: `cr2 study seeds --n 5`)_\n"
        sp = seed_spread(wh, study_id)
    if sp.empty:
        return "_(no seed study in this warehouse: `cr2 study seeds --n 5`)_\n"

    def spread_rows(d: pd.DataFrame, label, fmt: str = "+.1f") -> list[dict]:
        return [{**label(r), "seeds": int(r.n_seeds),
                 "mean ± sd": f"{_num(r.seed_mean, fmt)} ± {_num(r.seed_sd, fmt.lstrip('+'))}",
                 "min – max": f"{_num(r.seed_min, fmt)} – {_num(r.seed_max, fmt)}",
                 "base seed [95 % bootstrap CI]": ci_cell(r.base_value, r.base_lower, r.base_upper, fmt)}
                for r in d.itertuples()]

    ms = sp[sp["metric"] == "mean_saving_vs_knn_pct"].sort_values("method")
    tg = sp[(sp["metric"] == "saving_vs_knn_pct") & (sp["method"] == "cr2") & sp["target"].round(2).isin(targets)]
    a = alpha if alpha is not None else sp.loc[sp["method"] == "cr2", "alpha"].dropna().min()
    op = sp[(sp["method"] == "cr2") & sp["alpha"].round(6).eq(round(float(a), 6)) & sp["lam"].isin(lams)
            & sp["metric"].isin(["accuracy", "cost", "local_rate", "risk"])].sort_values(["lam", "metric"])
    parts = [
        f"Study `{sp['study_id'].iloc[0]}`: each seed re-ran split, teacher, gate, learned baselines, calibration and "
        "evaluation; the base seed's interval resamples the test queries only.\n",
        f"**Mean saving vs KNN over the validation target grid, %: spread across seeds (v_seed_spread)**\n\n"
        f"{markdown_table(pd.DataFrame(spread_rows(ms, lambda r: {'method': r.method})))}",
        f"**CR² saving vs KNN at {_which(targets)}, %: spread across seeds**\n\n"
        f"{markdown_table(pd.DataFrame(spread_rows(tg.sort_values('target'), lambda r: {'target': f'{r.target:.2f}'})))}",
        f"**CR² at α = {float(a):g}: spread across seeds**\n\n"
        f"{markdown_table(pd.DataFrame(spread_rows(op, lambda r: {'λ': f'{r.lam:g}', 'metric': r.metric}, '.4f')))}",
    ]
    return "\n".join(parts)


def _has_table(wh, name: str) -> bool:
    from warehouse.reads import has_table

    return has_table(wh, name)


def run_deploy_rows(home: str | Path, run_id: str, alpha: float) -> list[dict[str, str]]:
    """The deploy decision of run `run_id` at α (cr2.evaluation.deploy over its stored pairwise comparisons)."""
    from cr2.report.deploy import decisions, deploy_rows
    from warehouse.db import Warehouse
    from warehouse.repository import eval_run, router_flops, run_equal_risk

    with Warehouse(home, read_only=True) as wh:
        if not _has_table(wh, "equal_risk"):
            return []
        rows = run_equal_risk(wh, run_id)
        flops = router_flops(wh, eval_run(wh, run_id)["label_source"])
    means = rows[rows["metric"] == "mean_saving_pct"].to_dict("records")
    return deploy_rows(decisions(means, flops, alpha))


def results_markdown(home: str | Path, alpha: float | None = None, label_source: str | None = None,
                     targets: tuple[float, ...] | None = None,
                     deploy_rows: Sequence[Mapping[str, Any]] | None = None) -> str:
    """The headline tables of the newest evaluation run in `home` as markdown, at `targets` (default: see
    default_targets): which router to deploy (`deploy_rows`, see deploy_decision_markdown), every certified router's
    validity over re-splits, then the comparisons; CR² at `alpha` (None: the α the run stores)."""
    from warehouse.db import Warehouse
    from warehouse.reads import reached_targets
    from warehouse.repository import headline_results, newest_eval_run, stored_run_alpha

    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh, label_source)
        alpha = stored_run_alpha(wh, run_id) if alpha is None else alpha
        reached = reached_targets(wh, run_id)
        if targets is None:
            targets, targets_line = default_targets(reached)
        else:
            targets_line = f"Targets: {', '.join(f'{t:.2f}' for t in targets)} (--targets)."
        f = headline_results(wh, run_id, targets=targets, cost_anchor=COST_ANCHOR, alpha=alpha, lams=LAMS)
    no_target = _why_no_target(reached, targets)
    run = f["run"].iloc[0]
    simulated = is_simulated(run["label_source"])
    banner = ("SIMULATED labels — not measured" if simulated else "MEASURED labels") + f" (label source `{run['label_source']}`)"
    fa = f["fixed_accuracy"]
    fixed = saving_table(fa, reached["method"])
    grid = fa.pivot_table(index="target", columns="method", values="saving_vs_knn_grid_pct").round(1)
    grid = grid.reindex(columns=sorted(set(grid.columns) | set(reached["method"])))
    grid = grid.astype(object).where(grid.notna(), NOT_REACHED).reset_index()
    ca = f["cost_assumptions"]
    dearer = (f"{_pct(ca['device_dearer_share_estimated'].iloc[0])} under ĉ (routing), "
              f"{_pct(ca['device_dearer_share_realised'].iloc[0])} under c (realised)") if len(ca) else \
        "— (the run's states have no cost rows)"
    parts = [
        f"_{banner}; run `{run_id}`, states `{run['dist_id']}`, decision cost `{run.get('decision_cost', 'realised')}`._\n",
        f"Device model dearer than the cheapest edge model (v_cost_assumptions): {dearer}.\n",
        f"Intervals: 95 % paired bootstrap over the test queries ({_resamples(f)} resamples, one index for every "
        "method; training, calibration and the split held fixed). \"cheaper\" / \"dearer\" only where the "
        "interval excludes 0, otherwise \"no difference detected\".\n",
        f"{targets_line}\n",
        deploy_decision_markdown(run_deploy_rows(home, run_id, alpha) if deploy_rows is None else deploy_rows),
        validity_markdown(home, run_id, alpha),
        f"**Fixed-accuracy cost saving vs KNN, % [95 % CI] (v_fixed_accuracy_ci, interpolated monotone frontier)**"
        f"\n\n{markdown_table(fixed, 3, no_target)}",
        f"**CR² vs KNN at {_which(targets)} (v_fixed_accuracy_ci)**\n\n{markdown_table(verdict_table(fa), why=no_target)}",
        f"**Mean saving vs KNN over the validation target grid, % [95 % CI] (v_mean_saving_ci; CR² at α)**\n\n"
        f"{markdown_table(mean_saving_table(f['mean_saving']), why=NO_MEAN_SAVING)}",
        f"**… at the best grid point, no interpolation (v_fixed_accuracy.saving_vs_knn_grid_pct)**\n\n"
        f"{markdown_table(grid, 3, no_target)}",
        f"**CR² local rate at c̄ ≈ {COST_ANCHOR} per α (operating_points)**\n\n{markdown_table(f['local_at_cost'])}",
        f"**CR² at α = {alpha:g} [95 % CI] (v_operating_points_ci, v_gate_errors)**\n\n"
        f"{markdown_table(points_table(f['operating_points'], ('lam', 'alpha')))}",
        f"**Every router at λ ∈ {{{', '.join(f'{v:g}' for v in LAMS)}}} [95 % CI] (v_operating_points_ci; CR² at α = "
        f"{alpha:g})**\n\n{markdown_table(points_table(f['at_lams'], ('method', 'lam')))}",
        f"**What α bounds and what users feel: CR² at α = {alpha:g} under each rule (v_realised_risk)** — "
        f"teacher_risk is teacher disagreement (the paper's risk); oracle_risk (oracle disagreement on real labels) and "
        f"avoidable_risk (device wrong, an edge model right) are on the {'SIMULATED' if simulated else 'measured'} test "
        f"labels; risks over all test rows\n\n{markdown_table(f['realised_risk'])}",
        f"**Largest local rate and smallest cost over the λ sweep, α = {alpha:g} (operating_points)**\n\n{markdown_table(f['sweep'])}",
        f"**Ablation at c̄ ≈ 0.45 (v_ablation)**\n\n"
        f"{markdown_table(f['ablation'][['method', 'alpha', 'lam', 'accuracy', 'cost', 'local_rate']].sort_values(['method', 'alpha']))}",
        f"**Router complexity (v_router_complexity)**\n\n{markdown_table(f['complexity'][['kind', 'params', 'flops']])}",
    ]
    from warehouse.reads import has_seed_study

    with Warehouse(home, read_only=True) as wh:
        has_study = has_seed_study(wh)
    if has_study:
        parts.append(f"**Seed variability**\n\n{seed_spread_markdown(home, alpha=alpha, targets=targets)}")
    return "\n".join(parts)


DEPLOY_TITLE = "**Which router to deploy**"


def deploy_decision_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The deploy decision of the run's scenario: one markdown row per row of `rows` (each a mapping column → text, in
    the order given), or one line saying the run has none. The decision rule itself is computed elsewhere (the
    equal-risk statistics); this is where `cr2 results` prints it."""
    from cr2.report.deploy import RULE_TEXT

    if not rows:
        return (f"{DEPLOY_TITLE}\n\n_(no deploy decision for this run: it stores no pairwise comparison of certified "
                "routers at this α — a run made before them, or α is not among certify.alphas)_\n")
    return f"{DEPLOY_TITLE}\n\n{RULE_TEXT}\n\n{markdown_table(pd.DataFrame(list(rows)))}"


def validity_markdown(home: str | Path, run_id: str, alpha: float | None = None) -> str:
    """Every certified router's validity over the certify stage's re-splits in run `run_id`: one verdict per (router,
    rule, α), the rows `cr2 guarantees` prints (cr2.report.validity) — at `alpha` where the run certified it, else at
    every α."""
    from cr2.report.validity import certified_display, certified_verdicts
    from warehouse.db import Warehouse
    from warehouse.repository import certified_validity, methods_of_run

    with Warehouse(home, read_only=True) as wh:
        cells = certified_validity(wh, run_id)
        methods = methods_of_run(wh, run_id)
    title = ("**Validity over re-splits: every certified router (v_certified_validity; `cr2 guarantees` prints the "
             "same rows)**")
    if cells.empty:
        return (f"{title}\n\n_(no rows: run `{run_id}` stores no re-splits of a certified router — "
                "evaluation.n_resplits = 0, or no certified router: certify.routers / certify.rules)_\n")
    from cr2.report.styles import MethodStyles

    at_alpha = alpha is not None and bool(np.isclose(cells["alpha"], alpha).any())
    which = (f"at α = {alpha:g} (every certified α: `cr2 guarantees`)" if at_alpha else
             "at every certified α" + ("" if alpha is None else f" (the run certified none at α = {alpha:g})"))
    if at_alpha:
        cells = cells[np.isclose(cells["alpha"], alpha)]
    table = certified_display(certified_verdicts(cells), MethodStyles.from_frame(methods).label)
    return (f"{title}\n\nEach row, {which}: E[risk] ≤ α at every λ over the certify stage's random calibration/test "
            "re-splits of val ∪ test, for the risk its rule bounds. Verdict: a one-sided test per λ (z = (mean − α) / "
            "MC SE), Holm at 5 % over the row's λ cells: \"violation detected\" where Holm rejects one, else \"no "
            f"violation detected\" (docs/guarantees.md).\n\n{markdown_table(table)}")


def _resamples(f: dict) -> str:
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
PAPER_COMPLEXITY = {"mlp": (235_204, "469.2 k"), "knn": (None, "13.826 M"), "embedllm": (90_714, "717.4 k"),
                    "llmrank": (608_516, "1.215 M"), "teacher": (398_340, "789.5 k"), "gate": (104_706, "207.1 k")}


def comparison_markdown(home: str | Path, alpha: float | None = None, label_source: str | None = None) -> str:
    """Paper beside ours for every comparable number, from the newest evaluation run in `home` (CR² at `alpha`; None:
    the α the run stores)."""
    f = comparison_frames(home, alpha, label_source)
    alpha = f["alpha"]
    fa, rows = f["fixed_accuracy"], f["fixed"].copy()
    cr2 = fa[fa["method"] == "cr2"].assign(t=lambda d: d["target"].round(2)).set_index("t")
    rows.insert(3, "verdict", [NOT_REACHED if float(t) not in cr2.index else
                               cr2.loc[float(t), "verdict"] if pd.notna(cr2.loc[float(t), "verdict"])
                               else "— (no interval)" for t in rows["target accuracy"]])
    return "\n".join([
        f"**Fixed-accuracy cost saving vs KNN (v_fixed_accuracy)**\n\n{markdown_table(rows)}",
        f"**Local rate at c̄ ≈ 0.45 (paper tab:ablation; ours: operating_points / v_ablation)**\n\n{markdown_table(f['local'])}",
        f"**Gate-error decomposition at α = {alpha:g} (paper fig:misdefer; ours: v_gate_errors at the λ whose pooled "
        f"cost is nearest c̄)**\n\n{markdown_table(f['gate_errors'])}",
        f"**Router complexity (paper tab:router_complexity; ours: v_router_complexity)**\n\n{markdown_table(f['complexity'])}",
    ])


def comparison_frames(home: str | Path, alpha: float | None = None, label_source: str | None = None) -> dict:
    """The paper-beside-ours tables of the newest evaluation run in `home`, as frames: fixed (the paper's targets:
    paper, ours interpolated with its interval, ours at the grid point, every other router), local, gate_errors,
    complexity; and fixed_accuracy (the stored rows behind `fixed`, interval and view verdict included), run_id and
    alpha (`alpha`, or where None the α the run stores)."""
    from warehouse.db import Warehouse
    from warehouse.repository import headline_results, newest_eval_run, stored_run_alpha, view_for_run

    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh, label_source)
        alpha = stored_run_alpha(wh, run_id) if alpha is None else alpha
        f = headline_results(wh, run_id, targets=TARGETS, cost_anchor=COST_ANCHOR, alpha=alpha, lams=LAMS)
        errors = view_for_run(wh, "v_gate_errors", run_id)
        ops = view_for_run(wh, "v_pareto", run_id)
    fa = f["fixed_accuracy"]
    rows = []
    for t in TARGETS:
        d = fa[(fa["target"].round(2) == t)].set_index("method")
        cell = lambda m, col: NOT_REACHED if m not in d.index else _num(d.loc[m, col], "+.1f")  # noqa: E731
        ci = lambda m: NOT_REACHED if m not in d.index else ci_cell(d.loc[m, "saving_vs_knn_pct"],  # noqa: E731
                                                            d.loc[m].get("saving_lower"), d.loc[m].get("saving_upper"))
        rows.append({"target accuracy": f"{t:.2f}", "paper CR² vs KNN %": f"{PAPER_SAVING_VS_KNN[t]:+.1f}",
                     "ours CR² vs KNN % (interp.) [95 % CI]": ci("cr2"),
                     "ours CR² vs KNN % (grid)": cell("cr2", "saving_vs_knn_grid_pct"),
                     **{f"ours {m} vs KNN % (interp.) [95 % CI]": ci(m)
                        for m in sorted(set(fa["method"]) - {"cr2", "knn"})}})
    local = f["local_at_cost"].set_index("alpha")
    lrows = [{"α": f"{a:g}", "paper accuracy": f"{acc:.4f}", "paper local rate": f"{100 * lr:.1f} %",
              "ours accuracy": _num(local.loc[a, "accuracy"], ".4f") if a in local.index else "–",
              "ours local rate": _pct(local.loc[a, "local_rate"]) if a in local.index else "–",
              "ours cost (nearest 0.45)": _num(local.loc[a, "cost"], ".3f") if a in local.index else "–"}
             for a, (acc, lr) in PAPER_LOCAL_AT_045.items()]
    ab = f["ablation"].set_index("method")
    for rate, (acc, lr) in PAPER_FIXED_RATE.items():
        m = f"cr2-rate-{rate:g}"
        lrows.append({"α": f"fixed local rate f = {rate:.2f}", "paper accuracy": f"{acc:.4f}",
                      "paper local rate": f"{100 * lr:.1f} %",
                      "ours accuracy": _num(ab.loc[m, "accuracy"], ".4f") if m in ab.index else "–",
                      "ours local rate": _pct(ab.loc[m, "local_rate"]) if m in ab.index else "–",
                      "ours cost (nearest 0.45)": _num(ab.loc[m, "cost"], ".3f") if m in ab.index else "–"})
    cr2_pts = ops[(ops["method"] == "cr2") & ops["alpha"].round(6).eq(round(alpha, 6))]
    erows = []
    for c, (fd, tot) in PAPER_GATE_ERRORS.items():
        near = cr2_pts.iloc[(cr2_pts["cost"] - c).abs().argsort()[:1]] if len(cr2_pts) else cr2_pts
        e = errors[(errors["alpha"].round(6) == round(alpha, 6))]
        if len(near):
            lam = float(near["lam"].iloc[0])
            e = e[e["lam"] == lam]
        ours_fd = _pct(e["false_defer"].iloc[0], ".2f") if len(e) else "–"
        ours_fa = _pct(e["false_accept"].iloc[0], ".2f") if len(e) else "–"
        ours_tot = _pct(e["false_defer"].iloc[0] + e["false_accept"].iloc[0], ".2f") if len(e) else "–"
        erows.append({"c̄": f"{c:.2f}", "paper false defers": f"{fd:.2f} %", "paper total gate error": f"≈ {tot:.1f} %",
                      "ours λ (nearest c̄)": f"{lam:g}" if len(near) else "–", "ours false accepts": ours_fa,
                      "ours false defers": ours_fd, "ours total": ours_tot})
    cx = f["complexity"].set_index("kind")
    crows = []
    for key, (params, flops) in PAPER_COMPLEXITY.items():
        kind = key if key in ("teacher", "gate") else f"router:{key}"
        crows.append({"router": key, "paper params": "—" if params is None else f"{params:,}", "paper FLOPs": flops,
                      "ours params": _num(cx.loc[kind, "params"], ",.0f") if kind in cx.index else "–",
                      "ours FLOPs": _num(cx.loc[kind, "flops"], ",.0f") if kind in cx.index else "–"})
    return {"run_id": run_id, "alpha": alpha, "fixed_accuracy": fa, "fixed": pd.DataFrame(rows), "local": pd.DataFrame(lrows),
            "gate_errors": pd.DataFrame(erows), "complexity": pd.DataFrame(crows)}


QUESTION_TITLES = {
    "gate-quality": "Gate quality — CR² uncertified (gate at s ≥ 0.5) vs the baseline uncertified (its one-shot argmax)",
    "calibrated-vs-default": "Calibrated vs default threshold — each router certified at α vs itself with its default "
                             "threshold (a change of rule, not a price at equal risk)",
    "certified-score": "Which score certifies cheaper — CR²@rule vs baseline@rule at the same α",
    "pairwise": "Every certified router vs every other — the deploy rule's tests (same rule, default α)",
}


def _er_cell(r) -> str:
    """'estimate [lower, upper] word' of one equal-risk row (the word from the stored verdict)."""
    word = {"cheaper": " cheaper", "dearer": " dearer"}.get(r["verdict"], "")
    return ci_cell(r["estimate"], r["lower"], r["upper"]) + word


def _side_label(rule, alpha) -> str:
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
            label = _side_label(rule, alpha)
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
    notes = [f"_{_side_label(rule, alpha)}: no router reaches {target:.2f} (the highest accuracy any reaches there is "
             f"{max(short[(rule, alpha)]):.3f}: under this rule and α the calibrated thresholds accept more locally "
             "than the target allows)._" for rule, alpha in columns if len(short[(rule, alpha)]) == len(routers)]
    return pd.DataFrame(out), notes


def equal_risk_markdown(home: str | Path, label_source: str | None = None, target: float = 0.80) -> str:
    """The equal-risk comparison of the newest evaluation run in `home` (table equal_risk) as markdown: every
    certified router's cost at `target` accuracy with risk ≤ α, and CR²'s decomposition against each baseline."""
    from warehouse.db import Warehouse
    from warehouse.repository import eval_run, newest_eval_run, run_equal_risk

    from warehouse.reads import side_reach

    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh, label_source)
        rows = run_equal_risk(wh, run_id) if _has_table(wh, "equal_risk") else pd.DataFrame()
        run = eval_run(wh, run_id)
        reach = side_reach(wh, run_id)
    source = run["label_source"]
    banner = ("SIMULATED labels — not measured" if is_simulated(source) else "MEASURED labels") + f" (label source `{source}`)"
    if rows.empty:
        return f"_{banner}; run `{run_id}`: no equal-risk rows (a run without certified routers, or one made before " \
               "the equal-risk stage: re-run `cr2 run`)._\n"
    means = rows[rows["metric"] == "mean_saving_pct"]
    n_res = int(rows["n_resamples"].max())
    parts = [f"_{banner}; run `{run_id}`; 95 % paired bootstrap over the test queries ({n_res:,} resamples, the "
             f"evaluation's index); `cr2 results --equal-risk`._\n",
             "A saving is side a's fixed-accuracy cost saving against side b, % (positive: a is cheaper), averaged over "
             "the validation target grid (a target a side misses costs the cheapest Always-model that reaches it). Each question's tests are read together: a cell says "
             "\"cheaper\" or \"dearer\" only where its 95 % interval excludes 0 and its Holm-adjusted p (over the "
             "question's family: every baseline × rule × α) is below 0.05; a cell without a word is **no difference "
             "detected**.\n"]
    table, notes = cost_at_target_table(rows, reach, target)
    parts.append(f"**Cost at accuracy {target:.2f} with risk ≤ α, per certified router [95 % CI]** (normalised cost "
                 f"c̄ on the router's frontier; `uncertified`: no bound; teacher disagreement for crc, oracle "
                 f"disagreement for crc-oracle, avoidable error for crc-avoidable; a cell without a cost says why)"
                 f"\n\n{markdown_table(table, why='no certified router in this run')}" + "".join(f"\n{n}\n" for n in notes))
    for question, title in QUESTION_TITLES.items():
        q = means[means["question"] == question].copy()
        if q.empty:
            continue
        q["cell"] = [_er_cell(r) for _, r in q.iterrows()]
        if question == "gate-quality":
            table = q[["against", "cell", "n_targets", "p_value", "p_holm"]].rename(
                columns={"against": "baseline", "cell": "CR² vs baseline, mean saving % [95 % CI]"})
        else:
            key = "router" if question == "calibrated-vs-default" else "against"
            if question == "pairwise":
                q["against"] = q["router"] + " vs " + q["against"]
            q["α"] = q["alpha"].map(lambda a: f"α = {a:g}")
            table = q.pivot_table(index=[key, "rule"], columns="α", values="cell", aggfunc="first")
            table = table.fillna("— (no target both sides reach)").reset_index()
            table = table.rename(columns={"against": "baseline"})
        fams = q.groupby([q["rule"].fillna("–"), q["alpha"].fillna(-1.0)]).size()
        sizes = ", ".join(str(int(n)) for n in fams.unique())
        parts.append(f"**{title}** (Holm per family question × rule × α: {len(fams)} families of {sizes} tests)\n\n"
                     f"{markdown_table(table, 3)}")
    return "\n".join(parts)
