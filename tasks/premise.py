"""Premise-map tasks: the cost-independent inputs once, then one cached task per grid cell.

`premise_inputs_task` gathers what no cell changes — embeddings, labels, splits, token counts, the frozen
teacher's p_m(x) and the val and test p̂ of every baseline whose predictions do not read costs (the certified KNN
calibrates on val) — into one .npz under <cache>/premise/, so a cell never re-embeds or re-reads the warehouse. `premise_cell_task` prices, routes and
bootstraps one (device speed, channel) cell (cr2.studies.premise.run_cell) and returns its rows; the flow writes them
(DuckDB admits one writing process, so Dask workers only compute, as labeling's do).

A baseline "takes costs as inputs" when its p̂ on test changes with the costs it is given (MLP with its
cost inputs): such a router is refitted on every cell; every other keeps its base fit.

Keys: the inputs key covers its declared reads (the routing rows of every split, the token counts, the config
fields), the base gate/teacher and baseline fingerprints and the code; a cell's key adds its coordinates, the
config that prices and evaluates it, the bootstrap settings and the cell code.
"""
from __future__ import annotations

import numpy as np
from prefect import task

from cr2.config import Config, load_state_distribution
from cr2_tasks.common import Reads, Rows, RoutingRows, Stage, stage_key
from cr2_tasks.store import store, study_id as stored_study_id
from cr2_tasks.inputs import baseline_threads, cr2_router, fit_threads, load_sets
from cr2_warehouse.db import Warehouse

CELL_SECTIONS = ("models", "reference_model", "communication", "power", "cost", "hardware", "channel", "grids",
                 "routing", "evaluation", "calibration", "gate", "teacher", "baselines", "fit", "labels", "splits",
                 "seed")
COST_PROBE = 0.5  # costs × this factor: a router whose p̂ moves reads costs


def study_id(config: Config, base: dict, baselines: dict, *, speeds, channels, n_resamples: int, seed: int,
             retrain_from: str, retrain_epochs: int) -> str:
    """The study a cell belongs to: everything that changes its numbers (labels, gate, teacher, baselines, config,
    the grid, the bootstrap, how cells retrain), not the code — so two studies never write over each other."""
    how = ("scratch",) if retrain_from == "scratch" else (retrain_from, int(retrain_epochs))  # scratch: config epochs
    return stored_study_id("premise", config.labels.source, base["teacher"]["fingerprint"], base["gate"]["fingerprint"],
                    sorted((k, v["fingerprint"]) for k, v in baselines.items()), config.section_hash(),
                    [f"{float(f):.6g}" for f in speeds], list(channels), int(n_resamples), int(seed), how)


def inputs_path(home: str, key: str):
    """Where the premise inputs of stage key `key` are kept: the store's `premise-inputs` entry."""
    return store(home).path("premise-inputs", key, "npz")


def reads_costs(router, test) -> bool:
    """True when the fitted router's p̂ on `test` changes when the costs it sees change (its inputs include costs)."""
    from dataclasses import replace

    probe = replace(test, cost=test.cost * COST_PROBE,
                    cost_est=None if test.cost_est is None else test.cost_est * COST_PROBE)
    return not np.array_equal(np.asarray(router.predict_proba(test)), np.asarray(router.predict_proba(probe)))


@task(name="premise-inputs")
def premise_inputs_task(config: Config, home: str, base: dict, baselines: dict) -> dict:
    """The cost-independent inputs of every cell as one .npz; which baselines read costs (refitted per cell)."""
    from cr2.studies.premise import SPLITS, PremiseInputs
    from cr2.routers import load_router
    from cr2_warehouse.premise import query_tokens

    key = stage_key(PREMISE_INPUTS, config, home, base, baselines)
    sets = load_sets(config, home)
    parts = [sets[s] for s in SPLITS]
    query_id = np.concatenate([p.query_id for p in parts]).astype(str)
    model_ids = tuple(m.id for m in config.models)
    with Warehouse(home, read_only=True) as wh:
        prompt, out_tok = query_tokens(wh, config.labels.source, query_id, model_ids,
                                       dict(config.cost.default_output_tokens))
    embedding = np.concatenate([p.embedding for p in parts])
    teacher = cr2_router(config, base, home)
    p_hat, p_hat_val, cost_aware = {}, {}, []
    for name, art in baselines.items():
        router = load_router(art["path"])
        if reads_costs(router, sets["test"]):
            cost_aware.append(name)
        else:
            p_hat[name] = np.asarray(router.predict_proba(sets["test"]), dtype=np.float64)
            p_hat_val[name] = np.asarray(router.predict_proba(sets["val"]), dtype=np.float64)
    inputs = PremiseInputs(query_id=query_id, benchmark=np.concatenate([p.benchmark for p in parts]).astype(str),
                           split=np.concatenate([np.full(len(p), s) for s, p in zip(SPLITS, parts)]),
                           embedding=embedding, correct=np.concatenate([p.correct for p in parts]),
                           prompt_tokens=prompt, output_tokens=out_tok,
                           teacher_proba=np.asarray(teacher.proba(embedding), dtype=np.float64),
                           model_ids=model_ids, p_hat_test=p_hat, p_hat_val=p_hat_val)
    path = store(home).put("premise-inputs", key, inputs.arrays(), "npz")
    return {"key": key, "path": str(path), "n": len(inputs), "cost_aware": sorted(cost_aware),
            "cost_independent": sorted(p_hat)}


