"""The before/after evaluation of a re-calibration, on a home with a default `cr2 run`: CPU seconds (getrusage) of
the full evaluation of one threshold table (`evaluate_cr2`, the slow path that `cr2 recalibrate --bands` or
`--baselines` runs for the old and the new table) vs CR² alone with the gate's scores from the per-gate cache
(`evaluate_table`, the default fast path), and whether their `cr2` rows are identical. One process, no Prefect:
the evaluation step of `cr2 recalibrate`.

    python benchmarks/bench_recal_eval.py --home var        # a copy is read; results/recal_eval.json

CPU time is reported beside wall time because a loaded machine inflates wall time (load average recorded).
"""
from __future__ import annotations

import resource
import shutil
import tempfile
import time
from pathlib import Path

from _common import REPO, figure, parse_args, write_result


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main(argv=None) -> None:
    args = parse_args(__doc__, argv, home={"default": str(REPO / "var"), "help": "home with a default `cr2 run`"})
    import sys

    sys.path.insert(0, str(REPO))
    import numpy as np
    import pandas as pd

    from cr2.config import load_config
    from cr2.evaluation.sweep import Evaluation, evaluate_cr2, evaluate_table
    from cr2.evaluation.metrics import evaluable_mask
    from cr2_tasks.inputs import cr2_router, load_sets
    from cr2_tasks.inputs import remember_scores
    from cr2_tasks.store import store
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import load_threshold_table

    reps = args.repeats or (1 if args.quick else 3)
    cfg = load_config()
    samples: dict[str, list[float]] = {k: [] for k in ("full_cpu", "full_wall", "fast_cpu", "fast_wall", "fill_cpu", "load_cpu")}
    identical = []
    with tempfile.TemporaryDirectory(prefix="cr2-bench-recal-eval-") as tmp:
        home = Path(tmp)
        shutil.copy2(Path(args.home) / "cr2.duckdb", home / "cr2.duckdb")
        with Warehouse(home, read_only=True) as wh:
            art = wh.df("SELECT kind, path FROM artifacts WHERE kind IN ('teacher', 'gate') ORDER BY created_at DESC")
            table = load_threshold_table(wh, int(wh.scalar("SELECT max(version) FROM thresholds")))
        src = Path(args.home).resolve()
        trained = {k: {"path": str(src / art[art.kind == k].path.iloc[0])} for k in ("teacher", "gate")}
        for _ in range(reps):
            c0 = _cpu()
            sets = load_sets(cfg, home)
            samples["load_cpu"].append(_cpu() - c0)
            test, val = sets["test"], sets["val"]
            keep = evaluable_mask(test)
            slow = cr2_router(cfg, trained, home).set_threshold_table(table)
            c0, t0 = _cpu(), time.perf_counter()
            full = Evaluation("x", test, slow.proba(test.embedding), keep)
            evaluate_cr2(full, slow, val, default_alpha=cfg.grids.default_alpha, n_resplits=0,
                         rng=np.random.default_rng(cfg.seed), fixed_rates=cfg.evaluation.fixed_rates,
                         ltt_delta=cfg.calibration.delta or cfg.calibration.target_delta)
            samples["full_cpu"].append(_cpu() - c0)
            samples["full_wall"].append(time.perf_counter() - t0)
            fill = cr2_router(cfg, trained, home).set_threshold_table(table)
            shutil.rmtree(store(home).folder("scores"), ignore_errors=True)
            c0 = _cpu()
            remember_scores(fill, home, {"test": test}, table.lams)  # a miss: computes and stores
            samples["fill_cpu"].append(_cpu() - c0)
            fast = cr2_router(cfg, trained, home).set_threshold_table(table)
            c0, t0 = _cpu(), time.perf_counter()
            remember_scores(fast, home, {"test": test}, table.lams)  # a hit
            only = Evaluation("x", test, fast.proba(test.embedding), keep)
            evaluate_table(only, fast)
            samples["fast_cpu"].append(_cpu() - c0)
            samples["fast_wall"].append(time.perf_counter() - t0)
            want = pd.DataFrame([m for m in full.metrics if m["method"] == "cr2"])
            identical.append(bool(want.equals(pd.DataFrame(only.metrics))))
    import os

    figures = [
        figure("full_eval.cpu_s", "full evaluation of one table (evaluate_cr2; the old before/after ran it twice): CPU",
               samples["full_cpu"], "s"),
        figure("full_eval.wall_s", "full evaluation of one table: wall", samples["full_wall"], "s"),
        figure("cr2_only.cpu_s", "CR² alone, scores from the cache (evaluate_table): CPU", samples["fast_cpu"], "s"),
        figure("cr2_only.wall_s", "CR² alone, scores from the cache: wall", samples["fast_wall"], "s"),
        figure("score_cache_fill.cpu_s", "filling the score cache for test (once per gate): CPU", samples["fill_cpu"], "s"),
        figure("load_sets.cpu_s", "load_routing_sets (all splits): CPU", samples["load_cpu"], "s"),
        figure("cr2_rows_identical", "the cr2 rows of both are identical (1 = yes)", [float(v) for v in identical], "",
               {"op": ">=", "value": 1, "text": "identical"}),
    ]
    load = os.getloadavg()
    notes = ["One process, no Prefect; CPU from getrusage. Default-scenario labels are SIMULATED (times only)."]
    if load[0] > 2:
        notes.append(f"Load average {load[0]:.1f} at the end on 2 cores: wall times inflated; compare the CPU times.")
    write_result("recal_eval", {"home": str(src), "repeats": reps, "load_avg_end": list(load), "notes": notes,
                                "figures": figures})


if __name__ == "__main__":
    main()
