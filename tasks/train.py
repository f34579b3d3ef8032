"""Train task: the CR² router's teacher selector, then its margin gate distilled from it (cached, deterministic).

The key covers the train and dev rows (embeddings, labels, costs under the training state
distribution), the teacher/gate config sections and the code the task can run (tasks.common.code_hash),
so retraining happens only when one of them changed. Checkpoints go to
<cache>/artifacts/<kind>-<fingerprint>.pt and are registered in the `artifacts` table.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from prefect import task

from cr2.config import Config
from tasks.common import cache_dir, home_relative, in_home, make_key, task_code_hash
from warehouse.db import Warehouse
from warehouse.repository import register_artifacts, utc_now, warehouse_epoch
from warehouse.routing_data import load_routing_sets, routing_fingerprint


def torch_threads() -> int:
    """Threads for training: $CR2_TORCH_THREADS, else all cores (part of the key: results depend on it)."""
    return int(os.environ.get("CR2_TORCH_THREADS", os.cpu_count() or 1))


def routing_args(config: Config) -> dict:
    return {"dist_id": config.channel.distribution.dist_id, "label_source": config.labels.source,
            "seed": int(config.splits.seed), "encoder": config.embedding.store_name}


def load_sets(config: Config, home: str | Path) -> dict:
    """{split: RoutingSet} of the config's pool, state distribution, label source and encoder."""
    with Warehouse(home, read_only=True) as wh:
        return load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config),
                                 decision_cost=config.routing.decision_cost)


def cr2_router(config: Config, trained: dict | None = None, home: str | Path | None = None):
    """The configured CR² router (training threads from the environment): unfitted, or around the checkpoints of
    `trained` (recorded relative to `home`)."""
    from cr2.routers.cr2_router import CR2Router

    if trained is not None:
        trained = {k: {**trained[k], "path": str(in_home(home, trained[k]["path"]))} for k in ("teacher", "gate")}
    return CR2Router.from_config(config, trained, num_threads=torch_threads())


def train_key(config: Config, wh: Warehouse) -> str:
    return make_key("train", routing_fingerprint(wh, **routing_args(config), splits=("train", "dev")),
                    config.section_hash("teacher", "gate", "models", "routing"), task_code_hash(train_cr2), torch_threads(),
                    warehouse_epoch(wh))


def artifacts_dir(home: str | Path) -> Path:
    d = cache_dir(Path(home)) / "artifacts"
    d.mkdir(parents=True, exist_ok=True)
    return d


@task(name="train-cr2")
def train_cr2(config: Config, home: str, key: str) -> dict:
    """Fit the CR² router (teacher on train with its checkpoint chosen on dev, then the gate); returns the artefacts."""
    sets = load_sets(config, home)
    train, dev = sets["train"], sets["dev"]
    router = cr2_router(config)
    t0 = time.perf_counter()
    router.fit(train, dev)
    fit_s = time.perf_counter() - t0
    saved = {k: {**v, "path": home_relative(home, v["path"])}  # a copied or moved home works on its own
             for k, v in router.save_modules(artifacts_dir(home)).items()}
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
                                         "dist_id": config.channel.distribution.dist_id, "key": key}),
                     "created_at": utc_now()})
    result["fit_seconds"] = round(fit_s, 2)
    with Warehouse(home) as wh:
        register_artifacts(wh, rows)
    return result
