"""What `cr2`'s commands print: one function per table or summary, reading the warehouse through warehouse/reads.py
and writing every cell with cr2.report.cells (missing values as '—').

Every table on labels carries their label note, so simulated results are never read as measured.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Optional

import pandas as pd
from rich.table import Table
from rich.text import Text

from cr2_cli.console import console
from cr2.config import HEADLINE_LAMS  # the λ values the CLI's summaries show (defined once)
from cr2.report import cells
from cr2.report.simcheck import SimcheckPoints
from cr2.report.tables import Baselines, CR2OperatingPoints, LabelSources, Recalibration, RouteUtilities

num = partial(cells.num, missing_text=cells.EM_DASH)  # the command line writes a missing number '—'


def label_note(wh, source: str) -> str:
    """'SIMULATED labels (…), not measured' / 'MEASURED labels (…) from <repository> @ <commit>' for a table title."""
    from cr2.labels import label_note as note
    from cr2_warehouse.labels import label_origin

    return note(source, label_origin(wh, source))


# ------------------------------------------------------------------ pipeline stages
def print_ingest_summary(summary: dict) -> None:
    state = " — cached" if summary.get("cached") else ""
    table = Table(title=f"queries per benchmark (prompt tokens: {summary['tokenizer']}){state}")
    table.add_column("benchmark")
    table.add_column("queries", justify="right")
    table.add_column("mean prompt tokens", justify="right")
    total = 0
    for b, row in summary["benchmarks"].items():
        table.add_row(b, f"{row['queries']:,}", f"{row['mean_prompt_tokens']:.1f}")
        total += row["queries"]
    table.add_row("all", f"{total:,}", "")
    console.print(table)


def print_prepare_steps(summary: dict) -> None:
    parts = [f"{name}: {'cached' if step.get('cached') else 'computed'}" for name, step in summary.items()]
    emb = summary.get("embeddings", {})
    if emb and not emb.get("cached"):
        parts[0] += f" ({emb['embedded']:,} embedded)"
    console.print("prepare — " + "; ".join(parts), highlight=False)
    dearer = summary.get("costs", {}).get("device_dearer_share")
    if dearer:  # the paper's two-stage rule assumes the device model is never dearer than an edge model
        console.print(f"device model dearer than the cheapest edge model on {num(dearer['estimated'], '.1f', 100, ' %')} of "
                      f"(query, state) rows under the pre-execution estimate ĉ (routing), "
                      f"{num(dearer['realised'], '.1f', 100, ' %')} under the realised cost (v_cost_assumptions)",
                      highlight=False)


def print_model_summary(home: Path, config_path: Optional[Path]) -> None:
    """Per benchmark: queries, accuracy and mean normalised cost per model, under the configured labels and states."""
    from cr2.config import load_config
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import model_summary

    cfg = load_config(config_path)
    with Warehouse(home, read_only=True) as wh:
        df = model_summary(wh, cfg.labels.source, cfg.channel.distribution.dist_id, cfg.splits.seed)
        note = label_note(wh, cfg.labels.source)
    if df.empty:
        return
    table = Table(title=f"{note}; states: {cfg.channel.distribution.dist_id}")
    models = list(dict.fromkeys(df["model_id"]))
    table.add_column("benchmark")
    table.add_column("queries", justify="right")
    for m in models:
        table.add_column(f"{m}\nacc / cost", justify="right")
    for b, g in df.groupby("benchmark", sort=True):
        g = g.set_index("model_id")
        table.add_row(b, f"{int(g['queries'].iloc[0]):,}",
                      *[f"{num(g.at[m, 'accuracy'], '.1f', 100, '%')} / {num(g.at[m, 'mean_cost_norm'], '.3f')}"
                        if m in g.index else "— (no labels)" for m in models])
    console.print(table)


def print_train(summary: dict) -> None:
    state = "cached" if summary.get("cached") else "trained"
    for kind in ("teacher", "gate"):
        a = summary[kind]
        console.print(f"{kind}: {a['params']:,} parameters, {a['flops']:,} FLOPs/query, fingerprint {a['fingerprint']}, "
                      f"fit {a['fit_seconds']:.1f} s (best epoch {a['best_epoch']}) ({state})", highlight=False)


def print_calibrate(summary: dict) -> None:
    state = "cached" if summary.get("cached") else "calibrated"
    console.print(f"thresholds v{summary['version']}: {summary['n_lam']} λ × {summary['n_alpha']} α on N_calib = "
                  f"{summary['n_calib']:,} val queries (states {summary['dist_id']}, labels {summary['label_source']}) "
                  f"({state})", highlight=False)


def print_operating_points(home: Path, evaluated: dict, lams=HEADLINE_LAMS) -> None:
    """CR² on the test split at the run's default α (stored with it) for a few λ: risk, local rate, accuracy, cost."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import cr2_operating_points
    from cr2_warehouse.repository import stored_run_alpha

    with Warehouse(home, read_only=True) as wh:
        alpha = stored_run_alpha(wh, evaluated["run_id"])
        df = cr2_operating_points(wh, evaluated["run_id"], alpha)
        note = label_note(wh, evaluated["label_source"])
    # risk, accuracy, cost and local rate on the paper's test set (the queries some model solves); risk_all over
    # every test query, the population CRC's guarantee is stated for; the table the Prefect artifact publishes too
    console.print(CR2OperatingPoints(df, lams).rich(
        f"CR² on test, α = {alpha:g} (risk, local rate, accuracy, cost over the {evaluated['n_evaluable']:,} test "
        f"queries some model solves; risk also over all {evaluated['n_test']:,}); {note}", justify="right"))
    console.print("α bounds the risk of the calibration rule (calibration.rule; `crc`: teacher risk = teacher "
                  "disagreement, the paper's); oracle = oracle disagreement on the real test labels, avoidable = "
                  "answered wrongly on the device where an edge model was right, both over all test rows; local acc. "
                  "= the device's accuracy on what it accepted (docs/guarantees.md)", highlight=False)


