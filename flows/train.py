"""Train: the CR² teacher selector, then the margin gate distilled from the frozen teacher.

Cached: retraining happens only when the train/dev rows, the teacher/gate config or the training code
changed. A cached result whose checkpoint files were deleted is recomputed.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from tasks.common import bind, in_home
from tasks.train import train_cr2, train_key
from warehouse.db import Warehouse


def train(config: Config, home: Path) -> dict:
    with Warehouse(home) as wh:
        key = train_key(config, wh)
    state = bind(train_cr2, home)(config, str(home), key, return_state=True)
    result = state.result()
    if not all(in_home(home, result[k]["path"]).is_file() for k in ("teacher", "gate")):  # checkpoints removed since
        state = bind(train_cr2, home).with_options(refresh_cache=True)(config, str(home), key, return_state=True)
        result = state.result()
    return {**result, "cached": state.name == "Cached"}


@flow(name="cr2-train", log_prints=True)
def train_flow(config_path: str | None = None, home: str | None = None) -> dict:
    from cr2.config import load_config
    from warehouse.db import default_home

    return train(load_config(config_path), Path(home) if home else default_home())
