"""Evaluate: CR² over the calibrated λ × α grid and every baseline on the test split; tidy metrics in the warehouse.

Needs the trained gate (flows/train.py), its threshold table (flows/calibrate.py) and the fitted baselines
(flows/baselines.py); the paired bootstrap intervals of the run follow (table `intervals`).
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

import cr2_flows  # noqa: F401  (Prefect loads this file by path: the package's offline environment first, cr2/core/env.py)
from cr2.config import Config
from cr2_tasks.common import run_stage
from cr2_tasks.evaluate import EVALUATE
from cr2_tasks.intervals import INTERVALS


def evaluate(config: Config, home: Path, trained: dict, calibrated: dict, baselines: dict) -> dict:
    return run_stage(EVALUATE, config, home, trained, calibrated, baselines)


def intervals(config: Config, home: Path, trained: dict, evaluated: dict) -> dict:
    """Paired bootstrap intervals of the evaluation run (cached like every stage; table `intervals`)."""
    return run_stage(INTERVALS, config, home, trained, evaluated)


def study_run(config: Config, home: Path) -> dict:
    """What a study re-runs per pool or seed, each stage cached in `home`: prepare → train → calibrate → baselines →
    evaluate → certify → equal-risk → intervals, in `cr2 run`'s order (no ablation, no report); the evaluation's
    result with its equal-risk and intervals results."""
    from cr2_flows.baselines import fit_baselines
    from cr2_flows.calibrate import calibrate
    from cr2_flows.certify import certify, equal_risk
    from cr2_flows.prepare import prepare
    from cr2_flows.train import train

    prepare(config, home)
    trained = train(config, home)
    baselines = fit_baselines(config, home)
    evaluated = evaluate(config, home, trained, calibrate(config, home, trained), baselines)
    certified = certify(config, home, trained, baselines, evaluated)  # every router certified, as in `cr2 run`
    evaluated["equal_risk"] = equal_risk(config, home, evaluated, certified)
    evaluated["intervals"] = intervals(config, home, trained, evaluated)
    return evaluated


@flow(name="cr2-evaluate", log_prints=True)
def evaluate_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2.config import load_config
    from cr2_flows.artifacts import publish_evaluation
    from cr2_flows.baselines import fit_baselines
    from cr2_flows.calibrate import calibrate
    from cr2_flows.train import train
    from cr2_warehouse.db import default_home

    config = load_config(config_path)
    h = Path(home) if home else default_home()
    trained = train(config, h)
    out = evaluate(config, h, trained, calibrate(config, h, trained), fit_baselines(config, h))
    out["intervals"] = intervals(config, h, trained, out)
    out["artifacts"] = publish_evaluation(config, h, out, flow_name="cr2-evaluate")
    return out
