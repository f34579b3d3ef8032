"""What the model-fitting tasks share: the config's routing sets, the configured CR² router, fit threads and workers,
and the store entries their fits, scores and predictions are kept in between runs (tasks/store.py).

Train, calibrate, evaluate, intervals, baselines, ablation, premise and guarantees read their inputs through
this module rather than from one another, so editing one task's code changes only that task's code hash
(cr2_tasks.common.code_hash) and keeps the others' caches.

Fitted artefacts across state distributions. A stage's cache key covers the costs of its rows, because something
in it reads them (the gate is distilled on them, the MLP baseline takes them as inputs). Other artefacts of the
same stage never see a cost — the teacher p_m(x) and the baselines whose catalogue entry says `reads_costs: false`
are fitted on query ids, benchmarks, embeddings and correctness labels only — so after a change of the
channel-state distribution they are reused instead of fitted again. Fitting is deterministic (same rows, spec,
seed and thread count → the same parameters), so the reused artefact is the one a refit would produce. Each kind
of artefact declares what it reads (cr2_tasks.common.Artefact: config paths, row fields, code; train.TEACHER,
baselines.baseline_artefact, ablation.ABLATION_GATE) and its key is computed from that declaration alone; a store
record (<cache>/<kind>/<key>.json) names the checkpoint fitted for each key (`remember`, `reusable`). The stage
that fits a kind writes and reads its records (train: the teacher; baselines: the routers; ablation: the ablated
gates). The checkpoint's fingerprint is verified on load; a missing or changed checkpoint means a refit.

The frozen gate's scores and teacher's p. s_φ(e(x), λ) and p_m(x) see only the query's embedding — never the
channel state — so a re-calibration on a new state distribution, a re-evaluation or a re-run that keeps the gate
needs them once per gate. `remember_scores` keeps them in the store (<cache>/scores/<key>.npz), the key covering the
gate and teacher fingerprints, the λ grid and the content of the rows (query ids and embeddings: SCORE_FIELDS), and
hands them to the router with CR2Router.remember, so every stage that scores these rows (calibrate, evaluate, the
re-calibration's evaluation, certify) reads them. The values are the router's own (float64 evaluation rounded once
to float32): a cache hit is bit-identical to recomputing.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cr2.config import Config
from cr2.core.data import RoutingSet
from cr2.core.hashing import fingerprint_rows
from cr2.crc import calibrated_lams
from cr2_tasks.common import Artefact, home_relative, in_home, routing_args
from cr2_tasks.store import Store, store
from cr2_warehouse.db import Warehouse
from cr2_warehouse.routing_data import load_routing_sets


def fit_threads(config: Config) -> int:
    """torch threads of every fit: `fit.torch_threads`, never the machine's core count (cr2/routers/fitting.py)."""
    return int(config.fit.torch_threads)


def baseline_threads(config: Config) -> int:
    """torch threads of a baseline's fit: baselines.num_threads, else fit.torch_threads."""
    return int(config.baselines.num_threads or fit_threads(config))


def fit_workers(config: Config, rows: int | None = None) -> int:
    """Independent fits at once (`fit.workers`, default the available cores ÷ fit.torch_threads, and 1 for fits on
    fewer than cr2.routers.fitting.PARALLEL_MIN_ROWS training `rows`)."""
    from cr2.routers.fitting import fit_workers as workers

    return workers(config.fit.torch_threads, config.fit.workers, rows)


def load_sets(config: Config, home: str | Path) -> dict:
    """{split: RoutingSet} of the config's pool, state distribution, label source and encoder."""
    with Warehouse(home, read_only=True) as wh:
        return load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config),
                                 decision_cost=config.routing.decision_cost)


# ---------------------------------------------------------------- a fitted router's p̂, cached by content
SCORE_FIELDS = ("query_id", "embedding")  # what the gate and the teacher see of a row
PREDICT_FIELDS = ("query_id", "embedding", "benchmark")  # a router's pre-execution inputs, ĉ aside


def predict_fields(reads_costs: bool) -> tuple[str, ...]:
    """What a router may read when it predicts (pre-execution inputs only): query ids, benchmarks, embeddings and,
    for a router that reads costs (catalogue `reads_costs`), the decision cost ĉ (the MLP reads ĉ; LLMRank +
    benchmark id reads the benchmark). A router fitted without costs predicts without them, so its p̂ outlives a
    change of the state distribution."""
    return PREDICT_FIELDS + (("decision_cost",) if reads_costs else ())


def router_proba(router, fingerprint: str, home: str | Path, data: RoutingSet, reads_costs: bool = True
                 ) -> tuple[np.ndarray, bool]:
    """(p̂ [n, M] as the router predicts it, cache hit) of a fitted router on `data`, computed once per router and set.

    The store's `router-proba` entry, keyed by the router's fingerprint and the rows' pre-execution content
    (predict_fields), so a re-run that keeps both reads it and every change recomputes it.
    """
    parts = (fingerprint, fingerprint_rows(data, fields=predict_fields(reads_costs)))
    value, hit = store(home).get_or_compute("router-proba", parts, lambda: {"p_hat": np.asarray(router.predict_proba(data))},
                                            "npz", accept=lambda v: "p_hat" in v)
    return value["p_hat"], hit


