"""Re-calibration's before/after evaluation task: CR² on test under the new states with the old and the new table.

One task, one pass: the test rows are read once, the frozen teacher's p and the gate's scores come
from the per-gate score cache (tasks/inputs.remember_scores: they do not depend on ξ), and each threshold table is evaluated
with cr2.evaluation.sweep.evaluate_table — the "cr2" rows the full evaluation records, without its comparison rows.
Each table's run is written as its own evaluation run (`eval_runs`, `methods`, `decisions`, `metrics`) in one
transaction, so v_recalibration and `cr2 results` read them like any run. The key covers the test rows, the
trained artefacts, both threshold versions, the config sections read and the code the task can run.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2_tasks.common import GROUP_ROWS, ROUTING_CONFIG, Reads, RoutingRows, Stage, stage_key, task_code_hash
from cr2_tasks.store import cache_key
from cr2.evaluation.decisions import decision_frame
from cr2_tasks.inputs import cr2_router, load_sets, remember_scores
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import load_threshold_table, utc_now, write_evaluation
from cr2_warehouse.routing_data import table_groups

@task(name="evaluate-recalibration")
def evaluate_recalibration(config: Config, home: str, trained: dict, tables: dict[str, dict]) -> dict:
    """CR² at every (λ, α) of each threshold table ({"before": calibrated, "after": calibrated}) on test under
    config's states; returns {phase: evaluation summary}."""
    from cr2.evaluation.sweep import Evaluation, evaluate_table, method_rows
    from cr2.evaluation.metrics import evaluable_mask

    key = stage_key(EVALUATE_RECALIBRATION, config, home, trained, tables)
    test = load_sets(config, home)["test"]
    router = cr2_router(config, trained, home)
    with Warehouse(home, read_only=True) as wh:
        loaded = {phase: load_threshold_table(wh, cal["version"]) for phase, cal in tables.items()}
        groups = {phase: table_groups(wh, t, test.query_id) for phase, t in loaded.items()}  # Mondrian per subset
    lams = sorted({float(v) for t in loaded.values() for v in t.lams})
    remember_scores(router, home, {"test": test}, lams)  # p and s(λ) of test: cached per gate, shared by both tables
    keep = evaluable_mask(test) if config.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    proba = router.proba(test.embedding)
    out, writes = {}, []
    for phase, cal in tables.items():
        router.set_threshold_table(loaded[phase])
        ev = Evaluation(run_id=f"eval-{cache_key(key, phase)[-16:]}", test=test, proba=proba, keep=keep)
        evaluate_table(ev, router, groups[phase])
        run = {"run_id": ev.run_id, "config_hash": EVALUATE_RECALIBRATION.reads.config_hash(config), "label_source": config.labels.source,
               "split_seed": int(config.splits.seed), "default_alpha": float(config.grids.default_alpha),
               "decision_cost": config.routing.decision_cost, "dist_id": config.channel.distribution.dist_id,
               "threshold_version": cal["version"], "code_version": task_code_hash(evaluate_recalibration),
               "created_at": utc_now()}
        metrics = pd.DataFrame(ev.metrics)
        writes.append((run, pd.DataFrame(method_rows(ev.run_id, ["cr2"])), decision_frame(ev), metrics))
        out[phase] = {"run_id": ev.run_id, "n_test": len(test), "n_evaluable": int(keep.sum()),
                      "label_source": config.labels.source,
                      "exclude_unsolvable": bool(config.evaluation.exclude_unsolvable)}
    with Warehouse(home) as wh:
        for w in writes:
            write_evaluation(wh, *w)
    return out


EVALUATE_RECALIBRATION = Stage(evaluate_recalibration, Reads(
    config=("grids", "routing", "evaluation", "calibration.group", "teacher", "gate", "fit.torch_threads", "models",
            *ROUTING_CONFIG),
    rows=(RoutingRows(("test",)), GROUP_ROWS), upstream=("thresholds", "artifacts"),
    writes=("eval_runs", "methods", "decisions", "metrics")),
    upstream=lambda trained, tables: [trained["teacher"]["fingerprint"], trained["gate"]["fingerprint"],
                                      sorted((k, v["version"]) for k, v in tables.items())])
