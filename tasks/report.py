"""Report task: the paper's §VII figures and tables from the warehouse views of one evaluation run.

Reads each view (warehouse/views/v_*.sql) for the run, builds the figures and tables (cr2.report.evaluation),
and writes <home>/report/index.html (self-contained) plus tables/<name>.csv and .tex — into a
temporary folder first, swapped in at the end, so a failed build never leaves a half-written report.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
from prefect import task

from cr2.config import Config
from cr2.core.files import replace_dir, temp_dir_beside
from cr2_tasks.common import Reads, Stage
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import (certified_validity, eval_run, methods_of_run, newest_guarantees, run_alpha,
                                  view_for_run, whole_view)
from cr2_warehouse.labels import label_origin

VIEWS = {"pareto": "v_pareto", "fixed_accuracy": "v_fixed_accuracy_ci", "calibration_rules": "v_calibration_rules",
         "risk_vs_alpha": "v_risk_vs_alpha", "local_rate": "v_local_rate", "variants": "v_variants",
         "gate_errors": "v_gate_errors", "benchmark_at_cost": "v_benchmark_at_cost", "ablation": "v_ablation",
         "realised_risk": "v_realised_risk"}


def report_dir(home: str | Path) -> Path:
    return Path(home) / "report"


@task(name="report")
def build_report(config: Config, home: str, evaluated: dict, data_counts: dict, trained: dict, baselines: dict,
                 ablated: dict | None = None) -> dict:
    """Write the HTML report and its CSV/LaTeX tables; returns the page's path and what it contains.

    Every setting the page prints or uses (α, labels, states, threshold version, config hash) is the stored run's
    (eval_runs), never the config in force now: `config` only carries the stage's signature."""
    from cr2.report.deploy import deploy_rows, whole_cost_rows
    from cr2.report.evaluation import ReportInputs, build_figures, build_tables, render_html
    from cr2.evaluation.metrics import RISK_ALL_METRICS
    from cr2_warehouse.reads import certified_test_risk
    from cr2_warehouse.repository import run_deploy
    from cr2.report.latex import to_latex

    run_id = evaluated["run_id"]
    with Warehouse(home, read_only=True) as wh:
        frames = {k: view_for_run(wh, v, run_id) for k, v in VIEWS.items()}
        complexity = whole_view(wh, "v_router_complexity")
        methods = methods_of_run(wh, run_id)
        run = eval_run(wh, run_id)
        origin = label_origin(wh, str(run["label_source"]))
        guarantee_run, guarantees, guarantee_price = newest_guarantees(wh)  # shown when `cr2 guarantees` has run
        certified = certified_validity(wh, run_id)  # the certify stage's re-splits of every certified router
        test_risk = certified_test_risk(wh, run_id, tuple(RISK_ALL_METRICS.values()))  # their deployed tables
        mean_saving = view_for_run(wh, "v_mean_saving_ci", run_id)  # the intervals of the run
        ops_ci = view_for_run(wh, "v_operating_points_ci", run_id)
        ops_ci = ops_ci[ops_ci["benchmark"] == "all"]
        deploy_decisions, deploy_candidates = run_deploy(wh, run_id)  # the stored answer every surface prints
    from cr2.labels import is_simulated, label_note

    header = {"labels_simulated": is_simulated(run["label_source"]), "labels": label_note(run["label_source"], origin),
              **({"label origin": "; ".join(f"{k}: {origin[k]}" for k in ("files", "licence", "extraction_rule",
                                                                           "chars_per_token") if k in origin)}
                 if origin.get("extraction_rule") else {}),
              "label source": run["label_source"],
              "run_id": run_id, "config hash": run["config_hash"], "state distribution": run["dist_id"],
              "threshold table version": int(run["threshold_version"]), "evaluated at (UTC)": str(run["created_at"])[:19],
              "test queries": f"{evaluated['n_test']:,} (risk); {evaluated['n_evaluable']:,} some model solves "
                              "(accuracy, cost, local rate)",
              **{f"queries: {b}": f"{n:,}" for b, n in data_counts.items()}}
    inp = ReportInputs(header=header, complexity=complexity, methods=methods, default_alpha=run_alpha(run),
                       **frames, certified_validity=certified, certified_test_risk=test_risk,
                       guarantee_run=guarantee_run,
                       guarantees=guarantees, guarantee_price=guarantee_price, mean_saving=mean_saving,
                       operating_points_ci=ops_ci,
                       deploy_decision=pd.DataFrame(deploy_rows(deploy_decisions, deploy_candidates)),
                       deploy_cost=pd.DataFrame([{"rule": rule, **r} for rule in deploy_decisions["rule"]
                                                 for r in whole_cost_rows(deploy_candidates, rule)]))
    figures, tables = build_figures(inp), build_tables(inp)
    out = report_dir(home)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_dir_beside(out, mode=0o777)  # as any folder the user makes (umask)
    try:
        (tmp / "tables").mkdir()
        (tmp / "index.html").write_text(render_html(inp, figures, tables), encoding="utf-8")
        for t in tables:
            t.frame.to_csv(tmp / "tables" / f"{t.key}.csv", index=False)
            (tmp / "tables" / f"{t.key}.tex").write_text(to_latex(t.frame), encoding="utf-8")
        replace_dir(tmp, out)  # readers see the previous report or this one, whole
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # gone after the move; what a failure left
    return {"path": str(out / "index.html"), "figures": [f.key for f in figures], "tables": [t.key for t in tables],
            "labels_simulated": header["labels_simulated"]}


def _upstream(evaluated: dict, data_counts: dict, trained: dict, baselines: dict, ablated: dict | None = None) -> list:
    """The evaluation run, the gate, the ablations and baselines it shows (`baselines`: the baselines stage's
    result); `data_counts` come from the ingest, keyed there."""
    return [evaluated["run_id"], trained["gate"]["fingerprint"], sorted((ablated or {}).get("ablations", [])),
            sorted(v["fingerprint"] for v in baselines["routers"].values())]


REPORT = Stage(build_report, Reads(
    upstream=("eval_runs", "methods", "decisions", "metrics", "thresholds", "artifacts", "intervals", "guarantees",
              "labels", "label_runs", "queries", "costs", "models", "deploy_decisions", "deploy_candidates")), upstream=_upstream, outputs=lambda home, r: [r["path"]])
