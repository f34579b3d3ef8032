"""Reads and writes of the A/A level study (table level_study; cr2.studies.level, tasks/level.py)."""
from __future__ import annotations

import pandas as pd

from cr2_warehouse.db import Warehouse

LEVEL_COLUMNS = ("study_id", "run_id", "question", "rule", "alpha", "n_tests", "n_replicates", "n_resamples",
                 "n_rejections", "n_test_rejections", "rate", "rate_se", "rate_upper", "p_above", "p_above_holm", "verdict",
                 "page_resamples",
                 "p_threshold", "p_se", "p_relative_se", "p_tail_resamples", "seed", "wall_s", "created_at")


def write_level_study(wh: Warehouse, study_id: str, rows: pd.DataFrame) -> None:
    """Replace the rows of level study `study_id` (one transaction)."""
    with wh.transaction() as con:
        wh.delete_where("level_study", {"study_id": study_id}, con)
        wh.insert_df("level_study", rows.assign(study_id=study_id)[list(LEVEL_COLUMNS)], con)


def newest_level_study(wh: Warehouse) -> pd.DataFrame:
    """The rows of the newest level study (empty where none is stored, or the table is not there yet)."""
    from cr2_warehouse.reads import has_table

    if not has_table(wh, "level_study"):
        return pd.DataFrame(columns=list(LEVEL_COLUMNS))
    return wh.df("SELECT * FROM level_study WHERE study_id = (SELECT study_id FROM level_study "
                 "ORDER BY created_at DESC, study_id LIMIT 1) "
                 "ORDER BY CASE question WHEN 'gate-quality' THEN 0 WHEN 'calibrated-vs-default' THEN 1 ELSE 2 END, "
                 "rule NULLS FIRST, alpha")
