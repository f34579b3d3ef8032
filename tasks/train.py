"""Train task: the CR² router's teacher selector, then its margin gate distilled from it (cached, deterministic).

The key covers its declared reads (TRAIN.reads: the train and dev rows — embeddings, labels, costs under the
training state distribution —, the teacher/gate config and the training threads) and the code the task can run
(cr2_tasks.common.code_hash), so retraining happens only when one of them changed. Checkpoints go to
<cache>/artifacts/<kind>-<fingerprint>.pt and are registered in the `artifacts` table; a cached result
whose checkpoint files were deleted is recomputed (the stage's outputs).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from prefect import task

from cr2.config import Config
from cr2_tasks import ahead
from cr2_tasks.common import FIT_FIELDS, ROUTING_CONFIG, Artefact, Reads, RoutingRows, Stage, home_relative, stage_key
from cr2_tasks.inputs import artifacts_dir, cr2_trainer, dropout_store, fit_threads, in_home, load_sets, remember, reusable
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import register_artifacts, utc_now

# what a teacher fit reads (within the train stage's reads): the teacher and pool config, threads, rows without costs
TEACHER = Artefact("teacher-fit", Reads(config=("teacher", "models", "fit.torch_threads")), FIT_FIELDS,
                   code=("cr2_tasks.train",))


def fit_teacher(config: Config, train, dev) -> Any:
    """Fit the teacher as TEACHER declares it: the teacher spec at fit.torch_threads threads (the rows' costs are
    never read; tests/test_stage_reads.py tracks both)."""
    from cr2.method.teacher import fit_teacher as fit

    return fit(train, dev, config.teacher, num_threads=fit_threads(config))


def reusable_teacher(home: str, key: str) -> tuple[Any, dict] | None:
    """(teacher, record) fitted earlier for `key` (its training history restored), or None."""
    from cr2.method.checkpoint import fingerprint
    from cr2.method.teacher import load_teacher

    found = reusable(home, TEACHER, key, load_teacher, fingerprint)
    if found is not None:
        teacher, rec = found
        teacher.history_, teacher.best_epoch_ = rec["history"], int(rec["best_epoch"])
    return found


def record_teacher(home: str, key: str, saved: dict, teacher: Any, fit_seconds: float) -> None:
    """Remember that `teacher` (saved as saved["path"], saved["fingerprint"]) was fitted for `key`."""
    remember(home, TEACHER, key, saved["path"], saved["fingerprint"], fit_seconds, history=teacher.history_,
             best_epoch=int(teacher.best_epoch_))


@task(name="train-cr2")
def train_cr2(config: Config, home: str) -> dict:
    """Fit the CR² router (teacher on train with its checkpoint chosen on dev, then the gate); returns the artefacts."""
    key = stage_key(TRAIN, config, home)
    sets = load_sets(config, home)
    train, dev = sets["train"], sets["dev"]
    router = cr2_trainer(config)
    # the teacher never sees a cost: after a change of state distribution it is reused, not refitted
    teacher_key = TEACHER.key(config, (train, dev))
    reused = reusable_teacher(home, teacher_key)
    t0 = time.perf_counter()
    teacher = reused[0] if reused else fit_teacher(config, train, dev)
    teacher_s = time.perf_counter() - t0
    if ahead.pending("teacher"):  # several gate fits start now: the masks they share are drawn once, here
        from cr2.method.gate import gate_mask_stream

        gate_mask_stream(dropout_store(home), router.gate_spec, train.embedding.shape[1], len(train), router.num_threads)
    ahead.announce("teacher", teacher)  # inside `cr2 run`: the fits that need only the teacher start now
    router.fit(train, dev, teacher=teacher, dropout_cache=dropout_store(home))
    fit_s = time.perf_counter() - t0
    modules = router.save_modules(artifacts_dir(home))
    if reused is None:
        router.fit_seconds_["teacher"] = teacher_s
        record_teacher(home, teacher_key, modules["teacher"], router.teacher_, teacher_s)
    else:
        router.fit_seconds_["teacher"] = reused[1]["fit_seconds"]  # the time it took when it was fitted
    saved = {k: {**v, "path": home_relative(home, v["path"])}  # a copied or moved home works on its own
             for k, v in modules.items()}
    result, rows = {"n_train": len(train), "n_dev": len(dev), "torch_threads": router.num_threads}, []
    for kind, module in (("teacher", router.teacher_), ("gate", router.gate_)):
        summary = {**saved[kind], "params": int(module.n_params()), "flops": int(module.flops_per_query()),
                   "fit_seconds": round(router.fit_seconds_[kind], 2), "best_epoch": int(module.best_epoch_),
                   "history": module.history_}
        result[kind] = summary
        rows.append({"kind": kind, "fingerprint": summary["fingerprint"], "path": summary["path"],
                     "label_source": config.labels.source, "params": summary["params"], "flops": summary["flops"],
                     "fit_seconds": router.fit_seconds_[kind],
                     "meta": json.dumps({"best_epoch": module.best_epoch_, "n_train": len(train), "n_dev": len(dev),
                                         "dist_id": config.channel.distribution.dist_id, "key": key,
                                         # a gate names its teacher: a reused teacher's row is re-registered by
                                         # every later train (its key moves on), the gate's link stays
                                         **({"teacher": saved["teacher"]["fingerprint"]} if kind == "gate" else {})}),
                     "created_at": utc_now()})
    result["fit_seconds"], result["teacher_reused"] = round(fit_s, 2), reused is not None
    with Warehouse(home) as wh:
        register_artifacts(wh, rows)
    return result


def trained_teacher(home: str | Path, trained: dict) -> Any:
    """The frozen teacher of a train stage's result `trained` (its checkpoint, recorded relative to `home`)."""
    from cr2.method.teacher import load_teacher

    return load_teacher(in_home(home, trained["teacher"]["path"]))


TRAIN = Stage(train_cr2, Reads(
    config=("teacher", "gate", "fit.torch_threads", "models", "routing", *ROUTING_CONFIG),
    rows=(RoutingRows(("train", "dev")),), writes=("artifacts",)), outputs=lambda home, r: [r["teacher"]["path"], r["gate"]["path"]])