def print_baselines(home: Path, baselines: dict, evaluated: dict) -> None:
    """Each baseline's size, fit time and test accuracy/cost at λ = 0 and λ = 2."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import baseline_points

    with Warehouse(home, read_only=True) as wh:
        df = baseline_points(wh, evaluated["run_id"], (0.0, 2.0))
        note = label_note(wh, evaluated["label_source"])
    state = "cached" if baselines.get("cached") else "fitted"
    console.print(Baselines(baselines["routers"], df).rich(f"baselines ({state}) on test; {note}", justify="right"))


# ------------------------------------------------------------------ re-calibration
def print_drift(findings: list[dict]) -> None:
    """One line per channel-state feature: the KS statistic, its Holm-adjusted p-value and whether it drifted."""
    for f in findings:
        console.print(f"drift {f['feature']:<12} KS D = {f['statistic']:.3f}, p_holm = {f['p_adjusted']:.3g}"
                      f"{'  DRIFT' if f['drifted'] else ''}", highlight=False)


def print_recalibration(home: Path, out: dict, lams=HEADLINE_LAMS) -> None:
    """The new thresholds and CR² on test under the new states, old thresholds (before) vs re-calibrated (after), at
    the α the re-calibrated run stores."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import recalibration
    from cr2_warehouse.repository import stored_run_alpha

    old, new = out["old_thresholds"], out["new_thresholds"]
    console.print(f"states {out['old_dist_id']} → {out['new_dist_id']}: thresholds v{old['version']} → v{new['version']} "
                  f"(N_calib = {new['n_calib']:,}; gate {new['gate_fingerprint']} unchanged)", highlight=False)
    with Warehouse(home, read_only=True) as wh:
        alpha = stored_run_alpha(wh, out["after"]["run_id"])
        df = recalibration(wh, out["before"]["run_id"], out["after"]["run_id"], alpha)
    console.print(Recalibration(df, lams).rich(f"CR² on test under {out['new_dist_id']}, α = {alpha:g}: old thresholds "
                                               "(before) vs re-calibrated", justify="right"))


