"""Certify: every router made certified under every configured rule (tasks/certify.py) — `<router>@<rule>`, its
threshold tables in `thresholds` under the router's name, its rows appended to the evaluation run — then compared at
equal risk (tasks/equal_risk.py, table `equal_risk`).
"""
from __future__ import annotations

from pathlib import Path

from cr2.config import Config
from cr2_tasks.certify import CERTIFY
from cr2_tasks.common import run_stage
from cr2_tasks.equal_risk import EQUAL_RISK


def certify(config: Config, home: Path, trained: dict, baselines: dict, evaluated: dict) -> dict:
    """The certified routers of the evaluation run `evaluated` (cached)."""
    return run_stage(CERTIFY, config, home, trained, baselines, evaluated)


def equal_risk(config: Config, home: Path, evaluated: dict, certified: dict) -> dict:
    """The certified routers of the run compared at equal risk, CR² decomposed against each baseline (cached)."""
    return run_stage(EQUAL_RISK, config, home, evaluated, certified)
