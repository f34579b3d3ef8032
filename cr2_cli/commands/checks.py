"""`cr2 guarantees | simcheck`: checks of the method's promises and of the label simulator against measured labels."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from cr2_cli import prefect_api
from cr2_cli.console import console, friendly
from cr2_cli.options import ConfigOpt, HomeOpt, config_arg, home_dir


@friendly
def guarantees(resplits: Optional[int] = typer.Option(None, "--resplits", help="re-splits of val + test for "
                                                      "the deployed gate's ltt, Mondrian and target checks (default: "
                                                      "calibration.n_resplits; the certified routers' re-splits are the "
                                                      "certify stage's, evaluation.n_resplits)"),
               seed: Optional[int] = typer.Option(None, help="seed of the re-splits (default: fresh entropy; the "
                                                  "run stores and prints the one it used, so `--seed` replays a run)"),
               confirm_factor: Optional[int] = typer.Option(None, "--confirm-factor", min=2, max=100,
                                                            help="a family flagged \"violation detected\" is re-checked "
                                                                 "on an independent stream with this many times the "
                                                                 "re-splits (default 10; at most 100,000 re-splits)"),
               config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt) -> None:
    """Print every certified router's validity over re-splits (one verdict per router, rule and α); check the promises
    of CR²'s deployed gate no other stage checks (ltt, Mondrian, target) over random re-splits of val + test and store
    them (view v_guarantees)."""
    from cr2_cli.render import print_guarantees
    from cr2.config import load_config
    from cr2_tasks.guarantees import check_guarantees

    h = home_dir(home, create=False)
    cfg = load_config(config)
    out = check_guarantees.fn(cfg, str(h), resplits, seed, confirm_factor)
    print_guarantees(h, out["run_id"], out["source"], cfg.labels.source)


@friendly(flow=True)
def simcheck(config: Optional[Path] = ConfigOpt, home: Optional[Path] = HomeOpt,
             full: bool = typer.Option(False, "--full", help="all 12,032 MMLU-Pro questions instead of the stable "
                                       "subsample simcheck.n_questions (embedding them all takes long on a CPU)"),
             structure_only: bool = typer.Option(False, "--structure-only", help="skip the routing part (no router "
                                                 "is fitted)")) -> None:
    """Sim-to-real check: measured MMLU-Pro labels vs the simulators on the same questions (docs/labels.md)."""
    from cr2_cli.render import print_simcheck
    from cr2_flows.simcheck import simcheck_flow

    prefect_api.wait()  # the temporary API server friendly() started while the flow imported

    h = home_dir(home)
    t0 = time.perf_counter()
    out = simcheck_flow(config_path=config_arg(config), home=str(h), full=full, routing=not structure_only)
    print_simcheck(h, out)
    console.print(f"\ncr2 simcheck finished in {time.perf_counter() - t0:.1f} s"
                  f" ({'cached' if out.get('cached') else 'computed'}); run {out['run_id']}")
    console.print(f"warehouse: {h / 'cr2.duckdb'} (view v_simcheck)\nreport:    {out['report']}", highlight=False)
