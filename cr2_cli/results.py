"""`cr2 results`: the numbers docs/results.md compares with the paper, as markdown, from the warehouse views.

A view over the library: the rows come from warehouse/ (the stored run), the tables and cells from cr2.report.headline
and cr2.report.cells. Every table names the view it comes from and carries the run's label source, so simulated
results are never read as measured.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import pandas as pd

from cr2.labels import is_simulated
from cr2.report.cells import num
from cr2.report.headline import (COST_ANCHOR, mean_grid_line, LAMS, NO_MEAN_SAVING, QUESTION_TITLES, TARGETS,
                                 VIEW_TARGET_RANGE, Ablation, CostAtTarget, default_targets, equal_risk_cell,
                                 EqualRiskQuestion, LocalAtCost, OperatingPointsCI, paper_comparison_tables,
                                 RealisedRisk, resamples_text, SeedSpread, share_cell, SweepExtremes, VerdictPerTarget,
                                 which_targets, why_no_target)
from cr2.report.table import Table
from cr2.report.tables import FixedAccuracySavings, MeanSaving, RouterComplexity
from cr2.routers import method_router


def parse_targets(text: str) -> tuple[float, ...]:
    """`--targets 0.7,0.75`: target accuracies on v_fixed_accuracy's grid (0.50 … 0.99 in steps of 0.01)."""
    from cr2.core.boundary import shown
    from cr2.core.errors import InvalidValueError

    lo, hi = VIEW_TARGET_RANGE
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not (lo - 1e-9 <= v <= hi + 1e-9) or abs(v * 100 - round(v * 100)) > 1e-6 for v in values):
        raise InvalidValueError(f"--targets takes comma-separated accuracies in {lo:.2f} … {hi:.2f} in steps of 0.01 "
                                f"(the targets v_fixed_accuracy evaluates), e.g. 0.70,0.75; got {shown(text)}")
    return tuple(sorted({round(v, 2) for v in values}))


def check_alpha(alpha: float | None) -> float | None:
    """`--alpha` as given (None: the stored run's α), or an InvalidValueError: a risk level is a finite number in
    (0, 1); typer parses 'nan', 'inf' and '-1' as floats, which would print tables "at α = nan"."""
    from cr2.core.errors import InvalidValueError

    if alpha is not None and not (math.isfinite(alpha) and 0 < alpha < 1):
        raise InvalidValueError(f"--alpha: α must be a finite number in (0, 1), e.g. 0.05; got {alpha:g}")
    return alpha


