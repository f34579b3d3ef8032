"""`cr2 study level`: the measured level of the equal-risk bootstrap test (cr2.studies.level, docs/guarantees.md).

1. pick the warehouse's newest full evaluation run (its equal-risk sides are stored),
2. run the A/A simulation of the page's families at the default α on its decisions (tasks/level.py, cached),
3. the rows are in table `level_study`; `cr2 study level` and docs/results.md print them.
"""
from __future__ import annotations

from pathlib import Path

from prefect import flow

from cr2.config import Config
from cr2.studies.level import AA_RESAMPLES
from cr2_tasks.common import run_stage
from cr2_tasks.level import LEVEL


def study_level(config: Config, home: Path, n_replicates: int, n_resamples: int, seed: int) -> dict:
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import newest_eval_run

    with Warehouse(home, read_only=True) as wh:
        run_id = newest_eval_run(wh, config.labels.source)
    return run_stage(LEVEL, config, home, run_id, int(n_replicates), int(n_resamples), int(seed))


@flow(name="cr2-study-level", log_prints=True)
def study_level_flow(config_path: str | None = None, home: str | None = None, n_replicates: int = 200,
                     n_resamples: int = AA_RESAMPLES, seed: int = 0) -> dict:
    from cr2.config import load_config
    from cr2_warehouse.db import default_home

    return study_level(load_config(config_path), Path(home) if home else default_home(), n_replicates, n_resamples,
                       seed)