def cr2_router(config: Config, trained: dict | None = None, home: str | Path | None = None):
    """The configured CR² router (fit.torch_threads threads): unfitted, or around the checkpoints of
    `trained` (recorded relative to `home`), loaded only when used: a stage whose scores come from the store
    (remember_scores) never loads them (CR2Router.from_recorded)."""
    from cr2.routers.cr2_router import CR2Router

    if trained is not None:
        trained = {k: {**trained[k], "path": str(in_home(home, trained[k]["path"]))} for k in ("teacher", "gate")}
    return CR2Router.from_config(config, trained, num_threads=fit_threads(config), load_when_used=True)


def cr2_trainer(config: Config):
    """The unfitted CR² router as the train stage fits it: teacher and gate specs and the deferred variant. The
    routing-time settings (default α, on-demand calibration) never reach a fit, so the train stage does not read
    them and its cache outlives a change of them."""
    from cr2.routers.cr2_router import CR2Router

    return CR2Router(teacher_spec=config.teacher, gate_spec=config.gate, variant=config.routing.deferred_variant,
                     num_threads=fit_threads(config))


def dropout_store(home: str | Path) -> Store:
    """The store the gate fits' dropout masks are kept in and replayed from (cr2.method.dropout: kind `dropout`)."""
    return store(home)


def artifacts_dir(home: str | Path) -> Path:
    """The store's folder of checkpoints, each named by its own content fingerprint."""
    return store(home).folder("artifacts")


# ---------------------------------------------------------------- records of fitted artefacts (module docstring)
def reusable(home: str | Path, artefact: Artefact, key: str, load: Callable[[Path], Any],
             fingerprint: Callable[[Any], str]) -> tuple[Any, dict] | None:
    """(artefact, record) fitted earlier for `key` (artefact.key) — loaded with `load` and its fingerprint checked
    — or None when there is none, its checkpoint is gone or another artefact now sits under that name."""
    rec = store(home).get(artefact.kind, key, "json")
    if rec is None or not rec.get("path") or not in_home(home, rec["path"]).is_file():
        return None
    fitted = load(in_home(home, rec["path"]))
    if fingerprint(fitted) != rec.get("fingerprint"):
        return None
    return fitted, rec


def remember(home: str | Path, artefact: Artefact, key: str, path: str | Path, fingerprint: str, fit_seconds: float,
             **extra: Any) -> None:
    """Record that the checkpoint saved at `path` (with `fingerprint`) was fitted for `key` (a store entry)."""
    rec = {"path": home_relative(home, path), "fingerprint": fingerprint, "fit_seconds": float(fit_seconds), **extra}
    store(home).put(artefact.kind, key, rec, "json")


# ---------------------------------------------------------------- the gate's scores and the teacher's p (docstring)
def scores_parts(router, data: RoutingSet, lams: np.ndarray) -> tuple[str, ...]:
    """The key parts of a `scores` entry: the gate and teacher fingerprints, the rows' content (SCORE_FIELDS) and λ."""
    return (router.gate_fingerprint_, router.teacher_fingerprint_, fingerprint_rows(data, fields=SCORE_FIELDS),
            np.asarray(lams, dtype=np.float64).tobytes().hex())


def _compute_scores(router, data: RoutingSet, lams: np.ndarray) -> dict[str, np.ndarray]:
    """{scores [n, n_lam] float32, proba [n, M] float32} of the set's distinct queries, expanded to its rows."""
    _, first, inverse = np.unique(data.query_id, return_index=True, return_inverse=True)
    emb = data.embedding[first]  # a query's draws share its embedding: score each query once
    return {"scores": router.gate_.score(emb, lams)[inverse], "proba": router.teacher_.predict_proba(emb)[inverse]}


def remember_scores(router, home: str | Path, sets: dict[str, RoutingSet], lams: Sequence[float]) -> dict[str, bool]:
    """Give `router` the gate scores at the λ > 0 of `lams` and the teacher's p of each set's rows, read from the
    store or computed and stored; returns {set name: cache hit}."""
    lam_arr = calibrated_lams(np.unique(np.asarray(lams, dtype=np.float64)))  # λ = 0 is never scored
    hits = {}
    for name, data in sets.items():
        if len(data) == 0:
            continue
        value, hits[name] = store(home).get_or_compute(
            "scores", scores_parts(router, data, lam_arr), lambda: _compute_scores(router, data, lam_arr), "npz",
            accept=lambda v: "scores" in v and "proba" in v)
        router.remember(data.embedding, lam_arr, value["scores"], value["proba"])
    return hits
