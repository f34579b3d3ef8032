"""Train task: the CR² teacher selector, then the margin gate distilled from it (cached, deterministic).

The key covers the train and dev rows (embeddings, labels, costs under the training state
distribution), the teacher/gate config sections and the code of cr2's training modules, so retraining
happens only when one of them changed. Checkpoints go to <cache>/artifacts/<kind>-<fingerprint>.pt and
are registered in the `artifacts` table.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import time
from pathlib import Path

from prefect import task

from cr2.config import Config
from tasks.common import cache_dir, code_hash, home_relative, make_key, warehouse_epoch
from warehouse.db import Warehouse
from warehouse.routing_data import load_routing_sets, routing_fingerprint

TRAIN_CODE = ("cr2.teacher", "cr2.gate", "cr2.checkpoint", "cr2.utility", "tasks.train")


def torch_threads() -> int:
    """Threads for training: $CR2_TORCH_THREADS, else all cores (part of the key: results depend on it)."""
    return int(os.environ.get("CR2_TORCH_THREADS", os.cpu_count() or 1))


def routing_args(config: Config) -> dict:
    return {"dist_id": config.channel.distribution.dist_id, "label_source": config.labels.source,
            "seed": int(config.splits.seed), "encoder": config.embedding.encoder}


def train_key(config: Config, wh: Warehouse) -> str:
    return make_key("train", routing_fingerprint(wh, **routing_args(config), splits=("train", "dev")),
                    config.section_hash("teacher", "gate", "models"), code_hash(*TRAIN_CODE), torch_threads(),
                    warehouse_epoch(wh))


def artifacts_dir(home: str | Path) -> Path:
    d = cache_dir(Path(home)) / "artifacts"
    d.mkdir(parents=True, exist_ok=True)
    return d


@task(name="train-cr2")
def train_cr2(config: Config, home: str, key: str) -> dict:
    """Fit the teacher on train (checkpoint chosen on dev), freeze it, then fit the gate; returns the artefacts."""
    from cr2.complexity import count_parameters
    from cr2.gate import fit_gate, save_gate
    from cr2.teacher import fit_teacher, save_teacher

    with Warehouse(home, read_only=True) as wh:
        sets = load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config))
    train, dev = sets["train"], sets["dev"]
    threads = torch_threads()
    t0 = time.perf_counter()
    teacher = fit_teacher(train, dev, config.teacher, num_threads=threads)
    t_teacher = time.perf_counter() - t0
    t0 = time.perf_counter()
    gate = fit_gate(train, dev, teacher.predict_proba(train.embedding), teacher.predict_proba(dev.embedding),
                    config.gate, num_threads=threads)
    t_gate = time.perf_counter() - t0
    out_dir = artifacts_dir(home)
    rows, result = [], {"n_train": len(train), "n_dev": len(dev), "torch_threads": threads}
    for kind, module, fit_s, save in (("teacher", teacher, t_teacher, save_teacher), ("gate", gate, t_gate, save_gate)):
        tmp = out_dir / f".{kind}-{key}.tmp"
        fp = save(module, tmp)
        path = out_dir / f"{kind}-{fp}.pt"
        tmp.replace(path)  # atomic: a killed run never leaves a half-written checkpoint under its final name
        result[kind] = {"fingerprint": fp, "path": home_relative(home, path), "params": count_parameters(module),
                        "flops": int(module.flops_per_query()), "fit_seconds": round(fit_s, 2),
                        "best_epoch": int(module.best_epoch_), "history": module.history_}
        rows.append({"kind": kind, "fingerprint": fp, "path": home_relative(home, path), "label_source": config.labels.source,
                     "params": count_parameters(module), "flops": int(module.flops_per_query()), "fit_seconds": fit_s,
                     "meta": json.dumps({"best_epoch": module.best_epoch_, "n_train": len(train), "n_dev": len(dev),
                                         "dist_id": config.channel.distribution.dist_id, "key": key}),
                     "created_at": dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)})
    import pandas as pd

    with Warehouse(home) as wh, wh.transaction() as con:
        for r in rows:
            wh.delete_where("artifacts", {"kind": r["kind"], "fingerprint": r["fingerprint"]}, con)
        wh.insert_df("artifacts", pd.DataFrame(rows), con)
    return result
