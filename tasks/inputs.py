"""What the model-fitting tasks share: the config's routing sets, the configured CR² router, fit threads and workers,
and the two files their fits and scores are kept in between runs.

Train, calibrate, evaluate, intervals, baselines, ablation, premise and guarantees read their inputs through
this module rather than from one another, so editing one task's code changes only that task's code hash
(tasks.common.code_hash) and keeps the others' caches.

Fitted artefacts across state distributions. A stage's cache key covers the costs of its rows, because something
in it reads them (the gate is distilled on them, the MLP baseline takes them as inputs). Other artefacts of the
same stage never see a cost — the teacher p_m(x) and the baselines whose catalogue entry says `reads_costs: false`
are fitted on query ids, benchmarks, embeddings and correctness labels only — so after a change of the
channel-state distribution they are reused instead of fitted again. Fitting is deterministic (same rows, spec,
seed and thread count → the same parameters), so the reused artefact is the one a refit would produce. A small
record beside the checkpoints, <cache>/artifacts/<kind>-inputs-<key>.json, names the artefact fitted for each
inputs key (`inputs_key`: the content of the rows it can read, its config, its code and the thread count); the
stage that fits a kind writes and reads its records (train: the teacher; baselines: the routers; ablation: the
ablated gates). The checkpoint's fingerprint is verified on load; a missing or changed checkpoint means a refit.

The frozen gate's scores and teacher's p. s_φ(e(x), λ) and p_m(x) see only the query's embedding — never the
channel state — so a re-calibration on a new state distribution, a re-evaluation or a re-run that keeps the gate
needs them once per gate. `remember_scores` stores them at <cache>/scores/<key>.npz, the key covering the gate and
teacher fingerprints, the λ grid and the content of the rows (query ids and embedding bytes), and hands them to the
router with CR2Router.remember, so every stage that scores these rows (calibrate, evaluate, the re-calibration's
evaluation, certify) reads them. The values are the router's own (float64 evaluation rounded once to float32): a
cache hit is bit-identical to recomputing.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from cr2.config import Config
from cr2.core.data import RoutingSet
from tasks.common import cache_dir, home_relative, in_home, make_key, routing_args
from warehouse.db import Warehouse
from warehouse.routing_data import load_routing_sets


def fit_threads(config: Config) -> int:
    """torch threads of every fit: `fit.torch_threads`, never the machine's core count (cr2/routers/fitting.py)."""
    return int(config.fit.torch_threads)


def baseline_threads(config: Config) -> int:
    """torch threads of a baseline's fit: baselines.num_threads, else fit.torch_threads."""
    return int(config.baselines.num_threads or fit_threads(config))


def fit_workers(config: Config) -> int:
    """Independent fits at once (`fit.workers`, default the available cores ÷ fit.torch_threads)."""
    from cr2.routers.fitting import fit_workers as workers

    return workers(config.fit.torch_threads, config.fit.workers)


def load_sets(config: Config, home: str | Path) -> dict:
    """{split: RoutingSet} of the config's pool, state distribution, label source and encoder."""
    with Warehouse(home, read_only=True) as wh:
        return load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config),
                                 decision_cost=config.routing.decision_cost)


# ---------------------------------------------------------------- a fitted router's p̂, cached by content
def predict_rows_fingerprint(data: RoutingSet, reads_costs: bool = True) -> str:
    """Content hash of everything a router may read when it predicts (pre-execution inputs only): query ids,
    benchmarks, embeddings and, for a router that reads costs (catalogue `reads_costs`), the decision cost ĉ (the MLP
    reads ĉ; LLMRank + benchmark id reads the benchmark). A router fitted without costs predicts without them, so
    its p̂ outlives a change of the state distribution."""
    h = hashlib.sha256(rows_fingerprint(data).encode())
    h.update("\x1f".join(map(str, data.benchmark)).encode())
    if reads_costs:
        h.update(np.ascontiguousarray(data.decision_cost, dtype=np.float64).tobytes())
    return h.hexdigest()[:24]


