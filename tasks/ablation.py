"""Ablation task: the paper's component ablation (Table ablation) — gates trained with parts of the loss.

Each ablated gate is distilled from the same frozen teacher with one loss change (sign loss only; + margin
loss; w_mono ∈ {0.5, 2}), calibrated with CRC on val at the default α over the λ grid, and evaluated on
test (cr2.evaluation.sweep.evaluate_ablation_gate); its rows land in `metrics` under method 'ablation:<name>' of
the evaluation run. The full CR² gate, the α sweep, the calibration rule and the deferred path come from
the evaluation itself; the view v_ablation picks every configuration's operating point nearest the cost
anchor c̄ = 0.45. The ablated gates' fits need only the train/dev rows and the teacher: `cr2 run` starts them ahead
(start_ablation_fits, tasks/ahead.py) as soon as the teacher exists, while it fits the gate, calibrates and evaluates, and a fitted gate is kept by its inputs
(its store record: ABLATION_GATE, tasks/inputs.py), so a re-run that changes nothing it reads does not fit it again.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2_tasks.common import COST_FIELDS, FIT_FIELDS, ROUTING_CONFIG, Artefact, Reads, RoutingRows, Stage
from cr2_tasks.inputs import artifacts_dir, cr2_router, dropout_store, fit_workers, load_sets, remember, reusable
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import write_ablation

ABLATIONS: dict[str, dict] = {
    "sign-only": {"w_margin": 0.0, "w_mono": 0.0},
    "sign+margin": {"w_mono": 0.0},
    "w_mono=0.5": {"w_mono": 0.5},
    "w_mono=2": {"w_mono": 2.0},
}


# what an ablated gate's fit reads: the router's settings, the gate and teacher config, threads, rows with costs;
# its key adds the frozen teacher's fingerprint and the ablation (its name and loss change)
ABLATION_GATE = Artefact("ablation-gate-fit", Reads(config=(
    "gate", "teacher", "grids.default_alpha", "routing.deferred_variant", "routing.on_demand_calibration",
    "fit.torch_threads")), FIT_FIELDS + COST_FIELDS, code=("cr2_tasks.ablation",))


def _fit_jobs(config: Config, home: str, teacher, train, dev) -> tuple[dict, dict, dict]:
    """Per ablated gate: its artefact key (ABLATION_GATE, the frozen `teacher`, the ablation), the gate fitted
    earlier for it (or None) and the fit job that makes it."""
    from cr2.method.checkpoint import fingerprint
    from cr2.method.gate import load_gate

    params = {k: v for k, v in cr2_router(config).get_params().items() if k not in ("teacher_spec", "gate_spec")}
    specs = {name: config.gate.model_copy(update=change) for name, change in ABLATIONS.items()}
    teacher_fp = fingerprint(teacher)
    inputs = {name: ABLATION_GATE.key(config, (train, dev), teacher_fp, name, sorted(ABLATIONS[name].items()))
              for name in ABLATIONS}
    found = {name: reusable(home, ABLATION_GATE, inputs[name], load_gate, fingerprint) for name in ABLATIONS}
    jobs = {name: (params, config.teacher, specs[name], train, dev, teacher, dropout_store(home)) for name in ABLATIONS
            if found[name] is None}
    return inputs, found, jobs


def start_ablation_fits(config: Config, home: str | Path, teacher) -> list[str]:
    """Inside a cr2_tasks.ahead block: start the ablated gates' fits (those not fitted before for the same inputs) from
    the frozen `teacher` as soon as it exists, so they run while the flow fits the gate, calibrates and evaluates;
    returns the gates started."""
    from cr2.routers.fitting import fit_gate_variant
    from cr2_tasks import ahead

    if not ahead.active():
        return []
    sets = load_sets(config, str(home))
    if ahead.here(fit_workers(config, len(sets["train"]))):  # small fits: the stage fits them itself
        return []
    inputs, _, jobs = _fit_jobs(config, str(home), teacher, sets["train"], sets["dev"])
    return [name for name, job in jobs.items() if ahead.start(inputs[name], fit_gate_variant, job)]


@task(name="ablation")
def run_ablation(config: Config, home: str, trained: dict, evaluated: dict) -> dict:
    """Train, calibrate and evaluate each ablated gate; append its metrics to the evaluation run."""
    from cr2.evaluation.sweep import Evaluation, evaluate_ablation_gate, method_rows
    from cr2.routers.fitting import fit_gate_variant
    from cr2.method.gate import save_gate
    from cr2.evaluation.metrics import evaluable_mask
    from cr2.routers.cr2_router import CR2Router
    from cr2_tasks import ahead

    sets = load_sets(config, home)
    train, dev, val, test = sets["train"], sets["dev"], sets["val"], sets["test"]
    full = cr2_router(config, trained, home)
    keep = evaluable_mask(test) if config.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    ev = Evaluation(run_id=evaluated["run_id"], test=test, proba=full.proba(test.embedding), keep=keep,
                    record_decisions=False)
    inputs, found, jobs = _fit_jobs(config, home, full.teacher_, train, dev)
    # the ablated gates are independent fits: started ahead by a flow, or fit.workers processes at once here
    fitted = ahead.collect(fit_gate_variant, jobs, inputs, fit_workers(config, len(train)))
    fit_seconds = {}
    for name in ABLATIONS:
        if found[name] is not None:  # fitted before for the same inputs: the same gate a refit would give
            gate, record = found[name]
            router = CR2Router.from_fitted(full.teacher_, gate, full.model_ids_, **{
                **full.get_params(), "gate_spec": config.gate.model_copy(update=ABLATIONS[name])})
            fit_s = float(record["fit_seconds"])
        else:
            router, fit_s = fitted[name]
            path = artifacts_dir(home) / f"ablation-gate-{router.gate_fingerprint_}.pt"
            remember(home, ABLATION_GATE, inputs[name], path, save_gate(router.gate_, path), fit_s)
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
