"""Pool-summary task: one evaluation run → its comparisons with intervals and its label diagnostics.

Reads the run's per-query decisions and the pool's routing sets (every split), and returns tidy rows:
  - each learned method's (CR², MLP, EmbedLLM, LLMRank, …) and the full-information reference's fixed-accuracy
    saving vs KNN and vs the best single model at every target 0.50 … 0.99 and averaged over the run's validation target grid,
    with paired-bootstrap intervals over the test queries (evaluation.bootstrap: one index for every method);
    the full-information reference's saving vs KNN is the headroom;
  - the label diagnostics of cr2.studies.diagnostics over all of the pool's queries (accuracy, pairwise φ,
    P(device right | largest wrong), cross-validated k-NN AUC of correctness and of each pair's disagreement);
  - the device / cheapest-edge cost ratio under the realised c and the pre-execution ĉ (test rows);
  - the run's equal-risk decomposition (table equal_risk: gate quality, and the price of the guarantee and the
    certified-score comparison at grids.default_alpha), one mean saving with its interval per comparison.
What the intervals do not cover: training, calibration and the split are held fixed (test-query noise only).
The key covers its declared reads (the run's decisions, the routing rows, the config fields) and the code.
"""
from __future__ import annotations

import time

import numpy as np
from prefect import task

from cr2.config import Config
from cr2_tasks.common import ROUTING_CONFIG, Reads, Rows, RoutingRows, Stage, stage_key
from cr2_warehouse.db import Warehouse


EQUAL_RISK_METRIC = "equal-risk:"  # pool_results.metric of an equal-risk mean saving: equal-risk:<question>


def learned_methods(methods) -> list[str]:
    """The learned methods of a run (CR² and the learned baselines and their variants) besides the reference (KNN)."""
    from cr2.routers import reference_router

    kinds = methods["kind"]
    keep = (kinds == "cr2") | (kinds.isin(["baseline", "baseline-variant"]) & methods["learned"].astype(bool))
    return [m for m in methods.loc[keep, "method"] if m != reference_router()]


@task(name="pool-summary")
def pool_summary_task(config: Config, home: str, run_id: str) -> dict:
    """Comparisons with intervals, the headroom and the label diagnostics of evaluation run `run_id`."""
    from cr2.studies.diagnostics import label_rows, oracle_sweep, predictability_rows
    from cr2.evaluation.equal_risk import study_statistics
    from cr2.evaluation.fixed_accuracy import VIEW_TARGETS, MethodOutcomes
    from cr2.evaluation.intervals import method_outcomes, points_by_method, always_fallback
    from cr2.routers import ALWAYS_PREFIX, reference_router
    from cr2.studies.pools import BEST_SINGLE, ORACLE, comparison_rows
    from cr2.studies.premise import device_edge_ratio
    from cr2.evaluation.decisions import operating_points
    from cr2_tasks.intervals import test_sample
    from cr2_tasks.inputs import load_sets
    from cr2_warehouse.repository import methods_of_run, run_decisions, run_equal_risk

    t0 = time.perf_counter()
    spec = config.evaluation.bootstrap
    sets = load_sets(config, home)
    test = sets["test"]
    with Warehouse(home, read_only=True) as wh:
        decisions = run_decisions(wh, run_id)
        methods = methods_of_run(wh, run_id)
        equal = run_equal_risk(wh, run_id)  # the run's equal-risk stage: kept below, at the default α
    sample = test_sample(config, home, sets)  # the run's own rows, shared resample index and validation grid
    keep, counts = sample.keep, sample.counts
    # one α per comparison: CR²'s sweep at the default α only
    by_method = points_by_method(operating_points(decisions, test.query_id, test.model_ids), config.grids.default_alpha)
    outcomes = {m: method_outcomes(pts, test, keep) for m, pts in by_method.items()}
    always, ref = [f"{ALWAYS_PREFIX}{m}" for m in test.model_ids], reference_router()
    missing = [a for a in always + [ref] if a not in outcomes]
    if missing:
        from cr2.core.errors import DataValidationError

        raise DataValidationError(f"run {run_id} lacks {missing}; the pool summary needs the reference router and "
                                  f"every Always-m (baselines.routers: always, {ref})")
    outcomes[BEST_SINGLE] = MethodOutcomes(np.concatenate([outcomes[a].correct for a in always], axis=1),
                                           np.concatenate([outcomes[a].cost for a in always], axis=1), rows=keep)
    chosen = oracle_sweep(test.correct, test.cost)
    rows_ = np.arange(len(test))[:, None]
    outcomes[ORACLE] = MethodOutcomes(np.asarray(test.correct, dtype=bool)[rows_, chosen],
                                      np.asarray(test.cost, dtype=np.float64)[rows_, chosen], rows=keep)
    compared = [*learned_methods(methods), ORACLE]
    rows = comparison_rows(outcomes, [m for m in compared if m in outcomes] + [ref], VIEW_TARGETS, counts,
                           always_fallback(test, keep, VIEW_TARGETS, counts), sample.grid, spec.level)
    # the equal-risk decomposition at the default α: one mean saving per comparison
    rows += [{"subject": r["method_a"], "other": r["method_b"], "metric": f"{EQUAL_RISK_METRIC}{r['question']}",
              "target": None, "estimate": r["estimate"], "lower": r["lower"], "upper": r["upper"], "n": r["n_targets"],
              "n_resamples": r["n_resamples"], "p_value": r["p_value"], "family": r["family"],
              "family_size": r["family_size"], "p_holm": r["p_holm"], "verdict": r["verdict"]}
             for r in study_statistics(equal.to_dict("records"), config.grids.default_alpha)]
    # diagnostics over every query of the pool (train, dev, val and test): more rows, the same labels
    parts = [sets[s] for s in ("train", "dev", "val", "test") if s in sets and len(sets[s])]
    correct = np.concatenate([np.asarray(p.correct, dtype=bool) for p in parts])
    embedding = np.concatenate([np.asarray(p.embedding, dtype=np.float32) for p in parts])
    ids = list(test.model_ids)
    largest = ids.index(config.ref_model_id)
    rows += label_rows(correct, ids, device=0, largest=largest)
    rows += predictability_rows(embedding, correct, ids, seed=int(spec.seed))
    ratio_est = device_edge_ratio(test.cost_est) if test.cost_est is not None else float("nan")
    summary = {"run_id": run_id, "n_test": int(len(test)), "n_evaluable": int(keep.sum()), "n_queries": int(len(correct)),
               "cost_ratio_realised": device_edge_ratio(test.cost), "cost_ratio_est": ratio_est,
               "n_resamples": int(counts.shape[0]), "seconds": round(time.perf_counter() - t0, 2)}
    return {"key": stage_key(POOL_SUMMARY, config, home, run_id), "summary": summary, "rows": rows}


POOL_SUMMARY = Stage(pool_summary_task, Reads(
    config=("evaluation", "models", "reference_model", "routing.decision_cost", "grids.default_alpha", *ROUTING_CONFIG),
    rows=(Rows("decisions", where=lambda c, run_id: {"run_id": run_id}),
          Rows("equal_risk", where=lambda c, run_id: {"run_id": run_id}), RoutingRows()),
    upstream=("methods", "eval_runs")), upstream=lambda run_id: [run_id])