@task(name="premise-cell")
def premise_cell_task(config: Config, home: str, inputs: dict, base: dict, baselines: dict,
                      speed_factor: float, channel: str, n_resamples: int, seed: int, retrain_epochs: int,
                      retrain_from: str = "scratch") -> dict:
    """One cell of the premise map: costs re-priced, CR² re-calibrated and retrained, baselines routed, KNN
    certified, bootstrapped."""
    from cr2.studies.premise import Cell, PremiseInputs, run_cell
    from cr2.routers import load_router
    from cr2.routers import get_router
    from cr2_tasks.baselines import _kwargs

    with np.load(inputs["path"], allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    premise_inputs = PremiseInputs.from_arrays(arrays)
    router = cr2_router(config, base, home)
    dist = load_state_distribution(channel)
    cell = Cell(speed_factor=float(speed_factor), channel=dist)
    is_base = abs(float(speed_factor) - 1.0) < 1e-12 and dist.dist_id == config.channel.distribution.dist_id

    def refit(name: str):
        def fit(train, dev):
            if retrain_from == "base":
                fitted = load_router(baselines[name]["path"])
                if hasattr(fitted, "fine_tune"):  # re-trained from its base fit, as the gate is
                    fitted.num_threads = baseline_threads(config)
                    return fitted.fine_tune(train, dev, retrain_epochs)
            return get_router(name, **_kwargs(name, config)).fit(train, dev)  # refitted as `cr2 run` fits it
        return fit

    result = run_cell(premise_inputs, cell, config, router.teacher_, router.gate_,
                      {name: refit(name) for name in inputs["cost_aware"]}, n_resamples=n_resamples, seed=seed,
                      retrain_epochs=retrain_epochs, retrain_from=retrain_from, num_threads=fit_threads(config),
                      # the base gate was distilled on exactly the base cell's costs: it is that cell's retrained gate
                      retrained_gate=router.gate_ if is_base else None)
    key = stage_key(PREMISE_CELL, config, home, inputs, base, baselines, speed_factor, channel, n_resamples, seed,
                    retrain_epochs, retrain_from)
    return {"key": key, "summary": result.summary, "rows": result.rows}


def _fingerprints(base: dict, baselines: dict) -> list:
    return [base["teacher"]["fingerprint"], base["gate"]["fingerprint"],
            sorted((k, v["fingerprint"]) for k, v in baselines.items())]


def _cell(inputs: dict, base: dict, baselines: dict, speed_factor: float, channel: str, n_resamples: int, seed: int,
          retrain_epochs: int, retrain_from: str = "scratch") -> list:
    """A cell's coordinates and bootstrap settings; `inputs` (the inputs stage's result) carries the inputs key."""
    return [inputs["key"], *_fingerprints(base, baselines), f"{float(speed_factor):.6g}",
            load_state_distribution(channel).dist_id, int(n_resamples), int(seed), int(retrain_epochs), retrain_from]


PREMISE_INPUTS = Stage(premise_inputs_task, Reads(
    config=("models", "cost", "routing", "labels", "channel", "embedding.encoder", "embedding.backend", "splits.seed", "teacher", "gate",
            "grids.default_alpha", "fit.torch_threads"),
    rows=(RoutingRows(), Rows("labels", where=lambda c, base, baselines: {"source": c.labels.source}),
          Rows("queries", columns=("query_id", "benchmark", "prompt_tokens"))),
    upstream=("artifacts",)), upstream=_fingerprints, outputs=lambda home, r: [r["path"]])
PREMISE_CELL = Stage(premise_cell_task, Reads(config=CELL_SECTIONS), upstream=_cell)  # no table: runs on a worker
