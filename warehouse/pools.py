"""Warehouse I/O of the pool sweep and the label diagnostics: pool_runs, pool_results, v_pool_*."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from cr2_warehouse.db import Warehouse, undefined_as_null
from cr2_warehouse.repository import utc_now

RUN_COLUMNS = ("study_id", "pool", "label_source", "models", "reference", "run_id", "home", "n_test", "n_evaluable",
               "n_queries", "cost_ratio_realised", "cost_ratio_est", "n_resamples", "seconds", "created_at")
RESULT_COLUMNS = ("study_id", "pool", "subject", "other", "metric", "target", "estimate", "lower", "upper", "n",
                  "n_resamples", "p_value", "family", "family_size", "p_holm", "verdict")
# n_resamples (schema 7), p_value (schema 8), the test's family, Holm p and word (schema 9): NULL where no interval


def write_pool(wh: Warehouse, study_id: str, pool: str, run: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
    """Replace one pool of a study: its pool_runs row and its pool_results rows (one transaction)."""
    row = {**run, "study_id": study_id, "pool": pool, "models": json.dumps(run["models"]), "created_at": utc_now()}
    res = pd.DataFrame([{c: r.get(c) for c in RESULT_COLUMNS[2:]} for r in rows], columns=list(RESULT_COLUMNS[2:]))
    res = undefined_as_null(res, ("target", "estimate", "lower", "upper", "p_value", "p_holm"))
    for c in ("n", "n_resamples", "family_size"):
        res[c] = pd.to_numeric(res[c], errors="coerce").astype("Int64")  # a count or NULL
    res.insert(0, "pool", pool)
    res.insert(0, "study_id", study_id)
    wh.replace_study_unit("pool_runs", {c: row.get(c) for c in RUN_COLUMNS}, "pool_results", res,
                          {"study_id": study_id, "pool": pool})


def newest_pool_study(wh: Warehouse) -> str | None:
    """The id of the newest pool sweep (`cr2 study pools`) in the warehouse, or None."""
    return wh.scalar("SELECT study_id FROM pool_runs WHERE starts_with(study_id, 'pools') ORDER BY created_at DESC LIMIT 1")


_EQUAL_RISK = ("SELECT pool, substr(metric, length('equal-risk:') + 1) AS question, subject, other, estimate, lower, "
               "upper, n, {n_resamples} AS n_resamples, {p_holm} AS p_holm, {verdict} AS verdict FROM pool_results "
               "WHERE study_id = ? AND starts_with(metric, 'equal-risk:') ORDER BY question, subject, other, pool")


def has_resample_counts(wh: Warehouse) -> bool:
    """Whether pool_results keeps each interval's resamples (column n_resamples, schema ≥ 7); an older warehouse
    read as it is has no such column."""
    from cr2_warehouse.reads import has_column

    return has_column(wh, "pool_results", "n_resamples")


def pool_equal_risk(wh: Warehouse, study_id: str) -> pd.DataFrame:
    """The equal-risk mean savings of every pool of one study (pool_results rows `equal-risk:<question>`): pool,
    question, subject (side a), other (side b), estimate, lower, upper, n (targets both reach), n_resamples (the
    resamples the interval kept: those where every one of its targets is reached; NULL where not stored), p_holm and
    verdict (the pool run's own test word, Holm within the pool; NULL where stored before schema 9)."""
    from cr2_warehouse.reads import has_column

    cols = {c: (c if has_column(wh, "pool_results", c) else f"CAST(NULL AS {kind})")  # an older warehouse, as it is
            for c, kind in (("n_resamples", "INTEGER"), ("p_holm", "DOUBLE"), ("verdict", "VARCHAR"))}
    return wh.df(_EQUAL_RISK.format(**cols), [study_id])


def pool_savings(wh: Warehouse, study_id: str) -> pd.DataFrame:
    """v_pool_savings of one study: per pool and method, the mean saving vs KNN / best single with its interval."""
    return wh.df("SELECT * FROM v_pool_savings WHERE study_id = ? ORDER BY pool, method, reference", [study_id])


def pool_diagnostics(wh: Warehouse, study_id: str) -> pd.DataFrame:
    """v_pool_diagnostics of one study: one row per pool with its headroom and label diagnostics."""
    return wh.df("SELECT * FROM v_pool_diagnostics WHERE study_id = ? ORDER BY pool", [study_id])


def newest_run(wh: Warehouse, label_source: str) -> str | None:
    """The newest full evaluation run under `label_source` — one that evaluated KNN, the reference every comparison
    needs (a re-calibration's CR²-only before/after runs are skipped) — or None when there is none."""
    from cr2_warehouse.repository import newest_eval_run

    return newest_eval_run(wh, label_source, full_only=True)


def query_choices(wh: Warehouse, query_id: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """([n] number of answer options of each query (0: free-form answer), [n] question texts), in `query_id` order."""
    df = wh.df("SELECT query_id, coalesce(len(choices), 0) AS n_choices, question FROM queries").set_index("query_id")
    df = df.reindex(np.asarray(query_id).astype(str))
    return df["n_choices"].fillna(0).to_numpy(np.int64), df["question"].fillna("").astype(str).tolist()


def copy_embeddings(wh: Warehouse, source_home: str | Path, encoder: str) -> int:
    """Copy e(x) from the warehouse at `source_home` for this warehouse's queries whose text is unchanged (same query
    id, encoder and content hash) and that have none yet; returns how many rows were copied. The source is opened
    read-only (never changed); its rows travel as a frame, so no path is spliced into SQL."""
    with Warehouse(source_home, read_only=True) as src:
        rows = src.df("SELECT query_id, encoder, content_hash, vector FROM embeddings WHERE encoder = ?", [encoder])
    with wh.transaction() as con:
        con.register("_cr2_src_embeddings", rows)
        try:
            before = int(con.execute("SELECT count(*) FROM embeddings WHERE encoder = ?", [encoder]).fetchall()[0][0])
            con.execute("""INSERT INTO embeddings
                           SELECT s.query_id, s.encoder, s.content_hash, s.vector FROM _cr2_src_embeddings s
                           JOIN queries q ON q.query_id = s.query_id AND q.content_hash = s.content_hash
                           WHERE NOT EXISTS (SELECT 1 FROM embeddings e
                                 WHERE e.encoder = s.encoder AND e.query_id = s.query_id)""").fetchall()
            after = int(con.execute("SELECT count(*) FROM embeddings WHERE encoder = ?", [encoder]).fetchall()[0][0])
        finally:
            con.unregister("_cr2_src_embeddings")
    return after - before


# ---------------------------------------------------------------- reads of the generated docs/results.md
def newest_study(wh: Warehouse, prefix: str) -> str | None:
    """The newest study id of pool_runs starting with `prefix` ('pools', 'diagnostics'), or None."""
    from cr2_warehouse.routing_data import named_query

    return wh.scalar(named_query("newest_pool_study"), {"prefix": prefix})


def pool_study_runs(wh: Warehouse, study_id: str) -> pd.DataFrame:
    """The stored pools of one study: label source, models (JSON), m_ref, run id, home, test rows, resamples."""
    from cr2_warehouse.routing_data import named_query

    return wh.df(named_query("pool_study_runs"), {"study_id": study_id})


def router_study_rows(wh: Warehouse, study_id: str, other: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The stored rows of a router study (flows/router_study.py) in this warehouse: (savings of every certified router
    against `other` at equal risk: unit, subject, other, estimate, lower, upper, p_value, n_resamples; headroom: unit,
    estimate — the full-information router's mean saving vs KNN)."""
    from cr2_warehouse.routing_data import named_query

    params = {"study_id": study_id}
    return (wh.df(named_query("router_study_savings"), params | {"other": other}),
            wh.df(named_query("router_study_headroom"), params))
