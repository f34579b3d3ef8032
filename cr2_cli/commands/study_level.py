"""`cr2 study level`: the A/A simulation of the equal-risk test's level on the newest evaluation run (flows/level.py).

Wired in cr2_cli/main.py as `study_app.command("level")(friendly(level_command, flow=True))`. Prints, per family,
the rejection rate under the label-permuted null with its Monte-Carlo SE and verdict against 5 %, and the
Monte-Carlo error of the page's bootstrap p at the family's first Holm threshold.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional

import typer

from cr2.studies.level import AA_RESAMPLES
from cr2_cli.console import SafeConsole

if TYPE_CHECKING:
    import pandas as pd

console = SafeConsole()


def level_table(rows: pd.DataFrame, word: Callable | None = None) -> str:
    """The stored level rows as a markdown table (cr2.report.level.LevelTable); `word` renders each verdict
    (default: cr2.report.table.plain_word)."""
    from cr2.report.level import LevelTable
    from cr2.report.table import plain_word
    from cr2.studies.level import stored_level_verdicts

    return LevelTable(rows, stored_level_verdicts(rows), word or plain_word).markdown().rstrip("\n")


def level_command(config: Optional[Path] = typer.Option(None, "--config", "-c",
                                                        help="config YAML (default: configs/default.yaml)"),
                  home: Optional[Path] = typer.Option(None, "--home", help="warehouse folder (default: $CR2_HOME "
                                                      "or var/)"),
                  replicates: int = typer.Option(200, "--replicates", min=1, max=100_000,
                                                 help="A/A replicates (the rate's MC SE is √(r(1 − r)/N))"),
                  resamples: int = typer.Option(AA_RESAMPLES, "--resamples", min=20, max=100_000,
                                                help="bootstrap resamples per replicate (the default puts every Holm "
                                                     "threshold of a family of ≤ 6 tests on a step of p = 2X/B)"),
                  seed: int = typer.Option(0, "--seed", help="seed of the coins and bootstrap indices")) -> None:
    """The level of the equal-risk bootstrap test, measured by an A/A simulation on the newest evaluation run."""
    from cr2_cli.options import home_dir
    from cr2_flows.level import study_level_flow
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.level import newest_level_study

    h = home_dir(home)
    t0 = time.perf_counter()
    out = study_level_flow(config_path=str(config) if config else None, home=str(h), n_replicates=replicates,
                           n_resamples=resamples, seed=seed)
    with Warehouse(h, read_only=True) as wh:
        rows = newest_level_study(wh)
    console.print(level_table(rows[rows["study_id"] == out["study_id"]]), highlight=False, markup=False)
    console.print(f"cr2 study level finished in {time.perf_counter() - t0:.1f} s; study {out['study_id']} on run "
                  f"{out['run_id']} ({out['n_replicates']} replicates × B = {out['n_resamples']}; table level_study)",
                  highlight=False)
