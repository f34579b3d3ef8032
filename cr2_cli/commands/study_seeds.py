"""`cr2 study seeds --n 5`: re-run split + training + calibration + evaluation with N seeds (flows/study_seeds.py).

Wired in cr2_cli/main.py as `study_app.command("seeds")(friendly(seeds_command, flow=True))`. Prints the spread across
seeds (mean, sd, min–max; view v_seed_spread) beside the base seed's bootstrap interval.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from cr2_cli.options import home_dir

from cr2_cli.console import SafeConsole

console = SafeConsole()


def seeds_command(n: int = typer.Option(5, "--n", min=2, help="number of seeds: the config's split seed and the "
                                        "next n − 1"),
                  seed: Optional[list[int]] = typer.Option(None, "--seed", help="explicit seeds instead of --n "
                                                           "(repeatable)"),
                  config: Optional[Path] = typer.Option(None, "--config", "-c",
                                                        help="config YAML (default: configs/default.yaml)"),
                  home: Optional[Path] = typer.Option(None, "--home", help="warehouse folder (default: $CR2_HOME "
                                                      "or var/)")) -> None:
    """Seed variability: re-run split, teacher, gate, learned baselines, calibration and evaluation with N seeds."""
    from cr2.config import load_config
    from cr2_cli.results import seed_spread_markdown
    from cr2_flows.study_seeds import study_seeds_flow

    h = home_dir(home)
    t0 = time.perf_counter()
    out = study_seeds_flow(config_path=str(config) if config else None, home=str(h), n=n, seeds=seed or None)
    for s, r in out["seeds"].items():
        console.print(f"seed {s}: run {r['run_id']} in {r['home']} ({r['seconds']} s)", highlight=False)
    alpha = load_config(config).grids.default_alpha
    console.print(seed_spread_markdown(h, out["study_id"], alpha=alpha), highlight=False, markup=False)
    console.print(f"cr2 study seeds finished in {time.perf_counter() - t0:.1f} s; study {out['study_id']} "
                  f"(tables seed_runs, seed_results; view v_seed_spread)", highlight=False)