def router_proba(router, fingerprint: str, home: str | Path, data: RoutingSet, reads_costs: bool = True
                 ) -> tuple[np.ndarray, bool]:
    """(p̂ [n, M] as the router predicts it, cache hit) of a fitted router on `data`, computed once per router and set.

    Stored at <cache>/router-proba/<key>.npz, the key covering the router's fingerprint and the rows' pre-execution
    content (predict_rows_fingerprint), so a re-run that keeps both reads it and every change recomputes it.
    """
    folder = cache_dir(Path(home)) / "router-proba"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{make_key('router-proba', fingerprint, predict_rows_fingerprint(data, reads_costs))}.npz"
    if path.is_file():
        try:
            with np.load(path) as f:
                return f["p_hat"], True
        except (OSError, ValueError, KeyError):  # a damaged file is recomputed, not trusted
            pass
    p_hat = np.asarray(router.predict_proba(data))
    tmp = folder / f".{uuid.uuid4().hex}.npz"
    np.savez(tmp, p_hat=p_hat)
    os.replace(tmp, path)  # atomic: a killed run never leaves a half-written file under the key
    return p_hat, False


def cr2_router(config: Config, trained: dict | None = None, home: str | Path | None = None):
    """The configured CR² router (fit.torch_threads threads): unfitted, or around the checkpoints of
    `trained` (recorded relative to `home`)."""
    from cr2.routers.cr2_router import CR2Router

    if trained is not None:
        trained = {k: {**trained[k], "path": str(in_home(home, trained[k]["path"]))} for k in ("teacher", "gate")}
    return CR2Router.from_config(config, trained, num_threads=fit_threads(config))


def cr2_trainer(config: Config):
    """The unfitted CR² router as the train stage fits it: teacher and gate specs and the deferred variant. The
    routing-time settings (default α, on-demand calibration) never reach a fit, so the train stage does not read
    them and its cache outlives a change of them."""
    from cr2.routers.cr2_router import CR2Router

    return CR2Router(teacher_spec=config.teacher, gate_spec=config.gate, variant=config.routing.deferred_variant,
                     num_threads=fit_threads(config))


def dropout_dir(home: str | Path) -> Path:
    """Where the gate fits' dropout masks are stored once and replayed (cr2.method.dropout)."""
    return cache_dir(Path(home)) / "dropout"


def artifacts_dir(home: str | Path) -> Path:
    d = cache_dir(Path(home)) / "artifacts"
    d.mkdir(parents=True, exist_ok=True)
    return d


# ---------------------------------------------------------------- records of fitted artefacts (module docstring)
def rows_digest(*sets: RoutingSet, costs: bool) -> str:
    """Content hash of what a fit can read from `sets`: query ids, benchmarks, embeddings, labels, the pool — and,
    with `costs`, the channel-dependent fields (costs, cost estimates, distances)."""
    h = hashlib.sha256()
    for data in sets:
        h.update("\x1f".join(map(str, data.query_id)).encode() + b"\x1e")
        h.update("\x1f".join(map(str, data.benchmark)).encode() + b"\x1e")
        h.update("\x1f".join(data.model_ids).encode() + b"\x1e")
        h.update(np.ascontiguousarray(data.embedding, dtype=np.float32).tobytes())
        h.update(np.ascontiguousarray(data.correct, dtype=bool).tobytes())
        if costs:
            for arr in (data.cost, data.cost_est, data.distance_m):
                h.update(b"none" if arr is None else np.ascontiguousarray(arr, dtype=np.float64).tobytes())
    return h.hexdigest()


def inputs_key(kind: str, digest: str, threads: int, *parts: Any) -> str:
    """Key of one artefact's inputs: its rows' digest, the given config/code parts and the torch thread count."""
    return make_key(f"{kind}-inputs", digest, *parts, threads)


