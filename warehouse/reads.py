"""Named reads the `cr2` command line prints: one function per question, the SQL in warehouse/queries/*.sql.

cr2_cli/ holds no SQL text: its commands and its rendering call these functions.
"""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from cr2_warehouse.db import Warehouse
from cr2_warehouse.routing_data import named_query


def model_summary(wh: Warehouse, label_source: str, dist_id: str, split_seed: int) -> pd.DataFrame:
    """Per benchmark and model: queries, accuracy and mean normalised cost (view model_summary)."""
    return wh.df(named_query("model_accuracy_cost_per_benchmark"),
                 {"label_source": label_source, "dist_id": dist_id, "split_seed": int(split_seed)})


def cr2_operating_points(wh: Warehouse, run_id: str, alpha: float) -> pd.DataFrame:
    """CR² on test at α, pooled over benchmarks, one row per λ of run `run_id` (table operating_points)."""
    return wh.df(named_query("cr2_operating_points_at_alpha"), {"run_id": run_id, "alpha": float(alpha)})


def baseline_points(wh: Warehouse, run_id: str, lams: Sequence[float]) -> pd.DataFrame:
    """Every uncalibrated method's test accuracy and cost at `lams`, pooled over benchmarks."""
    return wh.df(named_query("baseline_points_at_lams"), {"run_id": run_id, "lams": [float(v) for v in lams]})


def recalibration(wh: Warehouse, before_run: str, after_run: str, alpha: float) -> pd.DataFrame:
    """CR² before (old thresholds) and after (re-calibrated) on the new states at α, one row per λ."""
    return wh.df(named_query("recalibration_before_after"),
                 {"before": before_run, "after": after_run, "alpha": float(alpha)})


def simcheck_points(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """Measured vs simulated statistics with a tolerance, of sim-to-real run `run_id` (view v_simcheck)."""
    return wh.df(named_query("simcheck_statistics_with_tolerance"), {"run_id": run_id})


def simcheck_signs(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """Per simulated source: (router, target) points compared and those whose saving vs KNN has the measured sign."""
    return wh.df(named_query("simcheck_same_sign_counts"), {"run_id": run_id})


def label_sources(wh: Warehouse) -> pd.DataFrame:
    """Every label source: rows, models, queries, accuracy and backends."""
    return wh.df(named_query("label_source_summary"))


def has_table(wh: Warehouse, name: str) -> bool:
    """Whether the warehouse has table `name` (a warehouse of an older schema may not)."""
    return bool(wh.scalar(named_query("table_exists"), {"name": name}))


def has_column(wh: Warehouse, table: str, column: str) -> bool:
    """Whether `table` has `column` (a warehouse of an older schema, read as it is, may lack it)."""
    return bool(wh.scalar(named_query("column_exists"), {"table": table, "column": column}))


def has_seed_study(wh: Warehouse) -> bool:
    """Whether the warehouse holds any seed-study run (`cr2 study seeds`)."""
    return has_table(wh, "seed_runs") and int(wh.scalar(named_query("seed_run_count"))) > 0


def reached_targets(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """Per method of run `run_id`: the lowest and highest fixed-accuracy target it reaches together with the
    reference router (KNN), and how many (v_fixed_accuracy)."""
    return wh.df(named_query("reached_target_range"), {"run_id": run_id})


def side_reach(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """Per method and α of run `run_id`: the highest test accuracy over its λ sweep (operating_points, 'all')."""
    return wh.df(named_query("highest_accuracy_per_side"), {"run_id": run_id})


def certified_test_risk(wh: Warehouse, run_id: str, metrics: Sequence[str]) -> pd.DataFrame:
    """Per certified method `<router>@<rule>`, λ and α of run `run_id` and each risk metric of `metrics`: its deployed
    table's test risk (value) and 95 % bootstrap interval (lower, upper; NaN where the run stores none)."""
    return wh.df(named_query("certified_deployed_risk"), {"run_id": run_id, "metrics": [str(m) for m in metrics]})


def pool_models(wh: Warehouse) -> list[str]:
    """The model ids of the pool in the warehouse (written by `cr2 ingest`), in pool order."""
    return [str(m) for m in wh.df(named_query("pool_models"))["model_id"]]


def query_counts(wh: Warehouse) -> dict[str, int]:
    """Queries per benchmark in the warehouse (written by `cr2 ingest`)."""
    return {str(r.benchmark): int(r.queries) for r in wh.df(named_query("queries_per_benchmark")).itertuples()}


def simcheck_structure(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """Measured vs simulated structure and diagnostics statistics of sim-to-real run `run_id` (view v_simcheck)."""
    return wh.df(named_query("simcheck_structure_rows"), {"run_id": run_id})


def simcheck_savings(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """Measured vs simulated saving vs KNN per router and target of sim-to-real run `run_id` (view v_simcheck)."""
    return wh.df(named_query("simcheck_saving_rows"), {"run_id": run_id})
