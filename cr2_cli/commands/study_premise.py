"""`cr2 study premise`: the premise map — when does CR² pay, over device speed × channel."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from cr2_cli.options import home_dir

from cr2_cli.console import SafeConsole

console = SafeConsole()


def _floats(text: str) -> list[float]:
    from cr2.core.errors import ConfigError

    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ConfigError(f"--speeds takes comma-separated numbers, e.g. 0.25,0.5,1,2,4,8 (got {text!r})") from None
    if not values or any(not v > 0 for v in values):
        raise ConfigError(f"--speeds needs at least one factor, each > 0 (got {text!r})")
    return values


def premise_command(
    speeds: str = typer.Option("0.25,0.5,1,2,4,8", "--speeds", help="device speed factors (× the device platform's "
                               "prefill throughput and memory bandwidth), comma-separated"),
    channels: str = typer.Option("default,premise-far,premise-cell-edge,premise-beyond-edge",
                                 "--channels", help="state distributions near → far (names under configs/states or "
                                 "YAML files), comma-separated"),
    resamples: int = typer.Option(10_000, "--resamples", min=1, help="paired-bootstrap resamples of the test queries (p has resolution 2 / B)"),
    seed: int = typer.Option(0, "--seed", help="seed of the bootstrap resamples"),
    retrain_from: str = typer.Option("scratch", "--retrain-from", help="the retrained variant: scratch (a fresh gate and "
                                     "refitted cost-reading baselines, the config's schedule) | base (fine-tuned from "
                                     "the base fits for --retrain-epochs epochs; cheaper)"),
    retrain_epochs: int = typer.Option(4, "--retrain-epochs", min=1, help="epochs of fine-tuning (--retrain-from base)"),
    task_runner: str = typer.Option("threads", "--task-runner", help="where cells run: threads | dask"),
    workers: int = typer.Option(1, "--workers", min=1, help="cells at once (threads) or Dask workers"),
    dask_address: Optional[str] = typer.Option(None, "--dask-address", help="an existing Dask scheduler"),
    config: Optional[Path] = typer.Option(None, "--config", "-c", help="config YAML (default: configs/default.yaml)"),
    home: Optional[Path] = typer.Option(None, "--home", help="warehouse folder (default: $CR2_HOME or var/)"),
    record_only: bool = typer.Option(False, "--record-only", help="run no cell: record these settings under their "
                                     "study id (premise_studies) — for a study run before cr2 recorded its settings"),
) -> None:
    """The premise map: CR² vs the baselines over a grid of device speed × channel, with bootstrap intervals."""
    from cr2.core.errors import ConfigError, did_you_mean
    from cr2_flows.premise import run_premise

    if retrain_from not in ("scratch", "base"):
        raise did_you_mean("--retrain-from", retrain_from, ["scratch", "base"])
    if task_runner not in ("threads", "dask"):
        raise did_you_mean("task runner", task_runner, ["threads", "dask"])
    names = [c.strip() for c in channels.split(",") if c.strip()]
    if not names:
        raise ConfigError("--channels needs at least one state distribution")
    h = home_dir(home)
    if record_only:
        from cr2.config import load_config
        from cr2_flows.premise import record_study

        rec = record_study(load_config(config), h, _floats(speeds), names, resamples, seed, retrain_epochs, retrain_from,
                           str(config) if config else None, only_if_stored=True)
        if not rec["recorded"]:
            raise ConfigError(f"no cell of premise study {rec['study_id']} (these settings on base run "
                              f"{rec['base_run']}) is stored in {h}: nothing recorded — check the settings, or run the "
                              "command without --record-only")
        console.print(f"premise study {rec['study_id']} recorded (base run {rec['base_run']}; {rec['n_cells']} cells "
                      "stored under this id)", highlight=False)
        return
    t0 = time.perf_counter()
    out = run_premise(str(config) if config else None, h, _floats(speeds), names, resamples, seed, task_runner, workers,
                      dask_address, retrain_epochs, retrain_from)
    from cr2.report.premise_map import PremiseMap
    from cr2.studies.premise import premise_cells
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.premise import premise_view

    with Warehouse(h, read_only=True) as wh:
        v = premise_view(wh, out["study_id"])
    cached = {(c["speed_factor"], c["channel"]): c["cached"] for c in out["cells"]}
    console.print(PremiseMap(premise_cells(v), cached).rich(
        f"premise map {out['study_id']}: CR² (retrained) mean saving vs KNN over targets, % [95 % CI]", justify="right"))
    console.print(f"{out['n_cells']} cells ({out['n_cached']} cached) in {time.perf_counter() - t0:.1f} s; "
                  f"view v_premise (study_id = '{out['study_id']}'); report: {out['report']}", highlight=False)