# ------------------------------------------------------------------ deployment
def risk_line(out: dict, alpha: float) -> str:
    """What the threshold's α bounds, in words: the rule and the risk it controls."""
    from cr2.crc import RULE_REGISTRY

    rule = out.get("rule", "crc")
    if not out.get("risk"):
        return f"rule {rule}: uncalibrated, no risk is bounded"
    promise = RULE_REGISTRY[rule].promise if rule in RULE_REGISTRY else ""
    return (f"rule {rule}: α = {alpha:g} bounds the {out['risk_display']} risk ({out['risk']}) — {promise}"
            + ("; this is agreement with the teacher, not the error rate of local answers"
               if out["risk"] == "teacher-disagreement" else ""))


def print_target_choice(out: dict) -> None:
    """The certified (λ, α, τ) a target chose."""
    c = out["target_choice"]
    console.print(f"target {c['mode']} {c['target']:g}: chose λ={out['lam']:g}, α={out['alpha']:g} (τ = {c['tau']:.4f}) "
                  f"— certified with probability ≥ {1 - c['delta']:g} (LTT over {c['n_certified']} passing points, N = "
                  f"{c['n_select']} selection queries); on them accuracy {c['accuracy']:.3f}, mean cost {c['cost']:.3f}",
                  highlight=False)


def print_route(out: dict, lam: float, alpha: float) -> None:
    """One routing decision: accept or defer, the score against τ, what α bounds, and the teacher's utilities."""
    verdict = "ACCEPT locally on " + out["models"][0]["model_id"] if out["accept_local"] else f"DEFER to {out['chosen_model']}"
    console.print(Text(verdict, style="bold"), f" (score s = {out['score']:.4f}, τ*(λ={lam:g}; α={alpha:g}) = "
                  f"{out['tau']:.4f}, d = {out['distance_m']:.1f} m, {out['prompt_tokens']} prompt tokens)",
                  highlight=False)
    router = out.get("router", "cr2")
    console.print(("" if router == "cr2" else f"router {router}; ") + risk_line(out, alpha), highlight=False,
                  markup=False)
    whose = "teacher" if router.split("@")[0] == "cr2" else f"{router.split('@')[0]}'s"
    console.print(RouteUtilities(out["models"], out["chosen_model"]).rich(
        f"{whose} utilities û = p − λ·c (labels {out['label_source']}, states {out['threshold_dist_id']})",
        justify="right"))


# ------------------------------------------------------------------ checks
VERDICT_RULE = ("Verdict: per cell, a one-sided test of the promise (z = (mean − bound) / MC SE; a share: exact "
                "binomial), Holm at 5 % over the cells of one row; \"violation detected\" where Holm rejects a cell, "
                "else \"no violation detected\" (docs/guarantees.md, \"Validity over re-splits\").")


def newest_eval_run_or_none(wh, label_source: str | None) -> str | None:
    """The newest evaluation run (of `label_source`), None where the warehouse has none."""
    from cr2.core.errors import DataValidationError
    from cr2_warehouse.repository import newest_eval_run

    try:
        return newest_eval_run(wh, label_source)
    except DataValidationError:
        return None


