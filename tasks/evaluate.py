"""Evaluate task: routing policies on the test split, over the λ grid (and the α grid for CR²), tidy metrics.

Writes one `eval_runs` row, the per-query `decisions` and the tidy `metrics` (run, method, λ, α,
benchmark, metric, value) in one transaction. Test queries no model answers correctly are excluded
(paper §VII-A). The key covers the test rows, the trained artefacts, the threshold table and the code.
"""
from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from tasks.common import code_hash, make_key, warehouse_epoch
from tasks.train import routing_args
from warehouse.db import Warehouse
from warehouse.routing_data import load_routing_sets, routing_fingerprint

EVAL_CODE = ("cr2.metrics", "cr2.routing", "cr2.crc", "tasks.evaluate")


def evaluate_key(config: Config, wh: Warehouse, trained: dict, calibrated: dict) -> str:
    return make_key("evaluate", trained["teacher"]["fingerprint"], trained["gate"]["fingerprint"], calibrated["version"],
                    routing_fingerprint(wh, **routing_args(config), splits=("test",)),
                    config.section_hash("grids", "routing"), code_hash(*EVAL_CODE), warehouse_epoch(wh))


def _metric_rows(run_id: str, method: str, lam: float, alpha: float | None, data, decisions, proba) -> list[dict]:
    from cr2.metrics import accuracy, false_acceptance_risk, local_rate, mean_cost

    rows = []
    for bench in ["all", *sorted(set(data.benchmark))]:
        idx = np.arange(len(data)) if bench == "all" else np.flatnonzero(data.benchmark == bench)
        sub, dec = data.subset(idx), _subset_decisions(decisions, idx)
        values = {"accuracy": accuracy(sub, dec), "cost": mean_cost(sub, dec), "local_rate": local_rate(dec),
                  "risk": false_acceptance_risk(proba[idx], sub, dec, lam), "n": float(len(idx))}
        rows += [{"run_id": run_id, "method": method, "lam": lam, "alpha": alpha, "benchmark": bench, "metric": k,
                  "value": v} for k, v in values.items()]
    return rows


def _subset_decisions(decisions, idx):
    from cr2.data import Decisions

    extra = {k: (v[idx] if isinstance(v, np.ndarray) and v.shape[:1] == decisions.chosen.shape else v)
             for k, v in decisions.extra.items()}
    return Decisions(chosen=decisions.chosen[idx], accepted_local=decisions.accepted_local[idx],
                     score=None if decisions.score is None else decisions.score[idx], tau=decisions.tau, extra=extra)


@task(name="evaluate")
def evaluate(config: Config, home: str, key: str, trained: dict, calibrated: dict) -> dict:
    """CR² at every calibrated (λ, α) on the test split; returns the run id and the headline operating points."""
    from cr2.metrics import evaluable_mask
    from cr2.routing import route
    from tasks.calibrate import load_modules, load_threshold_table

    teacher, gate = load_modules(trained)
    with Warehouse(home, read_only=True) as wh:
        test = load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config))["test"]
        table = load_threshold_table(wh, calibrated["version"])
    n_all = len(test)
    test = test.subset(evaluable_mask(test))
    proba = teacher.predict_proba(test.embedding)
    run_id = f"eval-{key[-16:]}"
    metrics, decisions = [], []
    model_ids = np.asarray(test.model_ids)
    for lam in table.lams:
        score = gate.score(test.embedding, lam)
        for alpha in table.alphas:
            tau = table.tau(lam, alpha, trained["gate"]["fingerprint"])
            dec = route(score, tau, proba, test.cost, lam, config.routing.deferred_variant)
            metrics += _metric_rows(run_id, "cr2", lam, alpha, test, dec, proba)
            decisions.append(pd.DataFrame({"run_id": run_id, "method": "cr2", "lam": lam, "alpha": alpha,
                                           "query_id": test.query_id, "chosen_model": model_ids[dec.chosen],
                                           "accepted_local": dec.accepted_local}))
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    run = pd.DataFrame([{"run_id": run_id, "config_hash": config.section_hash(), "label_source": config.labels.source,
                         "dist_id": config.channel.distribution.dist_id, "threshold_version": calibrated["version"],
                         "code_version": code_hash(*EVAL_CODE), "created_at": now}])
    with Warehouse(home) as wh, wh.transaction() as con:
        for t in ("metrics", "decisions", "eval_runs"):
            wh.delete_where(t, {"run_id": run_id}, con)
        wh.insert_df("eval_runs", run, con)
        wh.insert_df("decisions", pd.concat(decisions, ignore_index=True), con)
        wh.insert_df("metrics", pd.DataFrame(metrics), con)
    return {"run_id": run_id, "n_test": n_all, "n_evaluable": len(test), "label_source": config.labels.source}
