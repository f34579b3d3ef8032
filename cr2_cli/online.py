"""Route queries online with a deployed router (CR², or a certified '<router>@<rule>'): the CLI's loaders around
cr2.deploy.deployment, by (λ, α) or by target (an accuracy or a budget).

cr2/deploy/deployment.py defines the deployed router (its table, the split it calibrates on, OnlineRouter, target
selection, route-input validation); warehouse/deployment.py reads a deployment. Here: the two compose.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from cr2.config import Config
from cr2.deploy.deployment import CR2, OnlineRouter, check_route_inputs, deployed_router
from cr2_tasks.store import tool_dir
from cr2_warehouse.deployment import read_deployment


def load_deployed_router(config: Config, home: str | Path, version: int | None = None,
                         router: str = CR2) -> tuple[Any, int]:
    """The deployed router `router` (CR²: trained checkpoints; a certified name: its fitted router) with threshold
    table `version` (default: its newest) set, and that version."""
    deployment = read_deployment(home, config, version, router)
    return deployed_router(config, deployment), deployment.version


def load_online_router(config: Config, home: str | Path, router: str = CR2) -> OnlineRouter:
    """The online router of `router`'s newest deployment in `home` (artefacts read once; `cr2 serve` keeps it)."""
    return OnlineRouter.from_deployment(config, read_deployment(home, config, router=router),
                                        tool_dir(home, "encoders"), tool_dir(home, "tokenizers"))


def newer_online_router(current: OnlineRouter, config: Config, home: str | Path) -> OnlineRouter:
    """The online router of the newest deployment in `home`, sharing `current`'s encoder (or `current` itself when
    it already is the newest): what a live `cr2 serve` swaps to after a re-calibration."""
    deployment = read_deployment(home, config)
    if deployment.version == current.version:
        return current
    return current.with_deployment(deployment)


def route_query(config: Config, home: str | Path, question: str, choices: list[str] | None, lam: float, alpha: float,
                distance_m: float | None = None, benchmark: str | None = None, seed: int = 0, router: str = CR2) -> dict:
    """The deployed router's decision for one query (loads the deployed artefacts for this one call)."""
    check_route_inputs(question, choices, lam, alpha, distance_m)
    return load_online_router(config, home, router).route(question, choices, lam, alpha, distance_m, benchmark, seed)


def route_by_target(config: Config, home: str | Path, question: str, choices: list[str] | None,
                    target_accuracy: float | None, budget: float | None, distance_m: float | None = None,
                    benchmark: str | None = None, seed: int = 0, router: OnlineRouter | None = None) -> dict:
    """The CR² decision for one query at the operating point certified for the target (OnlineRouter.choose_target;
    `router`: an already loaded online router, else CR²'s newest deployment in `home`)."""
    if router is None:
        router = load_online_router(config, home)
    return router.route_by_target(question, choices, target_accuracy, budget, distance_m, benchmark, seed)