def seed_spread_markdown(home: str | Path, study_id: str | None = None, alpha: float | None = None,
                         lams: tuple[float, ...] = LAMS, targets: tuple[float, ...] = TARGETS) -> str:
    """The spread across seeds (v_seed_spread) of the headline numbers, beside the base seed's bootstrap interval."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import seed_spread

    check_alpha(alpha)  # before the warehouse is opened
    with Warehouse(home, read_only=True) as wh:
        if not _has_table(wh, "seed_runs"):
            return "_(no seed study in this warehouse: `cr2 study seeds --n 5`)_\n"
        sp = seed_spread(wh, study_id)
    if sp.empty:
        return "_(no seed study in this warehouse: `cr2 study seeds --n 5`)_\n"

    ours = method_router()
    ms = sp[sp["metric"] == "mean_saving_vs_knn_pct"].sort_values("method")
    tg = sp[(sp["metric"] == "saving_vs_knn_pct") & (sp["method"] == ours) & sp["target"].round(2).isin(targets)]
    a = alpha if alpha is not None else sp.loc[sp["method"] == ours, "alpha"].dropna().min()
    op = sp[(sp["method"] == ours) & sp["alpha"].round(6).eq(round(float(a), 6)) & sp["lam"].isin(lams)
            & sp["metric"].isin(["accuracy", "cost", "local_rate", "risk"])].sort_values(["lam", "metric"])
    parts = [
        f"Study `{sp['study_id'].iloc[0]}`: each seed re-ran split, teacher, gate, learned baselines, calibration and "
        "evaluation; the base seed's interval resamples the test queries only.\n",
        f"**Mean saving vs KNN over the validation target grid, %: spread across seeds (v_seed_spread)**\n\n"
        f"{SeedSpread(ms, 'method').markdown()}",
        f"**CR² saving vs KNN at {which_targets(targets)}, %: spread across seeds**\n\n"
        f"{SeedSpread(tg.sort_values('target'), 'target').markdown()}",
        f"**CR² at α = {float(a):g}: spread across seeds**\n\n"
        f"{SeedSpread(op, 'lam', '.4f').markdown()}",
    ]
    return "\n".join(parts)


def _has_table(wh, name: str) -> bool:
    from cr2_warehouse.reads import has_table

    return has_table(wh, name)


# the sides of the saving-vs-KNN tables, named on each (the same pair appears certified vs certified in the deploy
# table and in `cr2 results --equal-risk`)
SIDES_VS_KNN = ("sides: CR² with its deployed threshold table, certified at α = {alpha:g} under its own rule, vs KNN "
                "(and each other baseline) with its own one-shot decision, uncertified; both certified: the deploy "
                "table above and `cr2 results --equal-risk`")


def run_deploy_markdown(home: str | Path, run_id: str) -> str:
    """The stored deploy decision of run `run_id` (tables deploy_decisions, deploy_candidates) as markdown — the rows
    every other surface prints (cr2.report.deploy)."""
    from cr2.report.deploy import deploy_markdown
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import run_deploy

    with Warehouse(home, read_only=True) as wh:
        decisions, candidates = run_deploy(wh, run_id)
    return deploy_markdown(decisions, candidates)


def results_markdown(home: str | Path, alpha: float | None = None, label_source: str | None = None,
                     targets: tuple[float, ...] | None = None) -> str:
    """The headline tables of the newest evaluation run in `home` as markdown, at `targets` (default: see
    default_targets): which router to deploy (the stored decision, run_deploy_markdown), every certified router's
    validity over re-splits, then the comparisons; CR² at `alpha` (None: the α the run stores)."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import reached_targets
    from cr2_warehouse.repository import headline_results, newest_eval_run, stored_run_alpha

    check_alpha(alpha)  # before the warehouse is opened
    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh, label_source)
        alpha = stored_run_alpha(wh, run_id) if alpha is None else alpha
        reached = reached_targets(wh, run_id)
        if targets is None:
            targets, targets_line = default_targets(reached)
        else:
            targets_line = f"Targets: {', '.join(f'{t:.2f}' for t in targets)} (--targets)."
        f = headline_results(wh, run_id, targets=targets, cost_anchor=COST_ANCHOR, alpha=alpha, lams=LAMS)
    no_target = why_no_target(reached, targets)
    run = f["run"].iloc[0]
    simulated = is_simulated(run["label_source"])
    banner = ("SIMULATED labels — not measured" if simulated else "MEASURED labels") + f" (label source `{run['label_source']}`)"
    fa = f["fixed_accuracy"]
    # the table objects the HTML report shows too (cr2.report.tables): the same words and numbers on both
    fixed = FixedAccuracySavings(fa, reached["method"], why=no_target)
    grid = FixedAccuracySavings(fa, reached["method"], grid=True, why=no_target)
    ca = f["cost_assumptions"]
    dearer = (f"{share_cell(ca['device_dearer_share_estimated'].iloc[0])} under ĉ (routing), "
              f"{share_cell(ca['device_dearer_share_realised'].iloc[0])} under c (realised)") if len(ca) else \
        "— (the run's states have no cost rows)"
    parts = [
        f"_{banner}; run `{run_id}`, states `{run['dist_id']}`, decision cost `{run.get('decision_cost', 'realised')}`._\n",
        f"Device model dearer than the cheapest edge model (v_cost_assumptions): {dearer}.\n",
        f"Intervals: 95 % paired bootstrap over the test queries ({resamples_text(f)} resamples, one index for every "
        "method; training, calibration and the split held fixed). Every word is its test's stored one: \"cheaper\" / "
        "\"dearer\" only where the interval excludes 0 and the Holm p over the test's family is below 0.05 (the "
        "family decided by its question, docs/guarantees.md \"One family rule\"), otherwise \"no difference "
        "detected\".\n",
        f"{targets_line}\n",
        run_deploy_markdown(home, run_id),
        validity_markdown(home, run_id, alpha),
        f"**Fixed-accuracy cost saving vs KNN, % [95 % CI] (v_fixed_accuracy_ci, interpolated monotone frontier)** — "
        f"{SIDES_VS_KNN.format(alpha=alpha)}\n\n{fixed.markdown()}",
        f"**CR² vs KNN at {which_targets(targets)} (v_fixed_accuracy_ci)** — {SIDES_VS_KNN.format(alpha=alpha)}"
        f"\n\n{VerdictPerTarget(fa, why=no_target).markdown()}",
        f"**Mean saving vs KNN over the validation target grid, % [95 % CI] (v_mean_saving_ci; CR² at α)** — "
        f"{SIDES_VS_KNN.format(alpha=alpha)}\n\n"
        f"{MeanSaving(f['mean_saving'], why=NO_MEAN_SAVING).markdown()}",
        f"**… at the best grid point, no interpolation (v_fixed_accuracy.saving_vs_knn_grid_pct)** — same sides\n\n"
        f"{grid.markdown()}",
        f"**CR² local rate at c̄ ≈ {COST_ANCHOR} per α (operating_points)**\n\n{LocalAtCost(f['local_at_cost']).markdown()}",
        f"**CR² at α = {alpha:g} [95 % CI] (v_operating_points_ci, v_gate_errors)**\n\n"
        f"{OperatingPointsCI(f['operating_points'], ('lam', 'alpha')).markdown()}",
        f"**Every router at λ ∈ {{{', '.join(f'{v:g}' for v in LAMS)}}} [95 % CI] (v_operating_points_ci; CR² at α = "
        f"{alpha:g})**\n\n{OperatingPointsCI(f['at_lams'], ('method', 'lam')).markdown()}",
        f"**What α bounds and what users feel: CR² at α = {alpha:g} under each rule (v_realised_risk)** — "
        f"teacher_risk is teacher disagreement (the paper's risk); oracle_risk (oracle disagreement on real labels) and "
        f"avoidable_risk (device wrong, an edge model right) are on the {'SIMULATED' if simulated else 'measured'} test "
        f"labels; risks over all test rows\n\n{RealisedRisk(f['realised_risk']).markdown()}",
        f"**Largest local rate and smallest cost over the λ sweep, α = {alpha:g} (operating_points)**\n\n{SweepExtremes(f['sweep']).markdown()}",
        f"**Ablation at c̄ ≈ 0.45 (v_ablation)**\n\n"
        f"{Ablation(f['ablation']).markdown()}",
        f"**Router complexity (v_router_complexity)**\n\n{RouterComplexity(f['complexity']).markdown()}",
    ]
    from cr2_warehouse.reads import has_seed_study

    with Warehouse(home, read_only=True) as wh:
        has_study = has_seed_study(wh)
    if has_study:
        parts.append(f"**Seed variability**\n\n{seed_spread_markdown(home, alpha=alpha, targets=targets)}")
    return "\n".join(parts)


