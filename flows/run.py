"""cr2 run: the whole pipeline as one flow in one process.

ingest → prepare → train → calibrate → baselines → evaluate → certify → equal-risk → intervals → ablation → report. Each stage is a
cached, validated Prefect task, so a warm re-run with nothing changed does almost nothing. The baselines' and the
ablated gates' fits need neither the gate nor the evaluation: they start in background processes as soon as their
inputs exist (the ablated gates as soon as the train stage has its teacher; tasks/ahead.py) and their stages
collect them. One process means the ephemeral
Prefect server (13–26 s to start) is paid once.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

import cr2_flows  # noqa: F401  (Prefect loads this file by path: the package's offline environment first, cr2/core/env.py)
from cr2.config import load_config
from cr2_flows.ablation import ablation
from cr2_flows.artifacts import publish_evaluation
from cr2_flows.baselines import fit_baselines
from cr2_flows.calibrate import calibrate
from cr2_flows.certify import certify, equal_risk
from cr2_flows.evaluate import evaluate, intervals
from cr2_flows.ingest import ingest
from cr2_flows.prepare import prepare
from cr2_flows.report import report
from cr2_flows.train import train
from cr2_tasks.ablation import start_ablation_fits
from cr2_tasks import ahead
from cr2_tasks.baselines import start_baseline_fits
from cr2_tasks.inputs import fit_workers
from cr2_tasks.train import trained_teacher


@flow(name="cr2-run", log_prints=True)
def run_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2_warehouse.db import default_home

    config = load_config(config_path)
    h = Path(home) if home else default_home()
    summary: dict = {"ingest": ingest(config, h)}
    summary["prepare"] = prepare(config, h)
    # independent fits start as soon as their inputs exist (tasks/ahead.py), in one process fewer than fit.workers:
    # the flow's own process fits too (the teacher, the gate) and keeps a core for it
    with ahead.fits_ahead(max(1, fit_workers(config) - 1)):
        start_baseline_fits(config, h)
        ahead.when("teacher", lambda teacher: start_ablation_fits(config, h, teacher))  # before the gate's fit
        summary["train"] = train(config, h)
        if ahead.pending("teacher"):  # a cached train stage announced nothing: its stored teacher
            ahead.announce("teacher", trained_teacher(h, summary["train"]))
        summary["calibrate"] = calibrate(config, h, summary["train"])
        summary["baselines"] = fit_baselines(config, h)
        summary["evaluate"] = evaluate(config, h, summary["train"], summary["calibrate"], summary["baselines"])
        # certify appends its routers' decisions to the evaluation run before intervals reads the run's decisions
        summary["certify"] = certify(config, h, summary["train"], summary["baselines"], summary["evaluate"])
        summary["equal_risk"] = equal_risk(config, h, summary["evaluate"], summary["certify"])
        summary["intervals"] = intervals(config, h, summary["train"], summary["evaluate"])
        summary["ablation"] = ablation(config, h, summary["train"], summary["evaluate"])
    counts = {b: row["queries"] for b, row in summary["ingest"]["benchmarks"].items()}
    summary["report"] = report(config, h, summary["evaluate"], summary["train"], summary["baselines"], counts,
                               summary["ablation"])
    summary["artifacts"] = publish_evaluation(config, h, summary["evaluate"], summary["report"], flow_name="cr2-run")
    return summary
