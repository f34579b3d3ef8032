"""Named reads and writes of the routing inputs: the queries and model pool (ingest), their embeddings, splits,
channel states and costs (prepare).

The SQL lives in warehouse/queries/*.sql (ingest_*, prepare_*, measured_*); the ingest and prepare tasks call these
functions and never write SQL themselves. Each write is one transaction: a failure leaves the warehouse as it was.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from cr2.core.errors import DataValidationError, WarehouseError
from cr2_warehouse.db import Warehouse
from cr2_warehouse.repository import cost_scales_key
from cr2_warehouse.routing_data import named_query
from cr2_warehouse.validation import ahead_started, start_ahead


# ---------------------------------------------------------------- queries and the model pool
def replace_queries(wh: Warehouse, queries: pd.DataFrame, models: pd.DataFrame, expected: dict[str, int]) -> None:
    """Replace every query and the model pool; the queries written per benchmark must equal `expected` (the
    source's counts), or nothing is written."""
    with wh.transaction() as con:
        wh.delete_where("queries", None, con)
        wh.delete_where("models", None, con)
        wh.insert_df("queries", queries, con)
        wh.insert_df("models", models, con)
        written = dict(con.execute(named_query("ingest_written_per_benchmark")).fetchall())
        if written != expected:  # rolls back: per-benchmark counts must equal the source's
            raise DataValidationError(f"queries written per benchmark {written} differ from the source counts {expected}")


def query_ids(wh: Warehouse) -> np.ndarray:
    """Every query id, in order."""
    return wh.df(named_query("prepare_query_ids"))["query_id"].to_numpy()


def benchmark_query_ids(wh: Warehouse, benchmark: str) -> set[str]:
    """The ingested query ids of one benchmark."""
    return set(wh.df(named_query("measured_ingested_ids"), [benchmark])["query_id"])


def query_count(wh: Warehouse) -> int:
    """How many queries are ingested."""
    return wh.count("queries")


# ---------------------------------------------------------------- embeddings
def queries_to_embed(wh: Warehouse, encoder: str) -> pd.DataFrame:
    """Queries without an embedding under `encoder`, or whose text changed since (query_id, question, choices,
    content_hash)."""
    return wh.df(named_query("prepare_embed_todo"), [encoder])


def write_embeddings(wh: Warehouse, encoder: str, rows: pd.DataFrame) -> None:
    """Replace the `encoder` embeddings of the queries in `rows`."""
    with wh.transaction() as con:
        con.register("_new_ids", rows[["query_id"]])
        con.execute(named_query("prepare_embed_delete_new"), [encoder])
        con.unregister("_new_ids")
        wh.insert_df("embeddings", rows, con)


def embedded_count(wh: Warehouse, encoder: str) -> int:
    """How many ingested queries have an embedding under `encoder`."""
    return int(wh.scalar(named_query("prepare_embed_total"), [encoder]))


def query_embeddings(wh: Warehouse, encoder: str) -> pd.DataFrame:
    """Every query's embedding under `encoder` (query_id, vector), in query order."""
    return wh.df(named_query("prepare_query_embeddings"), [encoder])


# ---------------------------------------------------------------- splits and states
def split_inputs(wh: Warehouse) -> pd.DataFrame:
    """What the split assignment reads of every query (query_id, benchmark, subset), in query order."""
    return wh.df(named_query("prepare_split_inputs"))


def write_splits(wh: Warehouse, seed: int, rows: pd.DataFrame) -> None:
    """Replace the splits of `seed`."""
    wh.replace_where("splits", rows, {"seed": seed})


def write_states(wh: Warehouse, dist_id: str, distribution: pd.DataFrame, rows: pd.DataFrame) -> None:
    """Replace the state distribution `dist_id` (its `state_distributions` row) and its sampled states."""
    with wh.transaction() as con:
        wh.delete_where("states", {"dist_id": dist_id}, con)
        wh.delete_where("state_distributions", {"dist_id": dist_id}, con)
        wh.insert_df("state_distributions", distribution, con)
        wh.insert_df("states", rows, con)


def states_stored(wh: Warehouse, dist_id: str) -> bool:
    """Whether states of distribution `dist_id` are stored."""
    return bool(wh.scalar(named_query("prepare_states_stored"), [dist_id]))


def states_pending(home: str | Path, dist_id: str) -> bool:
    """Whether a prepare under distribution `dist_id` will sample and validate states: none are stored. False when
    the warehouse cannot be read (the flow's own first read reports why)."""
    try:
        with Warehouse(home, read_only=True) as wh:
            return not states_stored(wh, dist_id)
    except WarehouseError:
        return False


def validation_ahead(home: str | Path, dist_id: str) -> bool:
    """Start the validation helper (cr2_warehouse.validation.start_ahead) when states of `dist_id` are pending: GX's
    import runs beside what comes before their validation. Returns whether a helper was started (False when one
    runs already: `cr2 recalibrate` starts it before the flow)."""
    return not ahead_started() and states_pending(home, dist_id) and start_ahead()


# ---------------------------------------------------------------- costs
def cost_inputs(wh: Warehouse, dist_id: str, split_seed: int) -> pd.DataFrame:
    """The states of distribution `dist_id` with each query's benchmark, prompt tokens and split under
    `split_seed`, by query and draw."""
    return wh.df(named_query("prepare_cost_states"), [split_seed, dist_id])


def write_costs(wh: Warehouse, dist_id: str, label_source: str, split_seed: int, rows: pd.DataFrame,
                scales: str) -> None:
    """Replace the costs of (dist_id, label_source, split_seed) and store their normalisation scales (JSON) under
    cost_scales_key, so online routing normalises a new query exactly as the stored costs were."""
    with wh.transaction() as con:
        wh.delete_where("costs", {"dist_id": dist_id, "label_source": label_source, "split_seed": split_seed}, con)
        wh.insert_df("costs", rows, con)
        con.execute(named_query("prepare_store_cost_scales"), [cost_scales_key(dist_id, label_source, split_seed),
                                                               scales])
