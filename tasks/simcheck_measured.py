"""The sim-to-real check on ANY measured warehouse: its measured labels vs the simulator's.

`cr2 simcheck` reads the MMLU-Pro files directly; this task reads a prepared measured warehouse instead — any
scenario built with `labels.measured` (MMLU-Pro, the ZeroEval ladders, a pool of your own): the pool's queries,
embeddings, splits, costs and MEASURED correctness. It simulates every source of `simcheck.sources` (the
configured, MMLU-Pro-fitted simulated-irt-v2 shape) on the same queries, matched to the measured accuracy of every
(model, benchmark), over `simcheck.structure_seeds` seeds, and compares
  - label structure (cr2.studies.simcheck.label_structure),
  - the label diagnostics (cr2.studies.diagnostics: φ, P(device right | largest wrong), k-NN AUCs),
  - routing outcomes (cr2.studies.simcheck.routing_outcomes: every learned router and CR² fitted per label set, on the
    warehouse's own train/dev/val/test split and costs), for `simcheck.routing_seeds` seeds,
writing tidy rows to `simcheck` (view v_simcheck) under run id `simcheck-w-…`.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from prefect import task

from cr2.config import Config
from cr2_tasks.common import ROUTING_CONFIG, Reads, Rows, RoutingRows, Stage, stage_key
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import write_simcheck

SPLITS = ("train", "dev", "val", "test")


def diagnostic_rows(correct: np.ndarray, embedding: np.ndarray, model_ids: list[str], largest: int) -> list[dict]:
    """The label diagnostics (cr2.studies.diagnostics) in simcheck's row shape
    {statistic, model, other, lam, target, value}."""
    from cr2.studies.diagnostics import label_rows, predictability_rows

    rows = label_rows(correct, model_ids, device=0, largest=largest) + predictability_rows(embedding, correct, model_ids)
    return [{"statistic": r["metric"], "model": r["subject"], "other": r["other"] or "", "lam": None, "target": None,
             "value": float(r["estimate"])} for r in rows if r["metric"] not in ("accuracy",)]


@task(name="simcheck-measured")
def simcheck_measured_task(config: Config, home: str, routing: bool = True) -> dict:
    """Measured vs simulated labels on a measured warehouse's own queries: tidy rows → `simcheck`."""
    from cr2.core.errors import ConfigError
    from cr2.studies.simcheck import RoutingCheckSpec, SplitSets, label_sweep, shape_record, simulate_source
    from cr2_tasks.inputs import load_sets

    if config.labels.measured is None:
        raise ConfigError("the sim-to-real check on a warehouse needs a measured config (labels.measured), e.g. "
                          "configs/zeroeval-qwen.yaml")
    spec = config.simcheck
    sets = load_sets(config, home)
    parts = [sets[s] for s in SPLITS]
    split = np.concatenate([np.full(len(p), s) for s, p in zip(SPLITS, parts)])
    ids = np.concatenate([p.query_id for p in parts]).astype(str)
    bench = np.concatenate([p.benchmark for p in parts]).astype(str)
    emb = np.concatenate([np.asarray(p.embedding, dtype=np.float32) for p in parts])
    y_meas = np.concatenate([np.asarray(p.correct, dtype=bool) for p in parts])
    with Warehouse(home, read_only=True) as wh:
        from cr2_warehouse.pools import query_choices

        n_choices, texts = query_choices(wh, ids)
    model_ids = list(parts[0].model_ids)
    params = [m.params for m in config.models]
    big = model_ids.index(config.ref_model_id)
    sim = config.labels.simulator

    def split_sets(y: np.ndarray) -> SplitSets:
        return SplitSets(**{s: replace(sets[s], correct=y[split == s]) for s in SPLITS})

    out = label_sweep(
        y_meas, bench, model_ids, config.ref_model_id,
        lambda source, seed, targets: simulate_source(source, seed, sim, ids, bench, texts, emb, n_choices, model_ids,
                                                      params, targets),
        spec.sources, spec.structure_seeds, spec.routing_seeds, sets=split_sets if routing else None,
        routing=(RoutingCheckSpec.from_config(config), config.teacher, config.gate, config.seed),
        extra=lambda y: [("diagnostics", diagnostic_rows(y, emb, model_ids, big))],
        progress=lambda line: print(line, flush=True))
    key = stage_key(SIMCHECK_MEASURED, config, home, routing)
    run_id = f"simcheck-w-{key[-14:]}"
    with Warehouse(home) as wh:
        n_rows = write_simcheck(wh, run_id, len(ids), pool=config.labels.measured.models, rows=out,
                                shape=shape_record(sim.shape, None, warehouse=str(home),
                                                   benchmarks=sorted(set(bench.tolist()))))
    return {"run_id": run_id, "n_questions": int(len(ids)), "rows": n_rows,
            "benchmarks": sorted(set(bench.tolist()))}


SIMCHECK_MEASURED = Stage(simcheck_measured_task, Reads(
    config=("simcheck", "labels", "teacher", "gate", "models", "baselines", "grids", "evaluation", "seed",
            "reference_model", "routing.decision_cost", "benchmarks", "data_dir", *ROUTING_CONFIG),
    rows=(RoutingRows(), Rows("queries", columns=("query_id", "question", "choices"))),
    writes=("simcheck", "simcheck_runs")), upstream=lambda routing=True: [bool(routing)])
