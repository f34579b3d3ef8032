"""The routing view of the warehouse as cr2 RoutingSets, one per split (all database reads live here)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from cr2.core.data import EMBED_DIM, RoutingSet
from cr2.core.errors import DataValidationError
from cr2_warehouse.db import Warehouse, note_read

QUERIES_DIR = Path(__file__).resolve().parent / "queries"
SPLITS = ("train", "dev", "val", "test")


def named_query(name: str) -> str:
    """The SQL text of warehouse/queries/<name>.sql."""
    return (QUERIES_DIR / f"{name}.sql").read_text()


def routing_fingerprint(wh: Warehouse, dist_id: str, label_source: str, seed: int, encoder: str,
                        splits: tuple[str, ...] = SPLITS) -> str:
    """Content hash of the rows load_routing_sets reads for `splits` (for cache keys)."""
    bad = set(splits) - set(SPLITS)
    if bad:
        raise ValueError(f"unknown splits {sorted(bad)}; known: {SPLITS}")
    sql = (f"SELECT coalesce(sum(hash(t)), 0)::VARCHAR || ':' || count(*)::VARCHAR FROM ({named_query('routing_rows')}) t "
           "WHERE list_contains($splits, t.split)")
    note_read(sql)
    return str(wh.con.sql(sql, params={
        "dist_id": dist_id, "label_source": label_source, "seed": seed, "encoder": encoder,
        "splits": list(splits)}).fetchall()[0][0])


def load_routing_sets(wh: Warehouse, model_ids: tuple[str, ...], dist_id: str, label_source: str, seed: int,
                      encoder: str, decision_cost: str = "estimated") -> dict[str, RoutingSet]:
    """{split: RoutingSet} of every (query, draw) that has a split, an embedding, labels and costs.

    decision_cost "estimated": routers decide with ĉ (pre-execution L̂_out), accounting uses c; "realised":
    routers see the realised c too (the pre-change protocol, a named variant).
    """
    note_read(named_query("routing_rows"))
    t = wh.con.sql(named_query("routing_rows"), params={"dist_id": dist_id, "label_source": label_source, "seed": seed,
                                                       "encoder": encoder}).to_arrow_table()
    if t.num_rows == 0:
        raise DataValidationError(
            f"no routing data for states '{dist_id}', labels '{label_source}', split seed {seed}, encoder '{encoder}'; "
            "run `cr2 prepare` first")
    pools = {tuple(p) for p in t.column("model_ids").to_pylist()[:1000]}
    if pools != {tuple(model_ids)}:
        raise DataValidationError(f"the warehouse's pool {sorted(pools)} differs from the configured pool {model_ids}: "
                                  "pass the config this warehouse was built with (`-c FILE`; without -c a command "
                                  "reads the default config). Only to rebuild the warehouse for this config, run "
                                  "`cr2 run -c FILE` (it replaces the warehouse's results)")
    k = len(model_ids)
    emb = t.column("vector").combine_chunks().values.to_numpy(zero_copy_only=False).reshape(-1, EMBED_DIM)
    correct = np.asarray(t.column("correct").combine_chunks().values.to_numpy(zero_copy_only=False), dtype=bool).reshape(-1, k)
    cost = t.column("cost").combine_chunks().values.to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, k)
    cost_est = t.column("cost_est").combine_chunks().values.to_numpy(zero_copy_only=False).astype(np.float32).reshape(-1, k)
    split = np.asarray(t.column("split").to_pylist())
    full = RoutingSet(
        query_id=np.asarray(t.column("query_id").to_pylist()), benchmark=np.asarray(t.column("benchmark").to_pylist()),
        embedding=np.ascontiguousarray(emb, dtype=np.float32), correct=correct, cost=cost, model_ids=tuple(model_ids),
        distance_m=t.column("distance_m").to_numpy(), cost_est=cost_est if decision_cost == "estimated" else None,
    )
    return {s: full.subset(split == s) for s in SPLITS}


def query_groups(wh: Warehouse, query_ids: np.ndarray, attribute: str) -> np.ndarray:
    """The Mondrian group value (calibration.group: benchmark | subset) of each query id, [n] str."""
    df = wh.df(named_query("query_groups")).set_index("query_id")
    if attribute not in df.columns:
        raise DataValidationError(f"unknown group attribute '{attribute}'; available: {', '.join(df.columns)}")
    missing = set(np.asarray(query_ids).tolist()) - set(df.index)
    if missing:
        raise DataValidationError(f"{len(missing)} calibration queries are not in `queries` (e.g. {sorted(missing)[0]})")
    return df.loc[np.asarray(query_ids), attribute].to_numpy().astype(str)


def table_groups(wh: Warehouse, table: object, query_ids: np.ndarray) -> np.ndarray | None:
    """Each query's Mondrian group under a threshold table grouped by an attribute a RoutingSet does not carry (e.g.
    subset); None for a pooled table or one per benchmark, whose groups the router reads from the rows itself
    (CR2Router.batch_groups)."""
    group_by = getattr(table, "group_by", None)
    return None if group_by in (None, "benchmark") else query_groups(wh, query_ids, group_by)
