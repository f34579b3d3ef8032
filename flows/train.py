"""Train: the CR² teacher selector, then the margin gate distilled from the frozen teacher.

Cached: retraining happens only when the train/dev rows, the teacher/gate config or the training code
changed. A cached result whose checkpoint files were deleted is recomputed.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from cr2_tasks.common import run_stage
from cr2_tasks.train import TRAIN


def train(config: Config, home: Path) -> dict:
    return run_stage(TRAIN, config, home)


@flow(name="cr2-train", log_prints=True)
def train_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2.config import load_config
    from cr2_warehouse.db import default_home

    return train(load_config(config_path), Path(home) if home else default_home())
