"""Ablation task: the paper's component ablation (Table ablation) — gates trained with parts of the loss.

Each ablated gate is distilled from the same frozen teacher with one loss change (sign loss only; + margin
loss; w_mono ∈ {0.5, 2}), calibrated with CRC on val at the default α over the λ grid, and evaluated on
test; its rows land in `metrics` under method 'ablation:<name>' of the evaluation run. The full CR² gate,
the α sweep, the calibration rule and the deferred path come from the evaluation itself; the view
v_ablation picks every configuration's operating point nearest the cost anchor c̄ = 0.45.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from prefect import task

from cr2.config import Config
from tasks.common import code_hash, make_key
from tasks.train import routing_args, torch_threads
from warehouse.db import Warehouse
from warehouse.routing_data import load_routing_sets

ABLATIONS: dict[str, dict] = {
    "sign-only": {"w_margin": 0.0, "w_mono": 0.0},
    "sign+margin": {"w_mono": 0.0},
    "w_mono=0.5": {"w_mono": 0.5},
    "w_mono=2": {"w_mono": 2.0},
}
ABLATION_CODE = ("cr2.gate", "cr2.crc", "cr2.routing", "tasks.ablation", "tasks.evaluate")


def ablation_key(config: Config, trained: dict, evaluated: dict) -> str:
    return make_key("ablation", evaluated["run_id"], trained["teacher"]["fingerprint"],
                    config.section_hash("gate", "grids", "routing", "evaluation"), sorted(ABLATIONS),
                    code_hash(*ABLATION_CODE), torch_threads())


@task(name="ablation")
def run_ablation(config: Config, home: str, key: str, trained: dict, evaluated: dict) -> dict:
    """Train, calibrate and evaluate each ablated gate; append its metrics to the evaluation run."""
    from cr2.crc import calibrate_thresholds
    from cr2.gate import fit_gate
    from cr2.metrics import evaluable_mask
    from cr2.routing import route
    from cr2.utility import disagree_label
    from tasks.calibrate import load_modules
    from tasks.evaluate import _metric_rows

    teacher, _ = load_modules(trained, home)
    with Warehouse(home, read_only=True) as wh:
        sets = load_routing_sets(wh, tuple(m.id for m in config.models), **routing_args(config))
    train, dev, val, test = sets["train"], sets["dev"], sets["val"], sets["test"]
    keep = evaluable_mask(test) if config.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    p = {name: teacher.predict_proba(d.embedding) for name, d in (("train", train), ("dev", dev), ("val", val),
                                                                  ("test", test))}
    alpha = config.grids.default_alpha
    lams = config.grids.lam.values()
    run_id = evaluated["run_id"]
    rows, fit_seconds = [], {}
    import time

    for name, change in ABLATIONS.items():
        spec = config.gate.model_copy(update=change)
        t0 = time.perf_counter()
        gate = fit_gate(train, dev, p["train"], p["dev"], spec, num_threads=torch_threads())
        fit_seconds[name] = round(time.perf_counter() - t0, 2)
        for lam in lams:
            s_val = gate.score(val.embedding, lam)
            tau = float(calibrate_thresholds(s_val, disagree_label(p["val"], val.cost, lam), [alpha])[0])
            dec = route(gate.score(test.embedding, lam), tau, p["test"], test.cost, lam, config.routing.deferred_variant)
            rows += _metric_rows(run_id, f"ablation:{name}", float(lam), alpha, test, dec, p["test"], keep)
    with Warehouse(home) as wh, wh.transaction() as con:
        con.execute("DELETE FROM metrics WHERE run_id = ? AND method LIKE 'ablation:%'", [run_id])
        wh.insert_df("metrics", pd.DataFrame(rows), con)
    return {"run_id": run_id, "ablations": list(ABLATIONS), "fit_seconds": fit_seconds}