def validity_markdown(home: str | Path, run_id: str, alpha: float | None = None) -> str:
    """Every certified router's validity over the certify stage's re-splits in run `run_id`: one verdict per (router,
    rule, α), the rows `cr2 guarantees` prints (cr2.report.validity) — at `alpha` where the run certified it, else at
    every α. Beside each verdict, the deployed table's own test risk (cr2.report.validity.deployed_table_risk) and
    what the rule promises about it."""
    from cr2.evaluation.metrics import RISK_ALL_METRICS
    from cr2.report.validity import CertifiedValidity, certified_verdicts, deployed_table_risk, rule_promise_note
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import certified_test_risk
    from cr2_warehouse.repository import certified_validity, methods_of_run

    check_alpha(alpha)  # before the warehouse is opened
    with Warehouse(home, read_only=True) as wh:
        cells = certified_validity(wh, run_id)
        methods = methods_of_run(wh, run_id)
        deployed = deployed_table_risk(certified_test_risk(wh, run_id, list(RISK_ALL_METRICS.values())))
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
    verdicts = certified_verdicts(cells)
    table = CertifiedValidity(verdicts, MethodStyles.from_frame(methods).label, deployed=deployed)
    no_interval = "" if deployed["max_lower"].notna().any() else (
        " The run stores no bootstrap interval for a certified router's points, so the largest is shown without one.")
    return (f"{title}\n\nEach row, {which}: E[risk] ≤ α at every λ over the certify stage's random calibration/test "
            "re-splits of val ∪ test, for the risk its rule bounds. Verdict: a one-sided test per λ (z = (mean − α) / "
            "MC SE), Holm at 5 % over the row's λ cells: \"violation detected\" where Holm rejects one, else \"no "
            "violation detected\" (docs/guarantees.md). \"deployed table\": the one threshold table the certify stage "
            "calibrated on val (what `cr2 serve --router` deploys), its test risk of the same risk at each λ of its "
            f"grid.{no_interval}\n\n{table.markdown()}\n\n{rule_promise_note(verdicts['rule'])}\n")


