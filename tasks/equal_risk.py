"""Equal-risk task: every certified router compared at the same risk bound, and CR²'s result decomposed (cr2.evaluation.equal_risk).

Reads the evaluation run's decisions of the certified routers (`<router>@<rule>` at every λ × α of certify.alphas),
of their uncertified sides (`<router>@uncertified`, CR²'s `cr2-fixed-0.5`) and the test rows; draws the
evaluation's bootstrap index (evaluation.bootstrap: the same n_resamples and seed as the intervals task, so the
same resamples) and writes table `equal_risk`: each side's cost at every target accuracy, and the three questions'
paired savings with their bootstrap p-values, Holm-adjusted per family (question × rule × α). The key covers the run's decisions, the
test rows, the bootstrap and certify config and the code the task can run.
"""
from __future__ import annotations

import time

import pandas as pd
from prefect import task

from cr2.config import Config
from cr2_tasks.common import ROUTING_CONFIG, Reads, Rows, RoutingRows, Stage
from cr2_warehouse.db import Warehouse


@task(name="equal-risk")
def compare_equal_risk(config: Config, home: str, evaluated: dict, certified: dict) -> dict:
    """Cost at fixed accuracy with risk ≤ α of every certified router, and the decomposition of CR² vs each baseline."""
    from cr2.evaluation.equal_risk import CR2_UNCERTIFIED, Side, certified_side, decomposition, equal_risk_rows, uncertified_side
    from cr2.evaluation.sweep import CERTIFIED_KINDS
    from cr2.evaluation.fixed_accuracy import VIEW_TARGETS
    from cr2.evaluation.intervals import method_outcomes, always_fallback
    from cr2_tasks.intervals import operating_points, test_sample
    from cr2_warehouse.repository import run_decisions, write_equal_risk

    t0 = time.perf_counter()
    spec = config.evaluation.bootstrap
    run_id = evaluated["run_id"]
    sample = test_sample(config, home)  # the intervals' rows, resamples and grid: every difference paired
    test, keep, counts = sample.test, sample.keep, sample.counts
    with Warehouse(home, read_only=True) as wh:
        decisions = run_decisions(wh, run_id, only=(CERTIFIED_KINDS, (CR2_UNCERTIFIED,)))
    by_side: dict[Side, list] = {}
    for p in operating_points(decisions, test.query_id, test.model_ids):
        by_side.setdefault(Side(p.method, p.alpha), []).append(p)
    outcomes = {side: method_outcomes(points, test, keep) for side, points in by_side.items()}
    routers, rules, alphas = certified["routers"], certified["rules"], [float(a) for a in config.certify.alphas]
    sides = {uncertified_side(r): (r, None) for r in routers}
    sides.update({certified_side(r, rule, a): (r, rule) for r in routers for rule in rules for a in alphas})
    comparisons = decomposition(routers, rules, alphas, pairwise_alpha=float(config.grids.default_alpha))
    rows = equal_risk_rows(outcomes, comparisons, sides, VIEW_TARGETS, counts,
                           always_fallback(test, keep, VIEW_TARGETS, counts), sample.grid, spec.level)
    frame = pd.DataFrame(rows).assign(level=spec.level, seed=spec.seed)
    with Warehouse(home) as wh:
        write_equal_risk(wh, run_id, frame)
    return {"run_id": run_id, "rows": len(frame), "sides": len(outcomes), "n_resamples": int(counts.shape[0]),
            "seconds": round(time.perf_counter() - t0, 2)}


EQUAL_RISK = Stage(compare_equal_risk, Reads(
    config=("evaluation", "certify", "grids.default_alpha", "models", "routing.decision_cost", *ROUTING_CONFIG),
    rows=(Rows("decisions", where=lambda c, evaluated, certified: {"run_id": evaluated["run_id"]}),
          RoutingRows(("test", "val"))),
    upstream=("methods", "eval_runs"), writes=("equal_risk",)),
    upstream=lambda evaluated, certified: [evaluated["run_id"], certified["routers"], certified["rules"]])
