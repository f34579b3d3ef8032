"""Evaluate: CR² over the calibrated λ × α grid on the test split; tidy metrics in the warehouse."""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from tasks.common import bind
from tasks.evaluate import evaluate as evaluate_task
from tasks.evaluate import evaluate_key
from warehouse.db import Warehouse


def evaluate(config: Config, home: Path, trained: dict, calibrated: dict) -> dict:
    with Warehouse(home) as wh:
        key = evaluate_key(config, wh, trained, calibrated)
    state = bind(evaluate_task, home)(config, str(home), key, trained, calibrated, return_state=True)
    return {**state.result(), "cached": state.name == "Cached"}


@flow(name="cr2-evaluate", log_prints=True)
def evaluate_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2.config import load_config
    from flows.calibrate import calibrate
    from flows.train import train
    from warehouse.db import default_home

    config = load_config(config_path)
    h = Path(home) if home else default_home()
    trained = train(config, h)
    return evaluate(config, h, trained, calibrate(config, h, trained))
