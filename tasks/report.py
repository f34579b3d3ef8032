"""Report task: the paper's §VII figures and tables from the warehouse views of one evaluation run.

Reads each view (warehouse/views/v_*.sql) for the run, builds the figures and tables (cr2.report),
and writes <home>/report/index.html (self-contained) plus tables/<name>.csv and .tex — into a
temporary folder first, swapped in at the end, so a failed build never leaves a half-written report.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from prefect import task

from cr2.config import Config
from tasks.common import code_hash, make_key
from warehouse.db import Warehouse, relation

REPORT_CODE = ("cr2.report", "tasks.report")
VIEWS = {"pareto": "v_pareto", "fixed_accuracy": "v_fixed_accuracy", "calibration_rules": "v_calibration_rules",
         "risk_vs_alpha": "v_risk_vs_alpha", "local_rate": "v_local_rate", "variants": "v_variants",
         "gate_errors": "v_gate_errors", "benchmark_at_cost": "v_benchmark_at_cost", "ablation": "v_ablation"}


def report_key(config: Config, evaluated: dict, trained: dict, baselines: dict, ablated: dict | None = None) -> str:
    return make_key("report", evaluated["run_id"], trained["gate"]["fingerprint"],
                    sorted((ablated or {}).get("ablations", [])),
                    sorted(v["fingerprint"] for v in baselines.values()), config.section_hash("grids"),
                    code_hash(*REPORT_CODE))


def report_dir(home: str | Path) -> Path:
    return Path(home) / "report"


@task(name="report")
def build_report(config: Config, home: str, key: str, evaluated: dict, data_counts: dict) -> dict:
    """Write the HTML report and its CSV/LaTeX tables; returns the page's path and what it contains."""
    from cr2.report import ReportInputs, build_figures, build_tables, render_html, to_latex

    run_id = evaluated["run_id"]
    with Warehouse(home, read_only=True) as wh:
        frames = {k: wh.df(f"SELECT * FROM {relation(v)} WHERE run_id = ?", [run_id]) for k, v in VIEWS.items()}
        complexity = wh.df("SELECT * FROM v_router_complexity")
        run = wh.df("SELECT * FROM eval_runs WHERE run_id = ?", [run_id]).iloc[0]
    header = {"labels_simulated": str(run["label_source"]).startswith("simulated"), "label source": run["label_source"],
              "run_id": run_id, "config hash": run["config_hash"], "state distribution": run["dist_id"],
              "threshold table version": int(run["threshold_version"]), "evaluated at (UTC)": str(run["created_at"])[:19],
              "test queries": f"{evaluated['n_test']:,} (risk); {evaluated['n_evaluable']:,} some model solves "
                              "(accuracy, cost, local rate)",
              **{f"queries: {b}": f"{n:,}" for b, n in data_counts.items()}}
    inp = ReportInputs(header=header, complexity=complexity, default_alpha=config.grids.default_alpha, **frames)
    figures, tables = build_figures(inp), build_tables(inp)
    out = report_dir(home)
    tmp = out.with_name("report.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "tables").mkdir(parents=True)
    (tmp / "index.html").write_text(render_html(inp, figures, tables), encoding="utf-8")
    for t in tables:
        t.frame.to_csv(tmp / "tables" / f"{t.key}.csv", index=False)
        (tmp / "tables" / f"{t.key}.tex").write_text(to_latex(t.frame), encoding="utf-8")
    old = out.with_name("report.old")
    shutil.rmtree(old, ignore_errors=True)
    if out.exists():
        out.rename(old)
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return {"path": str(out / "index.html"), "figures": [f.key for f in figures], "tables": [t.key for t in tables],
            "labels_simulated": header["labels_simulated"]}
