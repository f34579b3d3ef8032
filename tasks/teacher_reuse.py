"""The teacher across state distributions (issue 30): p_m(x) is fitted on embeddings and correctness labels only.

The train stage's key covers the train/dev costs, because the gate is distilled on them; the teacher never sees a
cost, so a re-run after a change of the channel-state distribution can reuse the teacher fitted on the same rows
instead of fitting it again (fit_teacher is deterministic: the same rows, spec, seed and threads give the same
parameters, so the reused teacher is the one a refit would produce). A small record beside the checkpoints,
<cache>/artifacts/teacher-inputs-<key>.json, names the teacher fitted for each key: the content of the train and
dev rows the teacher reads (query ids, embeddings, labels), the teacher and pool config, the training code and
the thread count. The checkpoint's fingerprint is verified on load.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from cr2.config import Config
from cr2.data import RoutingSet
from tasks.common import home_relative, in_home, make_key
from tasks.inputs import artifacts_dir, torch_threads


def teacher_inputs_key(config: Config, train: RoutingSet, dev: RoutingSet, code: str) -> str:
    """Key of what the teacher is fitted on: rows (ids, embeddings, labels — no costs), config, code, threads."""
    h = hashlib.sha256()
    for data in (train, dev):
        h.update("\x1f".join(map(str, data.query_id)).encode() + b"\x1e")
        h.update(np.ascontiguousarray(data.embedding, dtype=np.float32).tobytes())
        h.update(np.ascontiguousarray(data.correct, dtype=bool).tobytes())
    return make_key("teacher-inputs", h.hexdigest(), config.section_hash("teacher", "models"), code, torch_threads())


def _record(home: str | Path, key: str) -> Path:
    return artifacts_dir(home) / f"teacher-inputs-{key}.json"


def reusable_teacher(home: str | Path, key: str) -> tuple[Any, dict] | None:
    """(teacher, record) fitted earlier for `key`, or None when there is none (or its checkpoint is gone)."""
    from cr2.checkpoint import fingerprint
    from cr2.teacher import load_teacher

    path = _record(home, key)
    if not path.is_file():
        return None
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    ckpt = in_home(home, rec["path"])
    if not ckpt.is_file():
        return None
    teacher = load_teacher(ckpt)  # fingerprint verified
    if fingerprint(teacher) != rec.get("fingerprint"):  # another teacher under that name: fit it again
        return None
    teacher.history_, teacher.best_epoch_ = rec["history"], int(rec["best_epoch"])
    return teacher, rec


def record_teacher(home: str | Path, key: str, saved: dict, teacher: Any, fit_seconds: float) -> None:
    """Remember that `teacher` (saved as saved["path"], saved["fingerprint"]) was fitted for `key` (atomic write)."""
    rec = {"path": home_relative(home, saved["path"]), "fingerprint": saved["fingerprint"],
           "history": teacher.history_, "best_epoch": int(teacher.best_epoch_), "fit_seconds": float(fit_seconds)}
    path = _record(home, key)
    tmp = path.with_name(f".{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(rec))
    os.replace(tmp, path)
