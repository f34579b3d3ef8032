"""`cr2 study routers`: the pre-registered router study (flows/router_study.py) and its tables from the stored rows.

Wired in cr2_cli/main.py as `study_app.command("routers")(friendly(routers_command, flow=True))`.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import pandas as pd
import typer

from cr2_cli.console import SafeConsole, emit

console = SafeConsole()


def study_results(study_path: str, pools_home: str, scenario_homes: dict[str, str] | None = None):
    """(study, rows, summary, flops) of the stored study (cr2.studies.routers.study_rows / study_summary), read from
    the pools' base warehouse and every scenario's home; a unit not stored yet is absent from the rows. flops: FLOPs
    per decision of every router fitted in the first pool's study home (the candidates' cost)."""
    from cr2.studies.routers import POOLS, SCENARIOS as SCENARIO_KIND, study_rows, study_summary
    from cr2.studies.routers import load_study, study_id, study_scenarios
    from cr2_warehouse.db import DB_NAME, Warehouse
    from cr2_warehouse.pools import pool_study_runs, router_study_rows
    from cr2_warehouse.repository import router_flops

    study = load_study(study_path)
    homes = {n: s.home for n, s in study_scenarios().items()} | dict(scenario_homes or {})
    parts = [(POOLS, Path(pools_home), None)] + [(SCENARIO_KIND, Path(homes[n]), n) for n in study.scenarios]
    savings, rooms, flops = [], [], {}
    for kind, home, unit in parts:
        if not (home / DB_NAME).is_file():
            continue
        sid = study_id(study, kind)
        with Warehouse(home, read_only=True) as wh:
            sav, room = router_study_rows(wh, sid, study.other)
            runs = pool_study_runs(wh, sid)
        if unit is not None:
            sav, room = sav[sav["unit"] == unit], room[room["unit"] == unit]
        savings.append(sav.assign(kind=kind))
        rooms.append(room.assign(kind=kind))
        if kind == POOLS and not flops and len(runs):
            first = runs.sort_values("pool").iloc[0]
            unit_home = home / first["home"]
            if (unit_home / DB_NAME).is_file():
                with Warehouse(unit_home, read_only=True) as wh:
                    flops = router_flops(wh, str(first["label_source"]))
    cols = ["kind", "unit", "subject", "other", "estimate", "lower", "upper", "p_value", "n_resamples"]
    saving = pd.concat(savings, ignore_index=True) if savings else pd.DataFrame(columns=cols)
    headroom = pd.concat(rooms, ignore_index=True) if rooms else pd.DataFrame(columns=["kind", "unit", "estimate"])
    rows = study_rows(saving, headroom, study)
    return study, rows, study_summary(rows, study), flops


def study_validity(study_path: str, scenario_homes: dict[str, str] | None = None) -> pd.DataFrame:
    """Per stored scenario unit: the validity over the certify stage's re-splits (cr2.report.validity) of every
    candidate and of the reference under the study's rule at the unit's α — one verdict per router, Holm over its λ
    cells. Empty where no scenario is stored."""
    from cr2.config import load_config
    from cr2.report.validity import certified_verdicts
    from cr2.studies.routers import SCENARIOS as SCENARIO_KIND, alpha_of
    from cr2.studies.routers import load_study, study_id, study_scenarios
    from cr2_warehouse.db import DB_NAME, Warehouse
    from cr2_warehouse.pools import pool_study_runs
    from cr2_warehouse.repository import certified_validity

    study = load_study(study_path)
    homes = {n: s.home for n, s in study_scenarios().items()} | dict(scenario_homes or {})
    keep = [*study.names, study.reference]
    out = []
    for name in study.scenarios:
        home = Path(homes[name])
        if not (home / DB_NAME).is_file():
            continue
        with Warehouse(home, read_only=True) as wh:
            runs = pool_study_runs(wh, study_id(study, SCENARIO_KIND))
        runs = runs[runs["pool"] == name]
        if runs.empty or not (home / runs["home"].iloc[0] / DB_NAME).is_file():
            continue
        with Warehouse(home / runs["home"].iloc[0], read_only=True) as wh:
            cells = certified_validity(wh, str(runs["run_id"].iloc[0]))
        alpha = alpha_of(load_config(study_scenarios()[name].config).model_dump(mode="json"), study.alpha_key)
        v = certified_verdicts(cells)
        v = v[(v["rule"] == study.rule) & ((v["alpha"] - alpha).abs() < 1e-12) & v["router"].isin(keep)]
        out.append(v.assign(scenario=name))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame()


def study_markdown(study, rows, summary, flops, word=lambda w: w or "—", validity: pd.DataFrame | None = None) -> str:
    """The study's tables: the summary over the pools, then per pool, per scenario, and the scenarios' validity."""
    from cr2.report.markdown import markdown_table
    from cr2.report.router_study import summary_table, unit_table
    from cr2.report.validity import certified_display
    from cr2.studies.routers import POOLS, SCENARIOS as SCENARIO_KIND

    parts = [summary_table(summary, flops, word), unit_table(rows, POOLS, word), unit_table(rows, SCENARIO_KIND, word)]
    if validity is not None and not validity.empty:
        shown = certified_display(validity, word=word)
        shown.insert(0, "scenario", validity["scenario"].to_numpy())
        parts.append(markdown_table(shown))
    return "\n".join(parts)


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
    from cr2_flows.router_study import study_routers_flow

    homes = _scenario_homes(scenario_home)
    t0 = time.perf_counter()
    if not report_only:
        study_routers_flow(study_path=str(study), pools_home=str(pools_home), scenario_homes=homes, only=unit or None)
    emit(study_markdown(*study_results(str(study), str(pools_home), homes),
                        validity=study_validity(str(study), homes)))
    console.print(f"cr2 study routers finished in {time.perf_counter() - t0:.1f} s (tables pool_runs, pool_results "
                  "under study ids routers-pool-…, routers-scenario-…)", highlight=False)
