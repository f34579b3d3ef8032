"""Reads of the sim-to-real runs (tables simcheck, simcheck_runs; view v_simcheck) for docs/results.md."""
from __future__ import annotations

import pandas as pd

from cr2_warehouse.db import Warehouse
from cr2_warehouse.routing_data import named_query


def simcheck_runs(wh: Warehouse) -> pd.DataFrame:
    """Every sim-to-real run, newest first: run_id, n_questions, pool, created_at, has_routing, has_fresh_fit."""
    return wh.df(named_query("simcheck_runs"))


def simcheck_rows(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """Every statistic of sim-to-real run `run_id`: measured beside each simulated source's mean over seeds."""
    return wh.df(named_query("simcheck_all_statistics"), {"run_id": run_id})


def simcheck_page_frames(wh: Warehouse, run_id: str) -> tuple[dict[str, pd.DataFrame], pd.Series]:
    """What the simcheck page of one run shows: its structure, savings, CR², points and fit frames, and its run row."""
    frames = {name: wh.con.sql(named_query(f"simcheck_{name}"), params={"run_id": run_id}).df()
              for name in ("structure", "savings", "cr2", "points", "fit")}
    return frames, wh.df(named_query("simcheck_run"), [run_id]).iloc[0]
