"""Level task: the A/A simulation of the equal-risk test on an evaluation run's stored decisions (cr2.studies.level).

Reads the run's certified and uncertified sides (the decisions the equal-risk stage reads, each side's λ sweep in
ascending λ), the test rows and the validation grid (tasks/intervals.test_sample: the page's counted rows, targets
and grid); builds the page's families at the default α — gate quality, and per rule calibrated-vs-default and
certified-score — and runs the label-permuted A/A simulation on them; writes table `level_study`. The study id
covers the run, the replicates, the resamples, the seed and the code the task can run.
"""
from __future__ import annotations

import time

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2_tasks.common import ROUTING_CONFIG, Reads, Rows, RoutingRows, Stage, cache_key, task_code_hash
from cr2_warehouse.db import Warehouse


def level_families(outcomes: dict, routers: list[str], rules: list[str], alpha: float) -> dict:
    """The page's families at α (cr2.evaluation.equal_risk.decomposition over the QUESTIONS), each comparison as a
    NullPair of its two sides' outcomes (both evaluated)."""
    from cr2.evaluation.equal_risk import QUESTIONS, decomposition
    from cr2.studies.level import NullPair

    fams: dict[tuple, list] = {}
    for c in decomposition(routers, rules, [alpha]):
        if c.question in QUESTIONS and c.a in outcomes and c.b in outcomes:
            fams.setdefault((c.question, c.rule, c.alpha), []).append(
                NullPair(f"{c.a.method} vs {c.b.method}", outcomes[c.a], outcomes[c.b]))
    return fams


@task(name="level")
def study_level(config: Config, home: str, run_id: str, n_replicates: int, n_resamples: int, seed: int) -> dict:
    """The A/A rejection rate per family of run `run_id` and the page's p Monte-Carlo error (table level_study)."""
    from cr2.evaluation.equal_risk import CR2_UNCERTIFIED, Side
    from cr2.evaluation.fixed_accuracy import VIEW_TARGETS, always_outcomes
    from cr2.evaluation.intervals import method_outcomes
    from cr2.evaluation.sweep import CERTIFIED_KINDS
    from cr2.studies.level import aa_simulation, level_rows
    from cr2.evaluation.decisions import operating_points
    from cr2_tasks.intervals import test_sample
    from cr2_warehouse.level import write_level_study
    from cr2_warehouse.repository import run_decisions, utc_now

    t0 = time.perf_counter()
    sample = test_sample(config, home)
    test, keep = sample.test, sample.keep
    with Warehouse(home, read_only=True) as wh:
        decisions = run_decisions(wh, run_id, only=(CERTIFIED_KINDS, (CR2_UNCERTIFIED,)))
    by_side: dict = {}
    for p in operating_points(decisions, test.query_id, test.model_ids):
        by_side.setdefault(Side(p.method, p.alpha), []).append(p)
    outcomes = {side: method_outcomes(sorted(points, key=lambda p: p.lam), test, keep)
                for side, points in by_side.items()}
    names = [s.method for s in outcomes]
    routers = sorted({m.split("@")[0] for m in names if "@" in m})
    rules = sorted({m.split("@")[1] for m in names if "@" in m} - {"uncertified", "no-device"})
    alpha = float(config.grids.default_alpha)
    fams = level_families(outcomes, ["cr2", *[r for r in routers if r != "cr2"]], rules, alpha)
    always = always_outcomes(test.correct, test.cost, keep)
    result = aa_simulation(fams, always, VIEW_TARGETS, sample.grid, keep, n_replicates, n_resamples,
                           np.random.default_rng(seed), config.evaluation.bootstrap.level)
    wall_s = round(time.perf_counter() - t0, 2)
    rows = pd.DataFrame(level_rows(result, int(config.evaluation.bootstrap.n_resamples_compare))).assign(
        run_id=run_id, seed=int(seed), wall_s=wall_s, created_at=utc_now())
    study_id = cache_key("level", run_id, n_replicates, n_resamples, seed,
                                    int(config.evaluation.bootstrap.n_resamples_compare), task_code_hash(study_level))
    with Warehouse(home) as wh:
        write_level_study(wh, study_id, rows)
    return {"study_id": study_id, "run_id": run_id, "families": len(rows), "n_replicates": int(n_replicates),
            "n_resamples": int(n_resamples), "seconds": wall_s}


LEVEL = Stage(study_level, Reads(
    config=("evaluation", "grids.default_alpha", "models", "routing.decision_cost", *ROUTING_CONFIG),
    rows=(Rows("decisions", where=lambda c, run_id, *_: {"run_id": run_id}), RoutingRows(("test", "val"))),
    upstream=("methods", "eval_runs"), writes=("level_study",)),
    upstream=lambda run_id, n_replicates, n_resamples, seed: [run_id, n_replicates, n_resamples, seed])
