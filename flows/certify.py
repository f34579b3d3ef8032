"""Certify: every router made certified under every configured rule (tasks/certify.py) — `<router>@<rule>`, its
threshold tables in `thresholds` under the router's name, its rows appended to the evaluation run.
"""
from __future__ import annotations

from pathlib import Path

from cr2.config import Config
from tasks.certify import CERTIFY
from tasks.common import run_stage


def certify(config: Config, home: Path, trained: dict, baselines: dict, evaluated: dict) -> dict:
    """The certified routers of the evaluation run `evaluated` (cached)."""
    return run_stage(CERTIFY, config, home, trained, baselines, evaluated)
