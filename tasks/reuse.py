"""Fitted artefacts across state distributions (issue 30): what never sees a cost is reused, not refitted.

A stage's cache key covers the costs of its rows, because something in it reads them (the gate is distilled on
them, the MLP baseline takes them as inputs). Other artefacts of the same stage never see a cost — the teacher
p_m(x) and the baselines whose catalogue entry says `reads_costs: false` are fitted on query ids, benchmarks,
embeddings and correctness labels only — so after a change of the channel-state distribution they can be
reused instead of fitted again. Fitting is deterministic (same rows, spec, seed and thread count → the same
parameters), so the reused artefact is the one a refit would produce.

A small record beside the checkpoints, <cache>/artifacts/<kind>-inputs-<key>.json, names the artefact fitted
for each inputs key: the content of the rows it can read (`rows_digest`), its config, its code and the thread
count. The checkpoint's fingerprint is verified on load; a missing or changed checkpoint means a refit.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cr2.data import RoutingSet
from cr2.reads import config_digest
from tasks.common import home_relative, in_home, make_key
from tasks.inputs import artifacts_dir, baseline_threads, fit_threads


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


# ---------------------------------------------------------------- the teacher
TEACHER_CONFIG = ("teacher", "models")  # what a teacher fit reads of the config (within the train stage's reads)


def teacher_inputs_key(config: Any, train: RoutingSet, dev: RoutingSet, code: str) -> str:
    """Key of what the teacher is fitted on: rows without costs, the teacher and pool config, code, threads."""
    return inputs_key("teacher", rows_digest(train, dev, costs=False), fit_threads(config),
                      config_digest(config, TEACHER_CONFIG), code)


def reusable_teacher(home: str | Path, key: str) -> tuple[Any, dict] | None:
    """(teacher, record) fitted earlier for `key` (its training history restored), or None."""
    from cr2.checkpoint import fingerprint
    from cr2.teacher import load_teacher

    found = reusable(home, key, load_teacher, fingerprint)
    if found is not None:
        teacher, rec = found
        teacher.history_, teacher.best_epoch_ = rec["history"], int(rec["best_epoch"])
    return found


def record_teacher(home: str | Path, key: str, saved: dict, teacher: Any, fit_seconds: float) -> None:
    """Remember that `teacher` (saved as saved["path"], saved["fingerprint"]) was fitted for `key`."""
    remember(home, key, saved["path"], saved["fingerprint"], fit_seconds, history=teacher.history_,
             best_epoch=int(teacher.best_epoch_))


# ---------------------------------------------------------------- baselines
def router_inputs_key(config: Any, name: str, train: RoutingSet, dev: RoutingSet, code: str, catalogue: str) -> str:
    """Key of what baseline `name` is fitted on: rows (with costs unless its catalogue entry says it never reads
    them), its parameters, the pool, the routers' code and catalogues, threads."""
    from cr2.routers import router_entry

    entry = router_entry(name)
    params = sorted((k, repr(v)) for k, v in config.baselines.params.get(entry.name, {}).items())
    return inputs_key("router", rows_digest(train, dev, costs=entry.reads_costs), baseline_threads(config), name,
                      params, config_digest(config, ("models",)), code, catalogue)


def reusable_router(home: str | Path, key: str) -> tuple[Any, dict] | None:
    """(fitted baseline, record) fitted earlier for `key`, or None."""
    from cr2.routers import load_router

    return reusable(home, key, load_router, lambda r: r.fingerprint())
