"""Evaluate: CR² over the calibrated λ × α grid on the test split; tidy metrics in the warehouse."""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from tasks.common import bind, in_home
from tasks.evaluate import evaluate as evaluate_task
from tasks.evaluate import evaluate_key
from warehouse.db import Warehouse


def fit_baselines(config: Config, home: Path) -> dict:
    """Fit every configured baseline (cached) and record its test predictions."""
    from tasks.baselines import baselines_key
    from tasks.baselines import fit_baselines as fit_task

    with Warehouse(home) as wh:
        key = baselines_key(config, wh)
    state = bind(fit_task, home)(config, str(home), key, return_state=True)
    result = state.result()
    if not all(in_home(home, b["path"]).is_file() for b in result.values()):
        state = bind(fit_task, home).with_options(refresh_cache=True)(config, str(home), key, return_state=True)
        result = state.result()
    return {"routers": result, "cached": state.name == "Cached"}


def evaluate(config: Config, home: Path, trained: dict, calibrated: dict, baselines: dict) -> dict:
    routers = baselines["routers"]
    with Warehouse(home) as wh:
        key = evaluate_key(config, wh, trained, calibrated, routers)
    state = bind(evaluate_task, home)(config, str(home), key, trained, calibrated, routers, return_state=True)
    return {**state.result(), "cached": state.name == "Cached"}


def intervals(config: Config, home: Path, trained: dict, evaluated: dict) -> dict:
    """Paired bootstrap intervals of the evaluation run (cached like every stage; table `intervals`)."""
    from tasks.intervals import compute_intervals, intervals_key

    with Warehouse(home) as wh:
        key = intervals_key(config, wh, evaluated, trained)
    state = bind(compute_intervals, home)(config, str(home), key, trained, evaluated, return_state=True)
    return {**state.result(), "cached": state.name == "Cached"}


@flow(name="cr2-evaluate", log_prints=True)
def evaluate_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2.config import load_config
    from flows.calibrate import calibrate
    from flows.train import train
    from warehouse.db import default_home

    from flows.artifacts import publish_evaluation

    config = load_config(config_path)
    h = Path(home) if home else default_home()
    trained = train(config, h)
    out = evaluate(config, h, trained, calibrate(config, h, trained), fit_baselines(config, h))
    out["intervals"] = intervals(config, h, trained, out)
    out["artifacts"] = publish_evaluation(config, h, out, flow_name="cr2-evaluate")
    return out
