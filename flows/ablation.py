"""Ablation: the paper's component ablation — extra gates trained with parts of the loss (tasks/ablation.py),
calibrated and evaluated like the full gate; their metrics are appended to the evaluation run.
"""
from __future__ import annotations

from pathlib import Path

from cr2.config import Config
from cr2_tasks.ablation import ABLATION
from cr2_tasks.common import run_stage


def ablation(config: Config, home: Path, trained: dict, evaluated: dict) -> dict:
    """The component ablation of the evaluation run `evaluated` (cached)."""
    return run_stage(ABLATION, config, home, trained, evaluated)
