"""Baselines task: fit the paper's comparison routers (§VII-A) on train (tuned on dev), predict on test.

Every router of `baselines.routers` ('always' expands to Always-m for each model) is fitted, saved to
<cache>/artifacts/router-<name>-<fingerprint>.npz, registered in `artifacts` (kind router:<name>) with
its parameters, per-query FLOPs and fit time, and its p̂_m(x) on the test split recorded in
`predictions`. The key covers the train/dev/test rows, the baselines config and the routers' code.
After a change of the channel-state distribution only the routers that read costs (catalogue `reads_costs`,
the MLP) are fitted again; the others are reused (their records: tasks/inputs.py) and only predict on test. `cr2 run` starts the
fits ahead, as soon as the rows are prepared (start_baseline_fits, tasks/ahead.py); this task collects them.
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from cr2.routers.fitting import fit_router
from cr2_tasks.common import (COST_FIELDS, FIT_FIELDS, ROUTING_CONFIG, Artefact, Reads, RoutingRows, Stage,
                          catalogue_paths, home_relative, in_home, stage_key)
from cr2_tasks.inputs import (artifacts_dir, baseline_threads, fit_workers, load_sets, remember, reusable, router_proba)
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import utc_now, write_baselines


def baseline_names(config: Config) -> list[str]:
    """The configured routers with per-model entries ('always') expanded to always-<model_id> for every model."""
    from cr2.routers import baseline_names as expand
    from cr2.routers import use_catalogues

    use_catalogues(config.baselines.catalogues)
    return expand(config.baselines.routers, [m.id for m in config.models])


def _kwargs(name: str, config: Config) -> dict:
    """Constructor arguments of baseline `name`: its configured parameters and the fit's thread count."""
    from cr2.routers import router_class, router_entry

    kwargs = dict(config.baselines.params.get(router_entry(name).name, {}))
    if "num_threads" in inspect.signature(router_class(name).__init__).parameters:
        kwargs.setdefault("num_threads", baseline_threads(config))
    return kwargs


# ---------------------------------------------------------------- a baseline's reuse record (tasks/inputs.py)
def baseline_artefact(config: Config, name: str) -> Artefact:
    """What baseline `name`'s fit reads: its parameters, the pool, the thread settings, the catalogues and the
    routers' code, and its rows — with costs unless its catalogue entry says it never reads them."""
    from cr2.routers import router_entry

    entry = router_entry(name)
    params = (f"baselines.params.{entry.name}",) if entry.name in config.baselines.params else ()
    return Artefact("router-fit", Reads(config=(*params, "models", "baselines.num_threads", "fit.torch_threads",
                                                "baselines.catalogues"), files=catalogue_paths),
                    FIT_FIELDS + (COST_FIELDS if entry.reads_costs else ()), code=("cr2_tasks.baselines",))


def reusable_router(home: str, artefact: Artefact, key: str) -> tuple[Any, dict] | None:
    """(fitted baseline, record) fitted earlier for `key` (artefact.key), or None."""
    from cr2.routers import load_router

    return reusable(home, artefact, key, load_router, lambda r: r.fingerprint())


def _fit_jobs(config: Config, home: str, train, dev) -> tuple[dict, dict, dict]:
    """Per baseline: its artefact key, the artefact fitted earlier for it (or None), and the fit job that makes it."""
    names = baseline_names(config)
    artefacts = {name: baseline_artefact(config, name) for name in names}
    inputs = {name: artefacts[name].key(config, (train, dev), name) for name in names}
    # a router whose catalogue entry says it never reads a cost is reused after a change of states
    found = {name: reusable_router(home, artefacts[name], inputs[name]) for name in names}
    extra, out_dir = [str(p) for p in config.baselines.catalogues], str(artifacts_dir(home))
    jobs = {name: (name, _kwargs(name, config), extra, train, dev, out_dir) for name in names if found[name] is None}
    return inputs, found, jobs


def start_baseline_fits(config: Config, home: str | Path) -> list[str]:
    """Inside a cr2_tasks.ahead block: start the fits the baselines stage will need (those not fitted before for the
    same inputs), so they run while the flow goes on; returns the routers started."""
    from cr2_tasks import ahead

    if not ahead.active():
        return []
    sets = load_sets(config, str(home))
    if ahead.here(fit_workers(config, len(sets["train"]))):  # small fits: the stage fits them itself
        return []
    inputs, _, jobs = _fit_jobs(config, str(home), sets["train"], sets["dev"])
    return [name for name, job in jobs.items() if ahead.start(inputs[name], fit_router, job)]


@task(name="fit-baselines")
def fit_baselines(config: Config, home: str) -> dict:
    """Fit, save and register every baseline; record its test predictions. Returns {"routers": name → artefact}."""
    from cr2.routers import router_entry
    from cr2_tasks import ahead

    key = stage_key(BASELINES, config, home)
    sets = load_sets(config, home)
    train, dev, test = sets["train"], sets["dev"], sets["test"]
    summary, arts, preds = {}, [], []
    now = utc_now()
    reused: list[str] = []
    names = baseline_names(config)
    inputs, found, jobs = _fit_jobs(config, home, train, dev)
    fitted = ahead.collect(fit_router, jobs, inputs, fit_workers(config, len(train)))  # started ahead, or fitted here
    for name in names:
        if found[name] is not None:
            router, fit_s = found[name][0], float(found[name][1]["fit_seconds"])  # the time it took when fitted
            fp, path = router.fingerprint(), in_home(home, found[name][1]["path"])
            reused.append(name)
        else:
            router, fp, path, fit_s = fitted[name]
            remember(home, baseline_artefact(config, name), inputs[name], path, fp, fit_s)
        # cached by content, shared with the certify stage: a router that reads no cost keeps it across channels
        p_hat = np.asarray(router_proba(router, fp, home, test, reads_costs=router_entry(name).reads_costs)[0],
                           dtype=np.float64)
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
    config=("baselines", "fit", "models", "routing.decision_cost", *ROUTING_CONFIG),
    rows=(RoutingRows(("train", "dev", "test")),), files=catalogue_paths, writes=("artifacts", "predictions")),
    outputs=lambda home, r: [b["path"] for b in r["routers"].values()])
