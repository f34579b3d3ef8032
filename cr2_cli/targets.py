"""Operate by target: the CLI's entry points; the certified choice is cr2.deploy.deployment.OnlineRouter.choose_target."""
from __future__ import annotations

from pathlib import Path

from cr2.config import Config
from cr2.deploy.deployment import OnlineRouter


def choose_target(router: OnlineRouter, target_accuracy: float | None, budget: float | None) -> dict:
    """The certified operating point for one target on the deployment's calibration split (cached on the router)."""
    return router.choose_target(target_accuracy, budget)


def route_by_target(config: Config, home: str | Path, question: str, choices: list[str] | None,
                    target_accuracy: float | None, budget: float | None, distance_m: float | None = None,
                    benchmark: str = "mmlu", seed: int = 0, router: OnlineRouter | None = None) -> dict:
    """The CR² decision for one query at the operating point certified for the target."""
    if router is None:
        from cr2_cli.online import load_online_router

        router = load_online_router(config, home)
    return router.route_by_target(question, choices, target_accuracy, budget, distance_m, benchmark, seed)