def _record_path(home: str | Path, key: str) -> Path:
    return artifacts_dir(home) / f"{key}.json"


def reusable(home: str | Path, key: str, load: Callable[[Path], Any], fingerprint: Callable[[Any], str]
             ) -> tuple[Any, dict] | None:
    """(artefact, record) fitted earlier for `key` — loaded with `load` and its fingerprint checked — or None when
    there is none, its checkpoint is gone or another artefact now sits under that name."""
    path = _record_path(home, key)
    if not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ckpt = in_home(home, rec.get("path", ""))
    if not rec.get("path") or not ckpt.is_file():
        return None
    artefact = load(ckpt)
    if fingerprint(artefact) != rec.get("fingerprint"):
        return None
    return artefact, rec


def remember(home: str | Path, key: str, path: str | Path, fingerprint: str, fit_seconds: float, **extra: Any) -> None:
    """Record that the artefact saved at `path` (with `fingerprint`) was fitted for `key` (atomic write)."""
    rec = {"path": home_relative(home, path), "fingerprint": fingerprint, "fit_seconds": float(fit_seconds), **extra}
    target = _record_path(home, key)
    tmp = target.with_name(f".{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(rec))
    os.replace(tmp, target)


# ---------------------------------------------------------------- the gate's scores and the teacher's p (docstring)
def rows_fingerprint(data: RoutingSet) -> str:
    """Content hash of a set's query ids and embeddings (what the gate and teacher see)."""
    h = hashlib.sha256()
    h.update("\x1f".join(map(str, data.query_id)).encode())
    h.update(np.ascontiguousarray(data.embedding, dtype=np.float32).tobytes())
    return h.hexdigest()[:24]


def scores_key(router, data: RoutingSet, lams: np.ndarray) -> str:
    return make_key("scores", router.gate_fingerprint_, router.teacher_fingerprint_, rows_fingerprint(data),
                    np.asarray(lams, dtype=np.float64).tobytes().hex())


def _compute_scores(router, data: RoutingSet, lams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(scores [n, n_lam] float32, proba [n, M] float32) of the set's distinct queries, expanded to its rows."""
    _, first, inverse = np.unique(data.query_id, return_index=True, return_inverse=True)
    emb = data.embedding[first]  # a query's draws share its embedding: score each query once
    return router.gate_.score(emb, lams)[inverse], router.teacher_.predict_proba(emb)[inverse]


def remember_scores(router, home: str | Path, sets: dict[str, RoutingSet], lams: Sequence[float]) -> dict[str, bool]:
    """Give `router` the gate scores at the λ > 0 of `lams` and the teacher's p of each set's rows, read from the
    cache or computed and stored; returns {set name: cache hit}."""
    lam_arr = np.unique(np.asarray(lams, dtype=np.float64))
    lam_arr = lam_arr[lam_arr > 0]  # λ = 0 is never scored (CR2Router.scores)
    folder = cache_dir(Path(home)) / "scores"
    folder.mkdir(parents=True, exist_ok=True)
    hits = {}
    for name, data in sets.items():
        if len(data) == 0:
            continue
        path = folder / f"{scores_key(router, data, lam_arr)}.npz"
        scores = proba = None
        if path.is_file():
            try:
                with np.load(path) as f:
                    scores, proba = f["scores"], f["proba"]
            except (OSError, ValueError, KeyError):  # a damaged file is recomputed, not trusted
                scores = proba = None
        hits[name] = scores is not None
        if scores is None:
            scores, proba = _compute_scores(router, data, lam_arr)
            tmp = folder / f".{uuid.uuid4().hex}.npz"
            np.savez(tmp, scores=scores, proba=proba)
            os.replace(tmp, path)  # atomic: a killed run never leaves a half-written file under the key
        router.remember(data.embedding, lam_arr, scores, proba)
    return hits
