"""The frozen gate's scores and teacher's p on val/test, cached on disk by what they depend on (issue 30).

s_φ(e(x), λ) and p_m(x) see only the query's embedding — never the channel state — so a re-calibration on a
new state distribution, a re-evaluation or a re-run that keeps the gate needs them once per gate. They are
stored at <cache>/scores/<key>.npz, the key covering the gate and teacher fingerprints, the λ grid and the
content of the rows (query ids and embedding bytes), and handed to the router with CR2Router.remember, so every
stage of the process that scores these rows (calibrate, evaluate before and after) reads them. The values are
the router's own (float64 evaluation rounded once to float32): a cache hit is bit-identical to recomputing.
"""
from __future__ import annotations

import hashlib
import os
import uuid
from pathlib import Path
from typing import Sequence

import numpy as np

from cr2.data import RoutingSet
from tasks.common import cache_dir, make_key


def rows_fingerprint(data: RoutingSet) -> str:
    """Content hash of a set's query ids and embeddings (what the gate and teacher see)."""
    h = hashlib.sha256()
    h.update("\x1f".join(map(str, data.query_id)).encode())
    h.update(np.ascontiguousarray(data.embedding, dtype=np.float32).tobytes())
    return h.hexdigest()[:24]


def scores_key(router, data: RoutingSet, lams: np.ndarray) -> str:
    return make_key("scores", router.gate_fingerprint_, router.teacher_fingerprint_, rows_fingerprint(data),
                    np.asarray(lams, dtype=np.float64).tobytes().hex())


def _compute(router, data: RoutingSet, lams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
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
            scores, proba = _compute(router, data, lam_arr)
            tmp = folder / f".{uuid.uuid4().hex}.npz"
            np.savez(tmp, scores=scores, proba=proba)
            os.replace(tmp, path)  # atomic: a killed run never leaves a half-written file under the key
        router.remember(data.embedding, lam_arr, scores, proba)
    return hits


# ---------------------------------------------------------------- a certified router's p̂ (cr2.certify)
def predict_rows_fingerprint(data: RoutingSet) -> str:
    """Content hash of everything a router may read when it predicts (pre-execution inputs only): query ids,
    benchmarks, embeddings and the decision cost ĉ (the MLP reads ĉ; LLMRank + benchmark id reads the benchmark)."""
    h = hashlib.sha256(rows_fingerprint(data).encode())
    h.update("\x1f".join(map(str, data.benchmark)).encode())
    h.update(np.ascontiguousarray(data.decision_cost, dtype=np.float64).tobytes())
    return h.hexdigest()[:24]


def router_proba(router, fingerprint: str, home: str | Path, data: RoutingSet) -> tuple[np.ndarray, bool]:
    """(p̂ [n, M] as the router predicts it, cache hit) of a fitted router on `data`, computed once per router and set.

    Stored at <cache>/router-proba/<key>.npz, the key covering the router's fingerprint and the rows' pre-execution
    content (predict_rows_fingerprint), so a re-run that keeps both reads it and every change recomputes it.
    """
    folder = cache_dir(Path(home)) / "router-proba"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{make_key('router-proba', fingerprint, predict_rows_fingerprint(data))}.npz"
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
