"""Baselines task: fit the paper's comparison routers (§VII-A) on train (tuned on dev), predict on test.

Every router of `baselines.routers` ('always' expands to Always-m for each model) is fitted, saved to
<cache>/artifacts/router-<name>-<fingerprint>.npz, registered in `artifacts` (kind router:<name>) with
its parameters, per-query FLOPs and fit time, and its p̂_m(x) on the test split recorded in
`predictions`. The key covers the train/dev/test rows, the baselines config and the routers' code.
"""
from __future__ import annotations

import datetime as dt
import inspect
import json
import time

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from tasks.common import code_hash, home_relative, make_key, warehouse_epoch
from tasks.train import artifacts_dir, routing_args, torch_threads
from warehouse.db import Warehouse
from warehouse.routing_data import load_routing_sets, routing_fingerprint

BASELINE_CODE = ("cr2.routers", "cr2.routers.base", "cr2.routers.always", "cr2.routers.knn", "cr2.routers.mlp",
                 "cr2.routers.embedllm", "cr2.routers.llmrank", "tasks.baselines")


def baseline_names(config: Config) -> list[str]:
    """The configured routers with 'always' expanded to always-<model_id> for every model of the pool."""
    from cr2.routers import ALWAYS_PREFIX, router_class

    names = []
    for name in config.baselines.routers:
        if name == "always":
            names += [f"{ALWAYS_PREFIX}{m.id}" for m in config.models]
        else:
            router_class(name)  # unknown names fail here, with a did-you-mean
            names.append(name)
    return names


def baselines_key(config: Config, wh: Warehouse) -> str:
    return make_key("baselines", routing_fingerprint(wh, **routing_args(config), splits=("train", "dev", "test")),
                    config.section_hash("baselines", "models"), code_hash(*BASELINE_CODE), torch_threads(),
                    warehouse_epoch(wh))


def _build(name: str, config: Config):
    from cr2.routers import get_router, router_class

    key = "always" if name.startswith("always-") else name
    kwargs = dict(config.baselines.params.get(key, {}))
    if "num_threads" in inspect.signature(router_class(name).__init__).parameters:
        kwargs.setdefault("num_threads", config.baselines.num_threads or torch_threads())
    return get_router(name, **kwargs)


@task(name="fit-baselines")
def fit_baselines(config: Config, home: str, key: str) -> dict:
    """Fit, save and register every baseline; record its test predictions. Returns name → artefact summary."""
    with Warehouse(home, read_only=True) as wh:
        sets = load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config))
    train, dev, test = sets["train"], sets["dev"], sets["test"]
    out_dir = artifacts_dir(home)
    summary, arts, preds = {}, [], []
    now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
    for name in baseline_names(config):
        router = _build(name, config)
        t0 = time.perf_counter()
        router.fit(train, dev)
        fit_s = time.perf_counter() - t0
        fp = router.fingerprint()
        path = out_dir / f"router-{name}-{fp}.npz"
        router.save(path)
        p_hat = np.asarray(router.predict_proba(test), dtype=np.float64)
        summary[name] = {"fingerprint": fp, "path": home_relative(home, path), "params": int(router.n_params()),
                         "flops": int(router.flops_per_query()), "fit_seconds": round(fit_s, 2)}
        arts.append({"kind": f"router:{name}", "fingerprint": fp, "path": home_relative(home, path),
                     "label_source": config.labels.source,
                     "params": int(router.n_params()), "flops": int(router.flops_per_query()), "fit_seconds": fit_s,
                     "meta": json.dumps({"hyperparameters": {k: repr(v) for k, v in router.get_params().items()},
                                         "n_train": len(train), "n_dev": len(dev), "key": key}), "created_at": now})
        preds.append(pd.DataFrame({"router": name, "fingerprint": fp,
                                   "query_id": np.repeat(test.query_id, test.n_models),
                                   "model_id": np.tile(np.asarray(test.model_ids), len(test)),
                                   "p_hat": p_hat.reshape(-1)}))
    predictions = pd.concat(preds, ignore_index=True).drop_duplicates(["router", "fingerprint", "query_id", "model_id"])
    with Warehouse(home) as wh, wh.transaction() as con:
        for a in arts:
            wh.delete_where("artifacts", {"kind": a["kind"], "fingerprint": a["fingerprint"]}, con)
            wh.delete_where("predictions", {"router": a["kind"][7:], "fingerprint": a["fingerprint"]}, con)
        wh.insert_df("artifacts", pd.DataFrame(arts), con)
        wh.insert_df("predictions", predictions, con)
    return summary
