"""`cr2 study level`: the A/A simulation of the equal-risk test's level on the newest evaluation run (flows/level.py).

Wired in cr2_cli/main.py as `study_app.command("level")(friendly(level_command, flow=True))`. Prints, per family,
the rejection rate under the label-permuted null with its Monte-Carlo SE and verdict against 5 %, and the
Monte-Carlo error of the page's bootstrap p at the family's first Holm threshold.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional

import pandas as pd
import typer

from cr2_cli.console import SafeConsole

console = SafeConsole()


def level_table(rows: pd.DataFrame, word: Callable = str) -> str:
    """The stored level rows as a markdown table; `word` renders each verdict (the results page marks it)."""
    from cr2.report.markdown import markdown_table
    from cr2.studies.level import level_verdict

    out = []
    for r in rows.itertuples(index=False):
        fam = " · ".join([r.question, *([r.rule] if isinstance(r.rule, str) else []),
                          *([f"α = {r.alpha:g}"] if r.alpha == r.alpha and r.alpha is not None else [])])
        out.append({
            "family (question · rule · α)": fam, "m": int(r.n_tests),
            "A/A rate ± MC SE": f"{100 * r.rate:.1f} % ± {100 * r.rate_se:.1f} ({int(r.n_rejections)}/{int(r.n_replicates)})",
            "one-sided 95 % upper": f"{100 * r.rate_upper:.1f} %",
            "p of rate ≤ 5 %, Holm": f"{r.p_above:.3g}, {r.p_above_holm:.3g}",
            "verdict": word(level_verdict(int(r.n_rejections), int(r.n_replicates), p_adjusted=float(r.p_above_holm))),
            "tests rejected": f"{int(r.n_test_rejections)}/{int(r.n_replicates) * int(r.n_tests)}",
            "p MC SE at 0.05/m (B)": f"{r.p_threshold:.4f} ± {r.p_se:.4f} ({100 * r.p_relative_se:.0f} %; B = "
                                     f"{int(r.page_resamples):,})",
            "resamples behind it": f"{r.p_tail_resamples:.0f}"})
    return markdown_table(pd.DataFrame(out)).rstrip("\n")


def level_command(config: Optional[Path] = typer.Option(None, "--config", "-c",
                                                        help="config YAML (default: configs/default.yaml)"),
                  home: Optional[Path] = typer.Option(None, "--home", help="warehouse folder (default: $CR2_HOME "
                                                      "or var/)"),
                  replicates: int = typer.Option(200, "--replicates", min=1, max=100_000,
                                                 help="A/A replicates (the rate's MC SE is √(r(1 − r)/N))"),
                  resamples: int = typer.Option(500, "--resamples", min=20, max=100_000,
                                                help="bootstrap resamples per replicate"),
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
