"""Route queries online with the deployed CR² router: the CLI's loaders around cr2.deployment.

cr2/deployment.py defines the deployed router (its table, the split it calibrates on, OnlineRouter, target
selection, route-input validation); warehouse/deployment.py reads a deployment. Here: the two compose.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from cr2.config import Config
from cr2.deployment import OnlineRouter, check_route_inputs, deployed_router  # noqa: F401  (re-exported)
from tasks.common import cache_dir
from warehouse.deployment import read_deployment


def load_deployed_router(config: Config, home: str | Path, version: int | None = None) -> tuple[Any, int]:
    """The deployed CR² router (trained checkpoints + threshold table `version`, default the newest) and its version."""
    deployment = read_deployment(home, config, version)
    return deployed_router(config, deployment), deployment.version


def load_online_router(config: Config, home: str | Path) -> OnlineRouter:
    """The online router of the newest deployment in `home` (artefacts read once; `cr2 serve` keeps it)."""
    return OnlineRouter.from_deployment(config, read_deployment(home, config), cache_dir(Path(home)))


def newer_online_router(current: OnlineRouter, config: Config, home: str | Path) -> OnlineRouter:
    """The online router of the newest deployment in `home`, sharing `current`'s encoder (or `current` itself when
    it already is the newest): what a live `cr2 serve` swaps to after a re-calibration."""
    deployment = read_deployment(home, config)
    if deployment.version == current.version:
        return current
    return current.with_deployment(deployment)


def route_query(config: Config, home: str | Path, question: str, choices: list[str] | None, lam: float, alpha: float,
                distance_m: float | None = None, benchmark: str = "mmlu", seed: int = 0) -> dict:
    """The CR² decision for one query (loads the deployed artefacts for this one call)."""
    check_route_inputs(question, choices, lam, alpha, distance_m)
    return load_online_router(config, home).route(question, choices, lam, alpha, distance_m, benchmark, seed)
