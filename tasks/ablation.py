"""Ablation task: the paper's component ablation (Table ablation) — gates trained with parts of the loss.

Each ablated gate is distilled from the same frozen teacher with one loss change (sign loss only; + margin
loss; w_mono ∈ {0.5, 2}), calibrated with CRC on val at the default α over the λ grid, and evaluated on
test (cr2.evaluation.evaluate_ablation_gate); its rows land in `metrics` under method 'ablation:<name>' of
the evaluation run. The full CR² gate, the α sweep, the calibration rule and the deferred path come from
the evaluation itself; the view v_ablation picks every configuration's operating point nearest the cost
anchor c̄ = 0.45.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from tasks.common import ROUTING_CONFIG, Reads, RoutingRows, Stage
from tasks.inputs import cr2_router, fit_workers, load_sets
from warehouse.db import Warehouse
from warehouse.repository import write_ablation

ABLATIONS: dict[str, dict] = {
    "sign-only": {"w_margin": 0.0, "w_mono": 0.0},
    "sign+margin": {"w_mono": 0.0},
    "w_mono=0.5": {"w_mono": 0.5},
    "w_mono=2": {"w_mono": 2.0},
}


@task(name="ablation")
def run_ablation(config: Config, home: str, trained: dict, evaluated: dict) -> dict:
    """Train, calibrate and evaluate each ablated gate; append its metrics to the evaluation run."""
    from cr2.evaluation import Evaluation, evaluate_ablation_gate, method_rows
    from cr2.fitting import fit_gate_variant, run_fits
    from cr2.metrics import evaluable_mask

    sets = load_sets(config, home)
    train, dev, val, test = sets["train"], sets["dev"], sets["val"], sets["test"]
    full = cr2_router(config, trained, home)
    keep = evaluable_mask(test) if config.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    ev = Evaluation(run_id=evaluated["run_id"], test=test, proba=full.proba(test.embedding), keep=keep,
                    record_decisions=False)
    params = {k: v for k, v in full.get_params().items() if k not in ("teacher_spec", "gate_spec")}
    # the ablated gates are independent fits: fit.workers processes at once, each at fit.torch_threads threads
    fitted = run_fits(fit_gate_variant, [(params, config.teacher, config.gate.model_copy(update=change), train, dev,
                                          full.teacher_) for change in ABLATIONS.values()], fit_workers(config))
    fit_seconds = {}
    for name, (router, fit_s) in zip(ABLATIONS, fitted, strict=True):
        fit_seconds[name] = round(fit_s, 2)
        evaluate_ablation_gate(ev, name, router, val, config.grids.lam.values(), config.grids.default_alpha,
                               dist_id=config.channel.distribution.dist_id, label_source=config.labels.source)
    methods = pd.DataFrame(method_rows(ev.run_id, [f"ablation:{n}" for n in ABLATIONS]))
    with Warehouse(home) as wh:
        write_ablation(wh, ev.run_id, methods, pd.DataFrame(ev.metrics))
    return {"run_id": ev.run_id, "ablations": list(ABLATIONS), "fit_seconds": fit_seconds}


ABLATION = Stage(run_ablation, Reads(
    config=("gate", "grids", "routing", "evaluation", "teacher", "fit", "models", *ROUTING_CONFIG),
    rows=(RoutingRows(),), upstream=("thresholds", "artifacts", "eval_runs"), writes=("metrics", "methods")),
    upstream=lambda trained, evaluated: [evaluated["run_id"], trained["teacher"]["fingerprint"], sorted(ABLATIONS)])
