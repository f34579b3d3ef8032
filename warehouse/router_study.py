"""The stored router study (`cr2 study routers`, cr2.studies.routers) read back: its rows, summary and FLOPs from the
pools' base warehouse and every scenario's home, and each scenario's validity under the study's rule — what the study
command and docs/results.md print (cr2.report.router_study)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd


def study_results(study_path: str, pools_home: str, scenario_homes: dict[str, str] | None = None, *,
                  shipped: bool = True):
    """(study, rows, summary, flops) of the stored study (cr2.studies.routers.study_rows / study_summary), read from
    the pools' base warehouse and every scenario's home; a unit not stored yet is absent from the rows. flops: FLOPs
    per decision of every router fitted in the first pool's study home (the candidates' cost). shipped: a scenario
    scenario_homes does not name is read from its shipped home (configs/scenarios.yaml; the command's default), else
    left out (the page reads only the homes it was given)."""
    from cr2.studies.routers import POOLS, SCENARIOS as SCENARIO_KIND, study_rows, study_summary
    from cr2.studies.routers import load_study, study_id
    from cr2_warehouse.db import DB_NAME, Warehouse
    from cr2_warehouse.pools import pool_study_runs, router_study_rows
    from cr2_warehouse.repository import router_flops

    study = load_study(study_path)
    homes = _scenario_homes(study, scenario_homes, shipped)
    parts = [(POOLS, Path(pools_home), None)] + [(SCENARIO_KIND, home, n) for n, home in homes.items()]
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


def study_validity(study_path: str, scenario_homes: dict[str, str] | None = None, *, shipped: bool = True) -> pd.DataFrame:
    """Per stored scenario unit: the validity over the certify stage's re-splits (cr2.report.validity) of every
    candidate and of the reference under the study's rule at the unit's α — one verdict per router, Holm over its λ
    cells. Empty where no scenario is stored. shipped: as study_results."""
    from cr2.config import load_config
    from cr2.report.validity import certified_verdicts
    from cr2.studies.routers import SCENARIOS as SCENARIO_KIND, alpha_of
    from cr2.studies.routers import load_study, study_id, study_scenarios
    from cr2_warehouse.db import DB_NAME, Warehouse
    from cr2_warehouse.pools import pool_study_runs
    from cr2_warehouse.repository import certified_validity

    study = load_study(study_path)
    keep = [*study.names, study.reference]
    out = []
    for name, home in _scenario_homes(study, scenario_homes, shipped).items():
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


def _scenario_homes(study, scenario_homes: dict[str, str] | None, shipped: bool) -> dict[str, Path]:
    """{scenario: its home} of the scenarios the study names, in the study's order: the given homes, and with `shipped`
    the shipped home (configs/scenarios.yaml) of any other."""
    from cr2.studies.routers import study_scenarios

    homes = ({n: s.home for n, s in study_scenarios().items()} if shipped else {}) | dict(scenario_homes or {})
    return {n: Path(homes[n]) for n in study.scenarios if n in homes}