def print_guarantees(home: Path, run_id: str, source: str, label_source: str | None = None) -> None:
    """One verdict per (router, rule, α): every certified router's validity over the certify stage's re-splits (the
    newest evaluation run of `label_source`), then the promises of CR²'s deployed gate that validity run `run_id`
    checked (ltt, Mondrian, target) — cr2.report.validity, the rows `cr2 results`, the report and docs/results.md show."""
    from cr2.evaluation.metrics import RISK_ALL_METRICS
    from cr2.report.validity import (CertifiedValidity, certified_verdicts, DeployedPromises, deployed_table_risk,
                                     deployed_verdicts, rule_promise_note, stream_note)
    from cr2_warehouse.db import Warehouse
    from cr2.report.styles import MethodStyles
    from cr2_warehouse.reads import certified_test_risk
    from cr2_warehouse.repository import certified_validity, eval_run, guarantee_cells, guarantee_runs, methods_of_run

    with Warehouse(home, read_only=True) as wh:
        eval_id = newest_eval_run_or_none(wh, label_source)
        run = eval_run(wh, eval_id) if eval_id else None
        certified = certified_verdicts(certified_validity(wh, eval_id)) if eval_id else pd.DataFrame()
        risk = deployed_table_risk(certified_test_risk(wh, eval_id, list(RISK_ALL_METRICS.values()))) if eval_id \
            else None
        label = MethodStyles.from_frame(methods_of_run(wh, eval_id)).label if eval_id else str
        note = label_note(wh, str(run["label_source"])) if run else ""
        deployed = deployed_verdicts(guarantee_cells(wh, run_id))
        runs = guarantee_runs(wh)
        head = runs[runs["run_id"] == run_id]
        streams = stream_note(head.iloc[0].to_dict() if len(head) else None)
    if run is None:
        console.print("Certified routers: no evaluation run in this warehouse — `cr2 run` certifies every router and "
                      "stores its re-splits.", highlight=False)
    elif certified.empty:
        console.print(f"Certified routers: evaluation run {eval_id} stores no re-splits of a certified router (a run "
                      "with evaluation.n_resplits = 0, or without certified routers: certify.routers / certify.rules).",
                      highlight=False)
    else:
        console.print(CertifiedValidity(certified, label, deployed=risk).rich(
            f"every certified router: E[risk] ≤ α at every λ over the certify stage's re-splits of val ∪ test, beside "
            f"the deployed table's own test risk — evaluation run {eval_id}, states {run['dist_id']}, {note}",
            justify="right", left=CertifiedValidity.LEFT))
        console.print(rule_promise_note(certified["rule"]), highlight=False)
    if deployed.empty:
        console.print(f"CR²'s deployed gate: validity run {run_id} ({source}) has no bounded promise beside the crc "
                      "rules' (ltt, Mondrian and the target mode need calibration.delta / target_delta).", highlight=False)
    else:
        console.print(DeployedPromises(deployed).rich(f"CR²'s deployed gate: the promises validity run {run_id} checks "
                                                      f"({source})", justify="right", left=DeployedPromises.LEFT))
    console.print(f"Validity run {run_id}: {streams}", highlight=False)
    console.print(VERDICT_RULE, highlight=False)


def print_simcheck(home: Path, out: dict) -> None:
    """Measured vs simulated label statistics (v_simcheck) and how often the saving's sign agrees."""
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.reads import simcheck_points, simcheck_signs

    with Warehouse(home, read_only=True) as wh:
        df = simcheck_points(wh, out["run_id"])
        sav = simcheck_signs(wh, out["run_id"])
    fit = out.get("fit", {})
    console.print(f"MMLU-Pro questions: {out['n_questions']:,}; fresh v2 fit: " +
                  ", ".join(f"{k} = {v}" for k, v in fit.items()), highlight=False)
    console.print(SimcheckPoints(df).rich("measured vs simulated labels (mean and 5–95 % over simulator seeds)"))
    for r in sav.itertuples():
        console.print(f"{r.source}: fixed-accuracy saving vs KNN has the measured sign at {int(r.same_sign or 0)} of "
                      f"{r.n} (router, target) points both label sets reach", highlight=False)


# ------------------------------------------------------------------ labels and warehouse access
def print_label_sources(df: pd.DataFrame) -> None:
    """`cr2 labels list`: one row per label source."""
    console.print(LabelSources(df).rich("label sources (simulated-* sources are NOT measured)"))


def print_frame(df: pd.DataFrame, more: bool = False) -> None:
    """A query result as a table; `more`: the query has rows beyond these (not fetched)."""
    table = Table(show_lines=False)
    for col in df.columns:
        table.add_column(cells.sql_cell(col))
    for row in df.itertuples(index=False):
        table.add_row(*[cells.sql_cell(v) for v in row])
    console.print(table)
    if more:
        console.print("… more rows not fetched (raise --limit to see more)")
