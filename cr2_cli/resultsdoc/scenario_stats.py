"""What the sections intervals, default_scenario and measured read alike (not a section): the newest evaluation run
and newest seed study of one scenario warehouse, as a cr2.report.resultsdoc.scenario.Scenario."""
from __future__ import annotations

import pandas as pd

from cr2.report.resultsdoc.scenario import Scenario
from cr2.report.resultsdoc.words import label_kind
from cr2_cli.resultsdoc.core import Doc


def load(doc: Doc, key: str) -> Scenario | None:
    """The scenario in warehouse `key`, or None when the warehouse or its evaluation run is not there."""
    from cr2_warehouse.reads import has_table, query_counts
    from cr2_warehouse.repository import (eval_run, newest_eval_run, newest_seed_study, run_alpha, run_intervals,
                                          seed_spread, seed_study_runs, view_for_run)

    if not doc.has(key):
        return None
    with doc.warehouse(key) as wh:
        run_id = newest_eval_run(wh, full_only=True)
        if run_id is None:
            return None
        run = eval_run(wh, run_id)
        ops = view_for_run(wh, "v_operating_points_ci", run_id)
        study = newest_seed_study(wh) if has_table(wh, "seed_runs") else None
        return Scenario(key=key, run_id=run_id, source=run["label_source"], kind=label_kind(run["label_source"]),
                        run=run, mean_saving=view_for_run(wh, "v_mean_saving_ci", run_id),
                        fixed=view_for_run(wh, "v_fixed_accuracy_ci", run_id),
                        points=ops[ops["benchmark"] == "all"].reset_index(drop=True), study=study,
                        seed_runs=seed_study_runs(wh, study) if study else pd.DataFrame(),
                        spread=seed_spread(wh, study) if study else pd.DataFrame(), queries=query_counts(wh),
                        risk_tests=run_intervals(wh, run_id, "risk_all_minus_alpha"), alpha=run_alpha(run))
