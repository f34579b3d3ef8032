"""Intervals task: paired bootstrap intervals of an evaluation run, stored tidy in `intervals`.

Reads the run's per-query decisions, the test routing set and the frozen teacher's p_m(x) (the risk is defined
under it); draws ONE resample index over the test queries (evaluation.bootstrap: n_resamples, seed) and hands it
to every method; writes the interval of every per-query metric at every operating point (cr2.evaluation.metrics
.PER_QUERY_METRICS) and of every learned method's fixed-accuracy saving vs KNN (cr2.evaluation.intervals). The key covers
the run's decisions, the test rows, the evaluation config section and the code the task can run.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2.evaluation.decisions import operating_points
from cr2_tasks.common import ROUTING_CONFIG, Reads, Rows, RoutingRows, Stage
from cr2_warehouse.db import Warehouse


@dataclass(frozen=True)
class TestSample:
    """The evaluation's test rows and its ONE bootstrap index (evaluation.bootstrap.seed, stratified by `keep`),
    shared by every method:
    `counts` [B, n] has n_resamples_compare rows (every comparison), the per-point metric intervals read its first
    n_resamples; `grid` is the target grid fixed before the test split is read."""

    test: Any
    keep: np.ndarray  # [n] bool, the rows accuracy and cost count (queries some model solves, unless configured)
    counts: np.ndarray  # [B, n]
    grid: np.ndarray  # the mean saving's targets (evaluation.target_grid, or from the validation split)

    def metric_counts(self, n_resamples: int) -> np.ndarray:
        return self.counts[:n_resamples]


def test_sample(config: Config, home: str, sets: dict | None = None) -> TestSample:
    """The evaluation's test rows, the rows its metrics count, its shared resample counts and its target grid
    (`sets`: the routing sets when the caller loaded them already)."""
    from cr2.evaluation.statistics import resample_counts, resample_indices
    from cr2.evaluation.metrics import evaluable_mask
    from cr2_tasks.inputs import load_sets

    spec = config.evaluation.bootstrap
    sets = load_sets(config, home) if sets is None else sets
    test, val = sets["test"], sets["val"]
    keep = evaluable_mask(test) if config.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    b = max(spec.n_resamples, spec.n_resamples_compare)
    # stratified by the counted rows: every resample holds as many of them as the test set, so every mean over them
    # (accuracy, cost, a saving) exists on every resample
    idx = resample_indices(len(test), b, np.random.default_rng(spec.seed), strata=keep)
    return TestSample(test, keep, resample_counts(idx, len(test)), validation_grid(config, val))


def validation_grid(config: Config, val) -> np.ndarray:
    """The mean saving's target grid: evaluation.target_grid, or fixed from the validation split's Always-model
    accuracies (cr2.evaluation.fixed_accuracy.target_grid) — never from the test split."""
    from cr2.evaluation.fixed_accuracy import target_grid
    from cr2.evaluation.metrics import evaluable_mask

    if config.evaluation.target_grid is not None:
        return np.asarray(config.evaluation.target_grid, dtype=np.float64)
    return target_grid(val.correct, evaluable_mask(val) if config.evaluation.exclude_unsolvable else None)


@task(name="intervals")
def compute_intervals(config: Config, home: str, trained: dict, evaluated: dict) -> dict:
    """Paired bootstrap intervals of every operating point and every learned method's saving vs KNN."""
    from cr2.evaluation.sweep import CERTIFIED_KINDS
    from cr2.evaluation.families import annotate, interval_family
    from cr2.evaluation.fixed_accuracy import VIEW_TARGETS
    from cr2.evaluation.metrics import PER_QUERY_METRICS, RISK_ALL_METRICS
    from cr2.evaluation.intervals import (method_outcomes, metric_intervals, points_by_method, saving_interval_rows,
                                          always_fallback)
    from cr2_tasks.inputs import cr2_router
    from cr2_warehouse.repository import methods_of_run, run_decisions, write_intervals

    t0 = time.perf_counter()
    spec = config.evaluation.bootstrap
    run_id = evaluated["run_id"]
    sample = test_sample(config, home)
    test, keep = sample.test, sample.keep
    with Warehouse(home, read_only=True) as wh:
        # certified routers (cr2.routers.certify) are compared at equal risk, not point by point: their many operating
        # points (router × rule × α × λ) stay out of the per-point intervals …
        decisions = run_decisions(wh, run_id, skip_kinds=CERTIFIED_KINDS)
        certified = run_decisions(wh, run_id, only=((CERTIFIED_KINDS[0],), ()))
        methods = methods_of_run(wh, run_id)
    proba = cr2_router(config, trained, home).proba(test.embedding)
    points = operating_points(decisions, test.query_id, test.model_ids)
    counts = sample.metric_counts(spec.n_resamples)
    rows = metric_intervals(points, test, proba, keep, counts, spec.level, per_benchmark=spec.per_benchmark)
    # … except their deployed tables' test risks over all rows: the interval beside every validity verdict
    if len(certified):
        rows += metric_intervals(operating_points(certified, test.query_id, test.model_ids), test, proba, keep, counts,
                                 spec.level, per_benchmark=False,
                                 metrics={m: PER_QUERY_METRICS[m] for m in RISK_ALL_METRICS.values()})
    # the learned methods v_fixed_accuracy compares (kind cr2, or a learned baseline / baseline variant)
    learned = methods[(methods["kind"] == "cr2") | (methods["kind"].isin(["baseline", "baseline-variant"])
                                                    & methods["learned"].astype(bool))]
    reference = methods.loc[methods["reference"].astype(bool), "method"]
    if len(reference) and len(learned):
        alpha = float(config.grids.default_alpha)  # one α per comparison: CR²'s sweep at the default α only
        by_method = points_by_method(points, alpha)
        names = [m for m in learned["method"] if m in by_method]
        outcomes = {m: method_outcomes(by_method[m], test, keep) for m in names}
        fallback = always_fallback(test, keep, VIEW_TARGETS, sample.counts)
        saving = saving_interval_rows(outcomes, str(reference.iloc[0]), VIEW_TARGETS, sample.counts, fallback,
                                      sample.grid, spec.level)
        swept = {m for m in names if any(p.alpha is not None for p in by_method[m])}
        rows += [{**r, "alpha": alpha if r["method"] in swept else None} for r in saving]
    rows = annotate(rows, interval_family, spec.level)  # every test's family, Holm p and word, stored with it
    frame = pd.DataFrame(rows).assign(level=spec.level, seed=spec.seed)
    with Warehouse(home) as wh:
        write_intervals(wh, run_id, frame)
    return {"run_id": run_id, "rows": len(frame), "n_resamples": spec.n_resamples,
            "n_resamples_compare": spec.n_resamples_compare, "target_grid": [float(t) for t in sample.grid],
            "n_test": len(test),
            "seconds": round(time.perf_counter() - t0, 2)}


def _upstream(trained: dict, evaluated: dict) -> list:
    # the run's methods come from its decisions and the catalogue (in the code hash); the ablation task adds
    # methods rows later, so they are not part of the key (a second run would never be cached)
    return [evaluated["run_id"], trained["teacher"]["fingerprint"]]


INTERVALS = Stage(compute_intervals, Reads(
    config=("evaluation", "models", "routing", "grids.default_alpha", "fit.torch_threads", *ROUTING_CONFIG),
    rows=(Rows("decisions", where=lambda c, trained, evaluated: {"run_id": evaluated["run_id"]}),
          RoutingRows(("test", "val"))),
    upstream=("methods", "eval_runs"), writes=("intervals",)), upstream=_upstream)
