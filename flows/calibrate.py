"""Calibrate: the CRC threshold table τ*(λ; α) of the trained gate on the val split, as a new version.

Needs a trained gate (flows/train.py). Changing only the state distribution or the grids re-calibrates
without retraining, provided the training rows are unchanged.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from cr2_tasks.calibrate import CALIBRATE
from cr2_tasks.common import run_stage


def calibrate(config: Config, home: Path, trained: dict, extra_lams: tuple[float, ...] = ()) -> dict:
    return run_stage(CALIBRATE, config, home, trained, tuple(float(v) for v in extra_lams))


@flow(name="cr2-calibrate", log_prints=True)
def calibrate_flow(config_path: str | None = None, home: str | None = None, extra_lams: list[float] | None = None,
                   calibration: dict | None = None) -> dict:
    from cr2.config import load_config
    from cr2_flows.train import train
    from cr2_warehouse.db import default_home

    # `calibration` overrides config.calibration (rule, delta, group, small_group) from the CLI
    config = load_config(config_path, overrides={"calibration": calibration} if calibration else None)
    h = Path(home) if home else default_home()
    return calibrate(config, h, train(config, h), tuple(extra_lams or ()))
