"""`cr2 study routers`: the pre-registered router study (flows/router_study.py) and its tables from the stored rows.

Wired in cr2_cli/main.py as `study_app.command("routers")(friendly(routers_command, flow=True))`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer

from cr2_cli.console import SafeConsole, emit

console = SafeConsole()


def _scenario_homes(specs: list[str] | None) -> dict[str, str]:
    out = {}
    for spec in specs or []:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise typer.BadParameter(f"--scenario-home {spec!r}: expected NAME=PATH, e.g. default=var")
        out[name] = path
    return out


def routers_command(study: Path = typer.Option(Path("configs/studies/router-study.yaml"), "--study",
                                               help="the pre-registration YAML (configs/studies/)"),
                    pools_home: Path = typer.Option(Path("var/mmlu-pro-sample"), "--pools-home",
                                                    help="base warehouse of the pool sweep (`make study-pools`)"),
                    scenario_home: Optional[list[str]] = typer.Option(None, "--scenario-home",
                                                                      help="NAME=PATH: a scenario's warehouse "
                                                                      "(default: var, var/mmlu-pro, var/zeroeval-*)"),
                    unit: Optional[list[str]] = typer.Option(None, "--unit", help="run only these pools or "
                                                             "scenarios (repeatable)"),
                    report_only: bool = typer.Option(False, "--report-only", help="print the stored study's tables; "
                                                     "run nothing")) -> None:
    """Router study: every pre-registered candidate against certified KNN at equal risk, on every pool and scenario."""
    from cr2.report.router_study import router_study_markdown
    from cr2.studies.routers import POOLS, SCENARIOS
    from cr2_flows.router_study import study_routers_flow
    from cr2_warehouse.router_study import study_results, study_validity

    homes = _scenario_homes(scenario_home)
    t0 = time.perf_counter()
    if not report_only:
        study_routers_flow(study_path=str(study), pools_home=str(pools_home), scenario_homes=homes, only=unit or None)
    _, rows, summary, flops = study_results(str(study), str(pools_home), homes)
    emit(router_study_markdown(rows, summary, flops, (POOLS, SCENARIOS), validity=study_validity(str(study), homes)))
    console.print(f"cr2 study routers finished in {time.perf_counter() - t0:.1f} s (tables pool_runs, pool_results "
                  "under study ids routers-pool-…, routers-scenario-…)", highlight=False)
