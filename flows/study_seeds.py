"""cr2 study seeds: how much do the headline numbers move when the split and the training seed change?

The bootstrap intervals (flows/evaluate.py → intervals) hold training, calibration and the split fixed and
resample only the test queries. This study re-runs, for each of N seeds,
  split (splits.seed) → train (teacher.seed, gate.seed) → calibrate → learned baselines (their `seed`)
  → evaluate → certify → equal-risk → intervals
and stores each seed's headline statistics (every per-query metric at every operating point, benchmark 'all';
every learned method's saving vs KNN at each target and its mean over the targets; the equal-risk decomposition's
mean savings at grids.default_alpha, metric `equal-risk:<question>`) in `seed_results`, one row
per (seed, statistic) with that seed's own bootstrap interval; the view v_seed_spread gives mean, sd, min and
max over the seeds beside the base seed's interval.

The base seed (the config's own splits.seed) runs in the warehouse itself — the normal pipeline's stages,
cached. Every other seed runs in its own warehouse under <home>/studies/seeds/seed-<s>/, a copy of this one
(queries, embeddings and labels are reused, nothing is re-embedded), so a study never changes the deployed
gate, thresholds or the newest evaluation run here; each seed's stages are cached in its own home, so an
interrupted study resumes where it stopped. Labels and channel states are the same for every seed (their
seeds stay); the pre-execution cost ĉ is re-estimated from each seed's own train split. Seeds other than the
base skip the risk-vs-α Monte-Carlo bands (evaluation.n_resplits = 0): they are not a seed statistic.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
from prefect import flow

import cr2_flows  # noqa: F401  (Prefect loads this file by path: the package's offline environment first, cr2/core/env.py)
from cr2.config import Config, load_config

STUDY_DIR = Path("studies") / "seeds"  # seed homes, relative to the warehouse home


def seed_overrides(config: Config, seed: int, target_grid: list[float] | None = None) -> dict[str, Any]:
    """Config overrides that re-seed the split, the teacher, the gate and every learned baseline that takes a seed;
    `target_grid` (the base run's) makes every seed's mean saving average over the same targets, so every seed
    estimates the same quantity."""
    import inspect

    from cr2.routers import router_class, router_entry, use_catalogues

    use_catalogues(config.baselines.catalogues)
    params: dict[str, dict] = {}
    for name in config.baselines.routers:
        entry = router_entry(name)
        if "seed" in inspect.signature(router_class(name).__init__).parameters:
            params[entry.name] = {"seed": int(seed)}
    return {"seed": int(seed), "splits": {"seed": int(seed)}, "teacher": {"seed": int(seed)},
            "gate": {"seed": int(seed)}, "baselines": {"params": params},
            "evaluation": {"n_resplits": 0, **({"target_grid": list(target_grid)} if target_grid is not None else {})}}


def base_target_grid(config: Config, home: Path) -> list[float]:
    """The target grid of the base run (its validation split's, or the configured one); runs the base if needed."""
    from cr2_tasks.inputs import load_sets
    from cr2_tasks.intervals import validation_grid

    if config.evaluation.target_grid is not None:
        return list(config.evaluation.target_grid)
    run_seed(config, home)  # cached when the base run exists
    return [round(float(t), 2) for t in validation_grid(config, load_sets(config, str(home))["val"])]


def seed_home(home: Path, seed: int) -> Path:
    """The warehouse folder of a non-base seed: a copy of `home`'s warehouse made on first use."""
    from cr2_warehouse.db import copy_warehouse

    return copy_warehouse(home, home / STUDY_DIR / f"seed-{seed}")


def run_seed(config: Config, home: Path) -> dict:
    """The pipeline stages a seed re-runs (each a cached task in `home`): prepare … intervals (cr2_flows.evaluate.study_run)."""
    from cr2_flows.evaluate import study_run

    return study_run(config, home)


def study_id_of(config: Config, seeds: list[int]) -> str:
    """A study's id: the configuration and the seeds (a re-run of the same study replaces its rows)."""
    from cr2_tasks.store import study_id

    return study_id("seeds", config.section_hash(), sorted(seeds))


@flow(name="cr2-study-seeds", log_prints=True)
def study_seeds_flow(config_path: str | None = None, home: str | None = None, n: int = 5,
                     seeds: list[int] | None = None) -> dict:
    """Re-run split + training + calibration + evaluation for N seeds; per-seed results in `seed_results`."""
    from cr2.core.errors import InvalidValueError
    from cr2_warehouse.db import Warehouse, default_home
    from cr2.evaluation.equal_risk import study_statistics
    from cr2_warehouse.repository import run_equal_risk, run_intervals, utc_now, write_seed_result

    config = load_config(config_path)
    h = Path(home) if home else default_home()
    base = int(config.splits.seed)
    seeds = [int(s) for s in seeds] if seeds else [base + i for i in range(int(n))]
    if len(seeds) < 2 or len(set(seeds)) != len(seeds):
        raise InvalidValueError(f"a seed study needs at least 2 distinct seeds, got {seeds}")
    study_id = study_id_of(config, seeds)
    out: dict[str, Any] = {"study_id": study_id, "seeds": {}}
    grid = None  # the base run's validation target grid, fixed for every seed
    for seed in sorted(seeds, key=lambda s: s != base):  # the base first: its grid is every seed's
        t0 = time.perf_counter()
        if grid is None:
            grid = base_target_grid(config, h)
        if seed == base:
            cfg, home_s = config, h
        else:
            cfg = load_config(config_path, overrides=seed_overrides(config, seed, grid))
            home_s = seed_home(h, seed)
        print(f"seed {seed}: running in {home_s}")
        evaluated = run_seed(cfg, home_s)
        with Warehouse(home_s, read_only=True) as wh:
            iv = run_intervals(wh, evaluated["run_id"])
            equal = run_equal_risk(wh, evaluated["run_id"])
        iv = iv[iv["benchmark"] == "all"].rename(columns={"estimate": "value"})
        # the equal-risk decomposition at the default α: one row per comparison, method "<side a> vs <side b>"
        iv = pd.concat([iv, pd.DataFrame([
            {"method": f"{r['method_a']} vs {r['method_b']}", "lam": None, "alpha": r["alpha"], "benchmark": "all",
             "metric": f"equal-risk:{r['question']}", "target": None, "value": r["estimate"], "lower": r["lower"],
             "upper": r["upper"]} for r in study_statistics(equal.to_dict("records"), cfg.grids.default_alpha)],
            columns=["method", "lam", "alpha", "benchmark", "metric", "target", "value", "lower", "upper"])],
            ignore_index=True)
        run = {"study_id": study_id, "seed": seed, "run_id": evaluated["run_id"],
               "home": "." if home_s == h else str(home_s.relative_to(h)), "n_test": int(evaluated["n_test"]),
               "created_at": utc_now()}
        with Warehouse(h) as wh:
            write_seed_result(wh, run, iv)
        seconds = round(time.perf_counter() - t0, 1)
        print(f"seed {seed}: evaluation run {evaluated['run_id']} in {seconds} s")
        out["seeds"][seed] = {"run_id": evaluated["run_id"], "home": str(home_s), "seconds": seconds,
                              "cached": bool(evaluated.get("cached"))}
    return out
