"""Evaluate task: every method on the test split over the λ grid (and the α grid for CR²), as tidy metrics.

Reads the routing sets, the CR² router (trained checkpoints + the calibrated threshold table) and the
baselines' recorded p̂; runs the evaluation loop of the library (cr2.evaluation.sweep); writes one `eval_runs`
row, the `methods` evaluated (from the router catalogue), the per-query `decisions` and the tidy
`metrics` in one transaction. Test queries no model answers correctly are excluded from accuracy, cost
and local rate (paper §VII-A). The key covers the test rows, the trained artefacts, the threshold table
and the code the task can run.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2.evaluation.decisions import decision_frame
from cr2_tasks.common import GROUP_ROWS, ROUTING_CONFIG, Reads, RoutingRows, Stage, catalogue_paths, in_home, stage_key, task_code_hash
from cr2_tasks.inputs import cr2_router, load_sets, remember_scores
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import baseline_proba, load_threshold_table, utc_now, write_evaluation
from cr2_warehouse.routing_data import table_groups


@task(name="evaluate")
def evaluate(config: Config, home: str, trained: dict, calibrated: dict, baselines: dict) -> dict:
    """CR² at every calibrated (λ, α) and each baseline over the same λ grid (grids.lam), on the test split."""
    from cr2.evaluation.sweep import CR2_BANDS, Evaluation, evaluate_baseline, evaluate_cr2, method_rows, resplit_rng
    from cr2.evaluation.metrics import evaluable_mask
    from cr2.routers import load_router, router_entry, use_catalogues

    key = stage_key(EVALUATE, config, home, trained, calibrated, baselines)
    baselines = baselines["routers"]
    use_catalogues(config.baselines.catalogues)
    sets = load_sets(config, home)
    test, val = sets["test"], sets["val"]
    router = cr2_router(config, trained, home)
    with Warehouse(home, read_only=True) as wh:
        router.set_threshold_table(load_threshold_table(wh, calibrated["version"]))
        p_hat = {name: baseline_proba(wh, name, b["fingerprint"], test.query_id, test.model_ids)
                 for name, b in baselines.items() if router_entry(name).predicts_proba}
        groups = table_groups(wh, router.threshold_table_, test.query_id)  # Mondrian per subset: each query's group
    remember_scores(router, home, {"val": val, "test": test}, router.threshold_table_.lams)  # cached per gate
    keep = evaluable_mask(test) if config.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    ev = Evaluation(run_id=f"eval-{key[-16:]}", test=test, proba=router.proba(test.embedding), keep=keep)
    evaluate_cr2(ev, router, val, default_alpha=config.grids.default_alpha, n_resplits=config.evaluation.n_resplits,
                 rng=resplit_rng(config.seed, CR2_BANDS), fixed_rates=config.evaluation.fixed_rates,
                 ltt_delta=config.calibration.delta or config.calibration.target_delta, groups=groups)
    for name, b in baselines.items():  # a router that predicts p̂ is routed from its recorded p̂ at every λ
        evaluate_baseline(ev, name, config.grids.lam.values(), p_hat=p_hat.get(name),
                          router=None if name in p_hat else load_router(in_home(home, b["path"])))
    run = {"run_id": ev.run_id, "config_hash": EVALUATE.reads.config_hash(config), "label_source": config.labels.source,
           "split_seed": int(config.splits.seed), "default_alpha": float(config.grids.default_alpha),
           "decision_cost": config.routing.decision_cost,
           "dist_id": config.channel.distribution.dist_id, "threshold_version": calibrated["version"],
           "code_version": task_code_hash(evaluate), "created_at": utc_now()}
    metrics = pd.DataFrame(ev.metrics)
    methods = pd.DataFrame(method_rows(ev.run_id, list(metrics["method"].unique())))
    with Warehouse(home) as wh:
        write_evaluation(wh, run, methods, decision_frame(ev), metrics)
    return {"run_id": ev.run_id, "n_test": len(test), "n_evaluable": int(keep.sum()), "label_source": config.labels.source,
            "exclude_unsolvable": bool(config.evaluation.exclude_unsolvable)}


def _upstream(trained: dict, calibrated: dict, baselines: dict) -> list:
    """`baselines` is the baselines stage's result ({"routers": name → artefact})."""
    return [trained["teacher"]["fingerprint"], trained["gate"]["fingerprint"], calibrated["version"],
            sorted((k, v["fingerprint"]) for k, v in baselines["routers"].items())]


EVALUATE = Stage(evaluate, Reads(
    config=("grids", "routing", "evaluation", "calibration", "seed", "teacher", "gate", "fit.torch_threads", "models",
            "baselines.catalogues", *ROUTING_CONFIG),
    rows=(RoutingRows(("val", "test")), GROUP_ROWS), files=catalogue_paths,
    upstream=("thresholds", "predictions", "artifacts"), writes=("eval_runs", "methods", "decisions", "metrics")),
    upstream=_upstream)
