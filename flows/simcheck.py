"""Simcheck: does the label simulator behave like measured labels? (docs/labels.md, "The sim-to-real check")

1. read the measured MMLU-Pro outputs of the pool in `simcheck.pool_config` (data/measured/),
2. embed a stable subsample of the questions (all of them with `full`), cached under <home>/cache/simcheck,
3. fit the v2 shape afresh (recorded beside the configured one),
4. simulate every source in `simcheck.sources` on the same questions, matched to the measured accuracy of
   every (model, category), over several simulator seeds,
5. compare label structure and routing outcomes (every learned router and CR², fitted per label set),
6. write tidy rows to `simcheck` (view v_simcheck) and the report page simcheck.html.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from cr2_tasks.common import run_stage
from cr2_tasks.simcheck import SIMCHECK


def simcheck(config: Config, home: Path, full: bool = False, routing: bool = True) -> dict:
    from cr2_tasks.simcheck import build_simcheck_page

    result = run_stage(SIMCHECK, config, home, full, routing)
    result["report"] = build_simcheck_page(str(home), result["run_id"])
    return result


@flow(name="cr2-simcheck", log_prints=True)
def simcheck_flow(config_path: str | None = None, home: str | None = None, full: bool = False,
                  routing: bool = True) -> dict:
    from cr2.config import load_config
    from cr2_warehouse.db import default_home

    return simcheck(load_config(config_path), Path(home) if home else default_home(), full, routing)
