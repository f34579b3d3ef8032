"""Named reads and writes of correctness labels and their runs: the simulated sources (prepare), the labeling runs
(`cr2 label`), coverage checks and label-source facts for summaries and reports.

The SQL lives in warehouse/queries/*.sql (label_*, prepare_*); tasks call these functions and never write SQL
themselves. Each write is one transaction: a failure leaves the warehouse as it was.
"""
from __future__ import annotations

import datetime as dt
import json
from typing import Sequence

import pandas as pd

from cr2_warehouse.db import Warehouse
from cr2_warehouse.routing_data import named_query

LABEL_COLUMNS = ["source", "query_id", "model_id", "correct", "output_tokens", "run_id"]


def label_origin(wh: Warehouse, source: str) -> dict:
    """The recorded origin of a label source: the `backend_args` of its newest `label_runs` row (imports and
    measured sources record file, repository, commit, extraction rule there), parsed; {} when none."""
    raw = wh.scalar("SELECT backend_args FROM label_runs WHERE source = ? AND backend = 'import' "
                    "ORDER BY finished_at DESC NULLS LAST, run_id LIMIT 1", [source])
    try:
        return dict(json.loads(raw)) if raw else {}
    except (TypeError, ValueError):
        return {}


# ---------------------------------------------------------------- a whole source at once (the simulators)
def simulator_inputs(wh: Warehouse) -> pd.DataFrame:
    """What the label simulator reads of every query (query_id, benchmark, subset, question, choices), in order."""
    return wh.df(named_query("prepare_label_inputs"))


def replace_label_source(wh: Warehouse, source: str, runs: pd.DataFrame, labels: pd.DataFrame) -> None:
    """Replace every label and label run of `source` with `labels` and `runs`."""
    with wh.transaction() as con:
        wh.delete_where("labels", {"source": source}, con)
        con.execute(named_query("prepare_delete_label_runs"), [source])
        wh.insert_df("label_runs", runs, con)
        wh.insert_df("labels", labels, con)


def label_coverage(wh: Warehouse, source: str, model_ids: Sequence[str]) -> int:
    """How many (ingested query, model of `model_ids`) pairs `source` labels."""
    return int(wh.scalar(named_query("prepare_label_coverage"), [source, list(model_ids)]))


def label_source_counts(wh: Warehouse) -> pd.DataFrame:
    """Every label source in the warehouse with its row count (source, n)."""
    return wh.df(named_query("prepare_label_sources"))


def output_tokens(wh: Warehouse, source: str) -> pd.DataFrame:
    """The output tokens of every (query, model) labelled by `source` (query_id, model_id, output_tokens)."""
    return wh.df(named_query("prepare_cost_output_tokens"), [source])


# ---------------------------------------------------------------- labeling runs (`cr2 label`)
def label_task_queries(wh: Warehouse, benchmarks: Sequence[str]) -> pd.DataFrame:
    """The queries of `benchmarks` with what a labeling task needs, in query order."""
    return wh.df(named_query("label_select_queries"), [list(benchmarks)])


def done_query_ids(wh: Warehouse, run_id: str) -> set[str]:
    """The queries labeling run `run_id` has labelled."""
    return set(wh.df(named_query("label_done_ids"), [run_id])["query_id"])


def write_label_chunk(wh: Warehouse, labels: pd.DataFrame) -> None:
    """One transaction: replace the labels of the chunk's queries for its (source, model) and add what is new to
    its run's done count (a chunk written twice adds nothing). `labels`: LABEL_COLUMNS of one source, model, run."""
    (source,), (model_id,), (rid,) = labels["source"].unique(), labels["model_id"].unique(), labels["run_id"].unique()
    with wh.transaction() as con:
        con.register("_cr2_chunk", labels[["query_id"]])
        try:
            already = con.execute(named_query("label_already_in_chunk"), [rid]).fetchall()[0][0]
            con.execute(named_query("label_delete_replaced"), [source, model_id])
        finally:
            con.unregister("_cr2_chunk")
        wh.insert_df("labels", labels[LABEL_COLUMNS], con)
        con.execute(named_query("label_run_progress"), [len(labels) - int(already), rid])


def start_label_run(wh: Warehouse, run_id: str, *, source: str, model_id: str, revision: str, backend: str,
                    backend_args: str, lm_eval_version: str, task_config_hash: str, started_at: dt.datetime,
                    done: int, total: int) -> None:
    """Mark labeling run `run_id` running with the current selection's `done` and `total`: a new row, or the
    recorded run resumed (its arguments, total and done updated)."""
    with wh.transaction() as con:
        if con.execute(named_query("label_run_exists"), [run_id]).fetchall()[0][0]:
            con.execute(named_query("label_run_restart"), [backend_args, total, done, run_id])
        else:
            con.execute(named_query("label_run_insert"), [run_id, source, model_id, revision, backend, backend_args,
                                                          lm_eval_version, task_config_hash, started_at, done, total])


def finish_label_run(wh: Warehouse, run_id: str, selected: pd.DataFrame, finished_at: dt.datetime, ok: bool) -> None:
    """Close labeling run `run_id`: done = its labelled queries among `selected` (query_id); finished when all are
    and the task succeeded (`ok`), else failed."""
    with wh.transaction() as con:
        con.register("_cr2_selected", selected[["query_id"]])
        try:
            con.execute(named_query("label_run_finish"), {"rid": run_id, "now": finished_at, "ok": ok})
        finally:
            con.unregister("_cr2_selected")


def label_runs(wh: Warehouse, run_ids: Sequence[str]) -> pd.DataFrame:
    """The `label_runs` rows of `run_ids` (run_id, source, model_id, backend, status, done, total, …), by run id."""
    return wh.df(named_query("label_runs_summary"), [list(run_ids)])
