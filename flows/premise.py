"""Study premise: when does CR² pay? A grid of device speed × channel over any warehouse.

CR²'s two-stage rule assumes answering on the device is the cheap option. The premise map varies what decides
that — how fast the device is (its platform's prefill throughput and memory bandwidth × f) and how far the
user is from the access point (a named state distribution) — and in every cell compares CR² with the
baselines at fixed accuracy, with paired-bootstrap intervals:

1. base      — the newest evaluation run of the config's labels and states: its gate, teacher and baselines,
2. inputs    — the cost-independent arrays every cell shares (embeddings, labels, splits, tokens, teacher p_m(x),
               the test p̂ of baselines that do not read costs), one cached task, one .npz,
3. cells     — one cached task per (speed factor, channel): ĉ and c re-priced; CR² re-calibrated only and
               retrained; every baseline routed on the cell's ĉ (the ones that read costs refitted); the
               savings vs KNN and vs the best single model, the loss of re-calibration vs retraining, the risk
               at α; fanned out on the task runner (threads, or Dask when asked for, as labeling does),
0. record    — the study's settings (premise_studies: grid, bootstrap, retrain mode, config), so a results page
               names the command that reproduces the study (`--record-only` records a study run before cr2 did),
4. write     — each finished cell's rows into premise_cells / premise_results (the view v_premise),
5. report    — <home>/premise-report/index.html: the view's table and two heatmaps.

A killed study resumes: finished cells are cached (persisted results) and are only re-written.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Sequence

from prefect import flow

from cr2.config import Config, load_state_distribution
from cr2.core.files import atomic_write
from cr2.studies.premise import (DEFAULT_CHANNELS, DEFAULT_RESAMPLES, DEFAULT_RETRAIN_EPOCHS,
                                 DEFAULT_RETRAIN_FROM, DEFAULT_SPEEDS)
from cr2_tasks.common import run_stage
from cr2_tasks.premise import PREMISE_CELL, PREMISE_INPUTS, study_id
from cr2_warehouse.db import Warehouse



def _base(config: Config, home: Path) -> tuple[dict, dict]:
    from cr2_tasks.baselines import baseline_names
    from cr2_warehouse.premise import base_artifacts, baseline_artifacts

    names = [n for n in baseline_names(config) if not n.startswith("always-")]
    with Warehouse(home, read_only=True) as wh:
        base = base_artifacts(wh, config.labels.source, config.channel.distribution.dist_id)
        return base, baseline_artifacts(wh, config.labels.source, names)


def inputs(config: Config, home: Path, base: dict, baselines: dict) -> dict:
    return run_stage(PREMISE_INPUTS, config, home, base, baselines)


def config_name(config_path: str | None) -> str | None:
    """The config file as a results page names it: relative to the repository when inside it (None: the default)."""
    from cr2.config import REPO_ROOT

    if not config_path:
        return None
    p = Path(config_path)
    try:
        return str(p.resolve().relative_to(REPO_ROOT.resolve()))
    except ValueError:
        return str(p)


def record_study(config: Config, home: Path, speeds: Sequence[float], channels: Sequence[str], n_resamples: int,
                 seed: int, retrain_epochs: int, retrain_from: str, config_path: str | None = None,
                 only_if_stored: bool = False) -> dict:
    """The study id of these settings on the warehouse's base, recorded in premise_studies (with `only_if_stored`,
    only when the warehouse already holds cells under that id: settings that do not match a stored study record
    nothing); returns {study_id, base_run, n_cells, recorded}."""
    from cr2_warehouse.premise import premise_cell_count, write_premise_study

    for ch in channels:
        load_state_distribution(ch)  # a misspelt channel fails before any work
    base, baselines = _base(config, home)
    sid = study_id(config, base, baselines, speeds=speeds, channels=channels, n_resamples=n_resamples, seed=seed,
                   retrain_from=retrain_from, retrain_epochs=retrain_epochs)
    with Warehouse(home) as wh:
        n = premise_cell_count(wh, sid)
        if only_if_stored and not n:
            return {"study_id": sid, "base_run": base["run_id"], "n_cells": 0, "recorded": False}
        write_premise_study(wh, {"study_id": sid, "label_source": config.labels.source,
                                 "config": config_name(config_path), "speeds": speeds, "channels": channels,
                                 "n_resamples": int(n_resamples), "seed": int(seed), "retrain_from": retrain_from,
                                 "retrain_epochs": int(retrain_epochs) if retrain_from == "base" else None,
                                 "base_run": base["run_id"]})
    return {"study_id": sid, "base_run": base["run_id"], "n_cells": int(n or 0), "recorded": True, "base": base,
            "baselines": baselines}


def premise(config: Config, home: Path, speeds: Sequence[float] = DEFAULT_SPEEDS,
            channels: Sequence[str] = DEFAULT_CHANNELS, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
            retrain_epochs: int = DEFAULT_RETRAIN_EPOCHS, retrain_from: str = DEFAULT_RETRAIN_FROM,
            config_path: str | None = None) -> dict:
    """Run (or resume) the premise map inside the current flow; returns the study id and each cell's summary."""
    from cr2_warehouse.premise import write_premise_cell

    t0 = time.perf_counter()
    rec = record_study(config, home, speeds, channels, n_resamples, seed, retrain_epochs, retrain_from, config_path)
    base, baselines, sid = rec["base"], rec["baselines"], rec["study_id"]
    shared = inputs(config, home, base, baselines)
    print(f"premise study {sid}: {len(speeds)} speeds × {len(channels)} channels = {len(speeds) * len(channels)} cells; "
          f"base run {base['run_id']}; refitted per cell: {shared['cost_aware'] or 'none'}")
    futures, cell = {}, PREMISE_CELL.bound(home)
    for f in speeds:
        for ch in channels:  # fanned out on the task runner: submit, not run_stage
            futures[(float(f), ch)] = cell.submit(config, str(home), shared, base, baselines, float(f), ch, n_resamples,
                                                  seed, retrain_epochs, retrain_from)
    cells, cached = [], 0
    for (f, ch), fut in futures.items():
        out = fut.result()
        hit = fut.state.name == "Cached"
        cached += hit
        with Warehouse(home) as wh:
            write_premise_cell(wh, sid, config.labels.source, out["key"], out["summary"], out["rows"])
        s = out["summary"]
        cells.append({**s, "cached": hit})
        print(f"cell speed×{f:g} / {ch}: ĉ ratio {s['cost_ratio_est']:.3f}, {s['cell_s']:.1f} s"
              f"{' (cached)' if hit else ''}")
    report = premise_report(config, home, sid)
    return {"study_id": sid, "base_run": base["run_id"], "cells": cells, "n_cells": len(cells), "n_cached": cached,
            "inputs": shared, "report": report, "wall_s": round(time.perf_counter() - t0, 1)}


