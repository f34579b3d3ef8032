"""cr2 study routers: the pre-registered router study (configs/studies/router-study.yaml, cr2/studies/routers.py).

Each unit — every pool of the pool rule, then every scenario — runs in a home of its own, a copy of the unit's
existing warehouse with its caches (`<pools home>/studies/routers/<pool>` from the pool sweep's
`studies/pools/<pool>`; `<scenario home>/studies/routers/<scenario>` from the scenario's home), so the pool sweep's
and the scenario's own runs stay as they are and only what the candidates change is computed:
  the unit's config + the candidates (cr2.studies.routers.study_config_data) → prepare … equal-risk → intervals
  (cr2_flows.evaluate.study_run) → pool summary (tasks/pools.py: the equal-risk rows with their bootstrap p, the
  oracle headroom)
and the unit's rows go into pool_runs / pool_results of the unit's base warehouse under the study's id, which
includes the pre-registration's content hash. An interrupted study resumes: cached stages are not re-run.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from prefect import flow

from cr2.config import Config, load_config
from cr2.config.scenarios import scenario
from cr2.studies.routers import DEFAULT_STUDY, load_study, study_id, study_scenarios
from cr2.studies.routers import study_path as shipped_study_path

STUDY_DIR = Path("studies") / "routers"
POOLS_HOME = scenario("pools").home  # where the pool sweep's pools are (configs/scenarios.yaml)

#: the scenarios a study may name (cr2.studies.routers.study_scenarios: configs/scenarios.yaml's pipeline runs)
SCENARIOS = study_scenarios()


def unit_config(config: Config, study) -> Config:
    from cr2.studies.routers import study_config_data

    return Config.model_validate(study_config_data(config.model_dump(mode="json"), study))


def _run_unit(config: Config, source: Path, home: Path, base: Path, sid: str, unit: str) -> dict:
    from cr2_flows.pools import _record, run_pool, summarise
    from cr2_warehouse.db import copy_warehouse

    t0 = time.perf_counter()
    copy_warehouse(source, home, with_caches=True)
    evaluated = run_pool(config, home)
    summary = summarise(config, home, evaluated["run_id"])
    seconds = time.perf_counter() - t0
    _record(base, sid, unit, config, home, summary, seconds)
    return {"run_id": evaluated["run_id"], "home": str(home), "seconds": round(seconds, 1),
            "cached": bool(summary["cached"])}


@flow(name="cr2-study-routers", log_prints=True, validate_parameters=False)
def study_routers_flow(study_path: str = DEFAULT_STUDY, pools_home: str = POOLS_HOME,
                       scenario_homes: dict[str, str] | None = None, only: list[str] | None = None) -> dict:
    """Run (or resume) the study's units: every pool of its rule from the pool sweep in `pools_home`, then every
    scenario from its home (SCENARIOS, or `scenario_homes` name → home). only: the units to run (pool ids or
    scenario names; default all)."""
    from cr2.core.errors import DataValidationError, InvalidValueError
    from cr2.studies.pools import load_pool_rule, pool_overrides, select_pools
    from cr2.studies.routers import POOLS, SCENARIOS as SCENARIO_KIND
    from cr2_flows.pools import STUDY_DIR as POOL_DIR, pool_config
    from cr2_warehouse.db import DB_NAME

    study = load_study(study_path)
    homes = {n: s.home for n, s in SCENARIOS.items()} | dict(scenario_homes or {})
    unknown = sorted(set(study.scenarios) - set(SCENARIOS))
    if unknown:
        raise InvalidValueError(f"{study_path}: unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    rule = load_pool_rule(shipped_study_path(study.pool_rule))
    pools = list(select_pools(rule))
    names = [p.pool_id for p in pools] + list(study.scenarios)
    if only:
        bad = sorted(set(only) - set(names))
        if bad:
            raise InvalidValueError(f"unknown unit(s) {bad}; this study has: {', '.join(names)}")
    wanted = set(only or names)
    base = Path(pools_home)
    pools_config = load_config(study.pool_config)
    out: dict[str, Any] = {"study": str(study_path), "digest": study.digest, "units": {}}
    t_all = time.perf_counter()
    sid = study_id(study, POOLS)
    for pool in [p for p in pools if p.pool_id in wanted]:
        source = base / POOL_DIR / pool.pool_id
        if not (source / DB_NAME).is_file():
            raise DataValidationError(f"pool {pool.pool_id} has no warehouse at {source}: run the pool sweep first "
                                      f"(`cr2 study pools -c {study.pool_config} --home {base}`)")
        cfg = unit_config(pool_config(pools_config, pool_overrides(pool, rule)), study)
        res = _run_unit(cfg, source, base / STUDY_DIR / pool.pool_id, base, sid, pool.pool_id)
        out["units"][pool.pool_id] = {"kind": POOLS, "study_id": sid, **res}
        print(f"pool {pool.pool_id}: run {res['run_id']} in {res['seconds']:.1f} s")
    sid = study_id(study, SCENARIO_KIND)
    for name in [s for s in study.scenarios if s in wanted]:
        home = Path(homes[name])
        if not (home / DB_NAME).is_file():
            raise DataValidationError(f"scenario {name} has no warehouse at {home}: run it first (`cr2 run"
                                      f"{' -c ' + SCENARIOS[name].config if SCENARIOS[name].config else ''} "
                                      f"--home {home}`)")
        cfg = unit_config(load_config(SCENARIOS[name].config), study)
        res = _run_unit(cfg, home, home / STUDY_DIR / name, home, sid, name)
        out["units"][name] = {"kind": SCENARIO_KIND, "study_id": sid, **res}
        print(f"scenario {name}: run {res['run_id']} in {res['seconds']:.1f} s")
    out["wall_s"] = round(time.perf_counter() - t_all, 1)
    return out
