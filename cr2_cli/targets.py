"""Operate by target (issue 21): pick the certified (λ, α, τ) for an accuracy target or a cost budget, then route.

The deployed gate and teacher score the val split of the deployed thresholds (same states and labels);
cr2.targets.choose_by_target splits it (seeded by the config) into a threshold half and a selection half
and certifies the choice with Learn-then-Test at δ = calibration.target_delta. The choice is cached per
(target, thresholds version) for the life of the router (`cr2 serve` keeps it).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from cr2.config import Config
from cr2.errors import DataValidationError
from warehouse.db import Warehouse


def choose_target(router, target_accuracy: float | None, budget: float | None) -> dict:
    """The certified operating point for one target on the router's own val split (cached on the router)."""
    from cr2.crc import rule_for, rule_risk
    from cr2.targets import choose_by_target
    from cr2.utility import risk_label
    from warehouse.routing_data import load_routing_sets

    key = (router.version, target_accuracy, budget)
    cache = router.__dict__.setdefault("_target_cache", {})
    if key in cache:
        return cache[key]
    cfg, table = router.config, router.router.threshold_table_
    with Warehouse(router.home, read_only=True) as wh:
        val = load_routing_sets(wh, tuple(m.id for m in cfg.models), dist_id=table.dist_id,
                                label_source=table.label_source, seed=int(cfg.splits.seed),
                                encoder=cfg.embedding.store_name, decision_cost=cfg.routing.decision_cost)["val"]
    if len(val) == 0:
        raise DataValidationError("the val split is empty: a target needs calibration queries to certify it")
    lams = np.asarray(table.scored_lams)
    proba = router.router.proba(val.embedding)
    # [cr2 decision] the certified choice decides and accounts with the pre-execution cost ĉ: the only cost
    # known for a query before it runs (issue 16); a budget is therefore a bound on the mean estimated cost
    cost = np.asarray(val.decision_cost, dtype=np.float64)
    cal = cfg.calibration
    # issue 26: the candidates control the same risk as the deployed table (CRC on its label), and say so
    risk = (rule_risk(table.rule).name if rule_risk(table.rule) else "teacher-disagreement")
    labels = risk_label(risk, lams, proba=proba, decision_cost=cost, correct=val.correct, cost=val.cost)
    choice = choose_by_target(router.router.scores(val.embedding, lams), labels, proba, cost,
                              val.correct, lams, np.asarray(table.alphas), rng=np.random.default_rng(cfg.seed),
                              rule=rule_for("crc", risk),
                              target_accuracy=target_accuracy, budget=budget, delta=cal.target_delta,
                              variant=cfg.routing.deferred_variant, cost_max=cal.cost_max,
                              select_fraction=cal.target_select_fraction)
    cache[key] = choice.as_dict()
    return cache[key]


def route_by_target(config: Config, home: str | Path, question: str, choices: list[str] | None,
                    target_accuracy: float | None, budget: float | None, distance_m: float | None = None,
                    benchmark: str = "mmlu", seed: int = 0, router=None) -> dict:
    """The CR² decision for one query at the operating point certified for the target (see module docstring)."""
    from cr2_cli.online import OnlineRouter

    router = router or OnlineRouter.load(config, home)
    c = choose_target(router, target_accuracy, budget)
    out = router.route(question, choices, c["lam"], c["alpha"], distance_m, benchmark, seed, tau=c["tau"])
    return {**out, "rule": c["rule"], "target_choice": c}  # the target's τ comes from c["rule"] (same risk)