def premise_report(config: Config, home: Path, sid: str) -> str:
    """Write <home>/premise-report/index.html (v_premise as a table, the two heatmaps); returns its path."""
    from cr2.report.premise import premise_page
    from cr2_warehouse.premise import premise_view

    with Warehouse(home, read_only=True) as wh:
        df = premise_view(wh, sid)
    return str(atomic_write(Path(home) / "premise-report" / "index.html", premise_page(df, sid)))


def task_runner(kind: str = "threads", workers: int = 1, dask_address: str | None = None) -> Any:
    """The Prefect task runner the cells fan out on: threads (default, `workers` at once) or a Dask cluster."""
    from cr2.config.lmeval import TaskRunnerSpec
    from cr2_flows.label import build_task_runner

    if kind == "threads":
        spec = TaskRunnerSpec(kind="threads", max_workers=workers)
    else:
        spec = TaskRunnerSpec(kind=kind, dask_n_workers=workers, dask_address=dask_address)
    return build_task_runner(spec)


@flow(name="cr2-study-premise", log_prints=True, validate_parameters=False)
def premise_flow(config_path: str | None = None, home: str | None = None, speeds: list[float] | None = None,
                 channels: list[str] | None = None, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0,
                 retrain_epochs: int = DEFAULT_RETRAIN_EPOCHS, retrain_from: str = DEFAULT_RETRAIN_FROM) -> dict:
    """The premise map of the warehouse at `home` under the config (a study over device speed × channel)."""
    from cr2.config import load_config
    from cr2_warehouse.db import default_home

    return premise(load_config(config_path), Path(home) if home else default_home(),
                   tuple(speeds or DEFAULT_SPEEDS), tuple(channels or DEFAULT_CHANNELS), n_resamples, seed, retrain_epochs,
                   retrain_from, config_path)


def run_premise(config_path: str | None, home: Path, speeds: Sequence[float], channels: Sequence[str], n_resamples: int,
                seed: int, runner: str = "threads", workers: int = 1, dask_address: str | None = None,
                retrain_epochs: int = DEFAULT_RETRAIN_EPOCHS, retrain_from: str = DEFAULT_RETRAIN_FROM) -> dict:
    """The plain-Python entry the CLI calls: the flow on the chosen task runner."""
    fn = premise_flow.with_options(task_runner=task_runner(runner, workers, dask_address))
    return fn(config_path=config_path, home=str(home), speeds=list(speeds), channels=list(channels),
              n_resamples=n_resamples, seed=seed, retrain_epochs=retrain_epochs, retrain_from=retrain_from)