def comparison_markdown(home: str | Path, alpha: float | None = None, label_source: str | None = None) -> str:
    """Paper beside ours for every comparable number, from the newest evaluation run in `home` (CR² at `alpha`; None:
    the α the run stores)."""
    f = comparison_tables(home, alpha, label_source, verdict=True)
    return "\n".join([
        f"**Fixed-accuracy cost saving vs KNN (v_fixed_accuracy)**\n\n{f['fixed'].markdown()}",
        f"**Local rate at c̄ ≈ 0.45 (paper tab:ablation; ours: operating_points / v_ablation)**\n\n{f['local'].markdown()}",
        f"**Gate-error decomposition at α = {f['alpha']:g} (paper fig:misdefer; ours: v_gate_errors at the λ whose pooled "
        f"cost is nearest c̄)**\n\n{f['gate_errors'].markdown()}",
        f"**Router complexity (paper tab:router_complexity; ours: v_router_complexity)**\n\n{f['complexity'].markdown()}",
    ])


def comparison_frames(home: str | Path, alpha: float | None = None, label_source: str | None = None) -> dict:
    """comparison_tables with each table's cells as a frame (the results page reads these)."""
    f = comparison_tables(home, alpha, label_source)
    return {k: v.frame() if isinstance(v, Table) else v for k, v in f.items()}


def comparison_tables(home: str | Path, alpha: float | None = None, label_source: str | None = None,
                      verdict: bool = False) -> dict:
    """The paper-beside-ours tables of the newest evaluation run in `home` (cr2.report.headline): fixed (the paper's
    targets: paper, ours interpolated with its interval — with `verdict`, CR²'s stored word —, ours at the grid point,
    every other router), local, gate_errors, complexity; and fixed_accuracy (the stored rows behind `fixed`, interval
    and view verdict included), run_id and alpha (`alpha`, or where None the α the run stores)."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import headline_results, newest_eval_run, stored_run_alpha, view_for_run

    check_alpha(alpha)  # before the warehouse is opened
    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh, label_source)
        alpha = stored_run_alpha(wh, run_id) if alpha is None else alpha
        f = headline_results(wh, run_id, targets=TARGETS, cost_anchor=COST_ANCHOR, alpha=alpha, lams=LAMS)
        errors = view_for_run(wh, "v_gate_errors", run_id)
        ops = view_for_run(wh, "v_pareto", run_id)
    return {"run_id": run_id, "alpha": alpha, "fixed_accuracy": f["fixed_accuracy"],
            **paper_comparison_tables(f, errors, ops, alpha, verdict)}


def default_equal_risk_target(reach: pd.DataFrame, label: Callable[[str], str] = str) -> tuple[float, str]:
    """The target `cr2 results --equal-risk` shows when none is given, and a line saying why: the highest on
    v_fixed_accuracy's grid (0.50 … 0.99, steps of 0.01) that every certified router reaches under some rule and α of
    the run, so each router's row has a cost; the grid's lowest, with the reason, where no such target is.

    reach: side_reach (the highest test accuracy of every method and α over its λ sweep); `label` names a router."""
    from cr2.crc import RULE_REGISTRY
    from cr2.routers.certify import SEPARATOR

    lo, hi = VIEW_TARGET_RANGE
    top = pd.Series(dtype=float)  # per certified router: its highest accuracy over every rule and α
    if len(reach):
        split = reach["method"].astype(str).str.partition(SEPARATOR)
        calibrated = split[2].map(lambda r: r in RULE_REGISTRY and RULE_REGISTRY[r].calibrated)  # not uncertified / …
        certified = (split[1] == SEPARATOR) & calibrated & reach["alpha"].notna() & reach["max_accuracy"].notna()
        top = reach.loc[certified, "max_accuracy"].groupby(split.loc[certified, 0]).max().sort_index()
    if top.empty:
        return lo, f"Target: {lo:.2f}, the lowest v_fixed_accuracy evaluates — this run has no certified router's sweep."
    each = ", ".join(f"{label(r)} {num(a, '.3f')}" for r, a in top.items())
    common = float(top.min())
    if common < lo:
        return lo, (f"Target: {lo:.2f}, the lowest v_fixed_accuracy evaluates — not every certified router reaches it "
                    f"under any rule and α (each router's highest accuracy: {each}); `--targets` picks others.")
    target = min(math.floor(common * 100 + 1e-9) / 100, hi)
    return target, (f"Target: {target:.2f}, the highest every certified router reaches under some rule and α in this "
                    f"run (each router's highest accuracy: {each}); `--targets` picks others.")


def comparison_sides(method_a: str, method_b: str, label: Callable[[str], str] = str) -> str:
    """'side a vs side b' of one equal-risk comparison, each side named with its guarantee: '<router> @ <rule> (certified
    at α)' or '<router> uncertified' (CR²'s: its gate at s ≥ 0.5; a baseline's: its one-shot argmax)."""
    from cr2.evaluation.equal_risk import CR2_UNCERTIFIED, SUBJECT
    from cr2.routers.certify import SEPARATOR, UNCERTIFIED

    def side(method: str) -> str:
        router, sep, rule = str(method).partition(SEPARATOR)
        if not sep:
            return f"{label(SUBJECT)} uncertified (gate at s ≥ 0.5)" if method == CR2_UNCERTIFIED else label(method)
        if rule == UNCERTIFIED:
            return f"{label(router)} uncertified (its one-shot argmax)"
        return f"{label(router)} @ {rule} (certified at α)"

    return f"{side(method_a)} vs {side(method_b)}"


