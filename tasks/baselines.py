"""Baselines task: fit the paper's comparison routers (§VII-A) on train (tuned on dev), predict on test.

Every router of `baselines.routers` ('always' expands to Always-m for each model) is fitted, saved to
<cache>/artifacts/router-<name>-<fingerprint>.npz, registered in `artifacts` (kind router:<name>) with
its parameters, per-query FLOPs and fit time, and its p̂_m(x) on the test split recorded in
`predictions`. The key covers the train/dev/test rows, the baselines config and the routers' code.
After a change of the channel-state distribution only the routers that read costs (catalogue `reads_costs`,
the MLP) are fitted again; the others are reused (tasks/reuse.py) and only predict on test.
"""
from __future__ import annotations

import inspect
import json
import time

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from tasks.common import (ROUTING_CONFIG, THREADS_ENV, Reads, RoutingRows, Stage, catalogue_hash, catalogue_paths,
                          home_relative, in_home, stage_key, task_code_hash)
from tasks.inputs import artifacts_dir, load_sets, torch_threads
from tasks.reuse import remember, reusable_router, router_inputs_key
from warehouse.db import Warehouse
from warehouse.repository import utc_now, write_baselines


def baseline_names(config: Config) -> list[str]:
    """The configured routers with per-model entries ('always') expanded to always-<model_id> for every model."""
    from cr2.routers import baseline_names as expand
    from cr2.routers import use_catalogues

    use_catalogues(config.baselines.catalogues)
    return expand(config.baselines.routers, [m.id for m in config.models])


def _build(name: str, config: Config):
    from cr2.routers import get_router, router_class, router_entry

    kwargs = dict(config.baselines.params.get(router_entry(name).name, {}))
    if "num_threads" in inspect.signature(router_class(name).__init__).parameters:
        kwargs.setdefault("num_threads", config.baselines.num_threads or torch_threads())
    return get_router(name, **kwargs)


@task(name="fit-baselines")
def fit_baselines(config: Config, home: str) -> dict:
    """Fit, save and register every baseline; record its test predictions. Returns {"routers": name → artefact}."""
    key = stage_key(BASELINES, config, home)
    sets = load_sets(config, home)
    train, dev, test = sets["train"], sets["dev"], sets["test"]
    out_dir = artifacts_dir(home)
    summary, arts, preds = {}, [], []
    now = utc_now()
    code, catalogues, reused = task_code_hash(fit_baselines), catalogue_hash(config), []
    for name in baseline_names(config):
        # issue 30: a router whose catalogue entry says it never reads a cost is reused after a change of states
        inputs = router_inputs_key(config, name, train, dev, code, catalogues)
        found = reusable_router(home, inputs)
        if found is not None:
            router, fit_s = found[0], float(found[1]["fit_seconds"])  # the time it took when it was fitted
            fp, path = router.fingerprint(), in_home(home, found[1]["path"])
            reused.append(name)
        else:
            router = _build(name, config)
            t0 = time.perf_counter()
            router.fit(train, dev)
            fit_s = time.perf_counter() - t0
            fp = router.fingerprint()
            path = out_dir / f"router-{name}-{fp}.npz"
            router.save(path)
            remember(home, inputs, path, fp, fit_s)
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
    with Warehouse(home) as wh:
        write_baselines(wh, arts, predictions)
    return {"routers": summary, "reused": reused}


BASELINES = Stage(fit_baselines, Reads(
    config=("baselines", "models", "routing.decision_cost", *ROUTING_CONFIG),
    rows=(RoutingRows(("train", "dev", "test")),), files=catalogue_paths, writes=("artifacts", "predictions"),
    env=THREADS_ENV), outputs=lambda home, r: [b["path"] for b in r["routers"].values()])
