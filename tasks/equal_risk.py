"""Equal-risk task: every certified router compared at the same risk bound, and CR²'s result decomposed (cr2.evaluation.equal_risk).

Reads the evaluation run's decisions of the certified routers (`<router>@<rule>` at every λ × α of certify.alphas),
of their uncertified sides (`<router>@uncertified`, CR²'s `cr2-fixed-0.5`) and the test rows; draws the
evaluation's bootstrap index (evaluation.bootstrap: the same n_resamples and seed as the intervals task, so the
same resamples) and writes table `equal_risk`: each side's cost at every target accuracy, and the three questions'
paired savings with their bootstrap p-values, Holm-adjusted per family (question × rule × α); and the deploy rule
(cr2.evaluation.deploy) per rule at grids.default_alpha over the certified routers, the same routers with the device
switched off and the cheapest Always edge model — its tests in `equal_risk` (question deploy), its answer in
`deploy_decisions`, its candidates with the whole cost of their decisions (artefact FLOPs) in `deploy_candidates`.
The key covers the run's decisions, the test rows, the artefacts, the bootstrap and certify config and the code the
task can run.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
from prefect import task

from cr2.evaluation.deploy import called_dearer, deploy_decision, grid_log_cost
from cr2.evaluation.equal_risk import PAIRWISE
from cr2.evaluation.fixed_accuracy import grid_columns
from cr2.method.utility import DEVICE_INDEX

from cr2.config import Config
from cr2_tasks.common import ROUTING_CONFIG, Reads, Rows, RoutingRows, Stage
from cr2_warehouse.db import Warehouse


@task(name="equal-risk")
def compare_equal_risk(config: Config, home: str, evaluated: dict, certified: dict) -> dict:
    """Cost at fixed accuracy with risk ≤ α of every certified router, the decomposition of CR² vs each baseline, and
    the deploy rule's answer per rule at the default α (cr2.evaluation.deploy)."""
    from cr2.evaluation.deploy import ALWAYS_EDGE, RouterHead, candidate_records, decision_record, deploy_candidates
    from cr2.evaluation.equal_risk import (CR2_UNCERTIFIED, Side, certified_side, decomposition, equal_risk_rows,
                                           no_device_side, side_costs, uncertified_side)
    from cr2.evaluation.sweep import CERTIFIED_KINDS
    from cr2.evaluation.fixed_accuracy import VIEW_TARGETS
    from cr2.evaluation.intervals import method_outcomes, always_fallback, edge_fallback
    from cr2.evaluation.decisions import operating_points
    from cr2_tasks.intervals import test_sample
    from cr2_warehouse.repository import router_heads, run_decisions, write_deploy, write_equal_risk

    t0 = time.perf_counter()
    spec = config.evaluation.bootstrap
    run_id = evaluated["run_id"]
    sample = test_sample(config, home)  # the intervals' rows, resamples and grid: every difference paired
    test, keep, counts = sample.test, sample.keep, sample.counts
    with Warehouse(home, read_only=True) as wh:
        decisions = run_decisions(wh, run_id, only=(CERTIFIED_KINDS, (CR2_UNCERTIFIED,)))
        heads = {r: RouterHead(**h) for r, h in router_heads(wh, config.labels.source).items()}
    by_side: dict[Side, list] = {}
    for p in operating_points(decisions, test.query_id, test.model_ids):
        by_side.setdefault(Side(p.method, p.alpha), []).append(p)
    outcomes = {side: method_outcomes(points, test, keep) for side, points in by_side.items()}
    routers, rules, alphas = certified["routers"], certified["rules"], [float(a) for a in config.certify.alphas]
    default_alpha = float(config.grids.default_alpha)

    def at_default(side: Side) -> bool:  # the deploy rule's sides: certified at the default α, or without α
        return side.alpha is None or abs(float(side.alpha) - default_alpha) < 1e-12

    defer_share = {side.method: float(np.mean([np.mean(p.chosen[keep] != DEVICE_INDEX) for p in points]))
                   for side, points in by_side.items() if at_default(side)}
    sides = {uncertified_side(r): (r, None) for r in routers}
    sides.update({certified_side(r, rule, a): (r, rule) for r in routers for rule in rules for a in alphas})
    comparisons = decomposition(routers, rules, alphas, pairwise_alpha=default_alpha)
    fallback = always_fallback(test, keep, VIEW_TARGETS, counts)
    edge = edge_fallback(test, keep, VIEW_TARGETS, counts)  # a candidate without a device falls back to an edge model
    costs = side_costs(outcomes, VIEW_TARGETS, counts, fallback, {no_device_side(r): edge for r in routers})
    rows = equal_risk_rows(outcomes, comparisons, sides, VIEW_TARGETS, counts, fallback, sample.grid, spec.level,
                           costs=costs)
    decisions_out, candidates_out = [], []
    if default_alpha in alphas:
        cols = grid_columns(VIEW_TARGETS, fallback.reachable_grid(sample.grid).targets)  # the mean's grid
        by_name = {side.method: cost for side, cost in costs[1].items() if at_default(side)}
        by_name[ALWAYS_EDGE] = (edge.full, edge.resampled)
        for rule in rules:
            cands = [c for c in deploy_candidates(rule, routers, heads, defer_share) if c.name in by_name]
            if len(cands) < 2:
                continue
            log_cost = {c.name: grid_log_cost(*by_name[c.name], cols) for c in cands}
            elsewhere = called_dearer(rows, rule, default_alpha, questions=("certified-score", PAIRWISE))
            decision, tests = deploy_decision(cands, log_cost, rule, default_alpha, level=spec.level,
                                              dearer_elsewhere={s: [o for o, _ in f] for s, f in elsewhere.items()})
            rows += tests
            decisions_out.append(decision_record(decision))
            candidates_out += candidate_records(decision)
    frame = pd.DataFrame(rows).assign(level=spec.level, seed=spec.seed)
    with Warehouse(home) as wh:
        write_equal_risk(wh, run_id, frame)
        write_deploy(wh, run_id, pd.DataFrame(decisions_out), pd.DataFrame(candidates_out))
    return {"run_id": run_id, "rows": len(frame), "sides": len(outcomes), "n_resamples": int(counts.shape[0]),
            "deploy": {d["rule"]: [d["answer"], d["recommended"], d["undecided_with"]] for d in decisions_out},
            "seconds": round(time.perf_counter() - t0, 2)}


EQUAL_RISK = Stage(compare_equal_risk, Reads(
    config=("evaluation", "certify", "grids.default_alpha", "models", "routing.decision_cost", *ROUTING_CONFIG),
    rows=(Rows("decisions", where=lambda c, evaluated, certified: {"run_id": evaluated["run_id"]}),
          RoutingRows(("test", "val"))),
    upstream=("methods", "eval_runs", "artifacts"), writes=("equal_risk", "deploy_decisions", "deploy_candidates")),
    upstream=lambda evaluated, certified: [evaluated["run_id"], certified["routers"], certified["rules"]])