# the equal-risk questions `cr2 results --equal-risk` prints (cr2.evaluation.equal_risk); the deploy decision's own
# tests are shown with the deploy decision
EQUAL_RISK_SHOWN = ("gate-quality", "calibrated-vs-default", "certified-score")


def equal_risk_markdown(home: str | Path, label_source: str | None = None,
                        targets: Sequence[float] | None = None) -> str:
    """The equal-risk comparison of the newest evaluation run in `home` (table equal_risk) as markdown: every
    certified router's cost with risk ≤ α at each of `targets` (None: default_equal_risk_target), one table per target,
    and CR²'s decomposition against each baseline, every comparison named by its two sides."""
    from cr2.report.styles import MethodStyles
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import side_reach
    from cr2_warehouse.repository import eval_run, methods_of_run, newest_eval_run, run_equal_risk

    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh, label_source)
        rows = run_equal_risk(wh, run_id) if _has_table(wh, "equal_risk") else pd.DataFrame()
        run = eval_run(wh, run_id)
        reach = side_reach(wh, run_id)
        label = MethodStyles.from_frame(methods_of_run(wh, run_id)).label
    source = run["label_source"]
    banner = ("SIMULATED labels — not measured" if is_simulated(source) else "MEASURED labels") + f" (label source `{source}`)"
    if rows.empty:
        return f"_{banner}; run `{run_id}`: no equal-risk rows (a run without certified routers, or one made before " \
               "the equal-risk stage: re-run `cr2 run`)._\n"
    if targets is None:
        target, targets_line = default_equal_risk_target(reach, label)
        targets = (target,)
    else:
        targets = tuple(targets)
        targets_line = f"Targets: {', '.join(f'{t:.2f}' for t in targets)} (--targets)."
    means = rows[rows["metric"] == "mean_saving_pct"]
    n_res = int(rows["n_resamples"].max())
    parts = [f"_{banner}; run `{run_id}`; 95 % paired bootstrap over the test queries ({n_res:,} resamples, the "
             f"evaluation's index); `cr2 results --equal-risk`._\n",
             f"{targets_line}\n",
             "A saving is side a's fixed-accuracy cost saving against side b, % (positive: a is cheaper), averaged over "
             "the validation target grid (each side pays the lower of its frontier's cost and the cheapest Always-model "
             "that reaches the target); each "
             "row names its sides \"a vs b\", each with its guarantee (certified at the column's α, or uncertified). "
             "Every cell prints its test's stored word and the Holm p it rests on (family: question × rule × α, "
             "its size in brackets; docs/guarantees.md \"One family rule\"): \"cheaper\" or \"dearer\" only where "
             "the 95 % interval excludes 0 and that Holm p is below 0.05, otherwise \"no difference detected\".\n"]
    parts.append(mean_grid_line(means))
    for target in targets:
        table = CostAtTarget(rows, reach, target, label)
        parts.append(f"**Cost at accuracy {target:.2f} with risk ≤ α, per certified router [95 % CI]** (normalised cost "
                     f"c̄ on the router's frontier; `uncertified`: no bound; teacher disagreement for crc, oracle "
                     f"disagreement for crc-oracle, avoidable error for crc-avoidable; a cell without a cost says why)"
                     f"\n\n{table.markdown()}" + "".join(f"\n{n}\n" for n in table.notes))
    for question in EQUAL_RISK_SHOWN:
        q = means[means["question"] == question].copy()
        if q.empty:
            continue
        q["cell"] = [equal_risk_cell(r) for _, r in q.iterrows()]
        q["sides"] = [comparison_sides(a, b, label) for a, b in zip(q["method_a"], q["method_b"])]
        fams = q.groupby([q["rule"].fillna("–"), q["alpha"].fillna(-1.0)])["family_size"].max()
        sizes = ", ".join(str(int(n)) for n in fams.dropna().unique())
        parts.append(f"**{QUESTION_TITLES[question]}** (Holm per family question × rule × α: {len(fams)} families of "
                     f"{sizes} tests)\n\n{EqualRiskQuestion(q, question).markdown()}")
    return "\n".join(parts)
