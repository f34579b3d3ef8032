"""Label runs: which queries a (model, benchmark, shard) run covers, its deterministic id, and resumption.

A run id is a function of everything that determines its labels — model and revision, backend kind and
label-relevant arguments, task config hash, lm-eval version, source — plus the shard. Starting the same
labeling again therefore finds the same run ids and labels only the queries those runs have not written
yet: a run killed mid-way continues where it stopped. A changed template or model revision gives new run
ids, and its labels replace the old ones (labels are unique per (source, query, model)).
"""
from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from cr2.core.errors import Cr2Error
from cr2.labels.lmeval.backends import BackendPlan


class LabelingError(Cr2Error):
    """A labeling run did not complete (a (model, shard) task failed after its retries)."""


@dataclass(frozen=True)
class BenchmarkJob:
    """One (model, benchmark, shard) run: the queries still to label, in order."""

    benchmark: str
    run_id: str
    task_config_hash: str
    pending: tuple[str, ...]  # query ids not yet labelled by this run
    total: int  # queries of the shard (labelled or not)


@dataclass(frozen=True)
class ShardJob:
    """One Prefect task: a model, loaded once, labelling its shard of every benchmark."""

    model_id: str
    backend: BackendPlan
    revision: str
    shard: int
    n_shards: int
    benchmarks: tuple[BenchmarkJob, ...] = field(default_factory=tuple)
    fewshot: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # benchmark → few-shot docs

    @property
    def n_pending(self) -> int:
        return sum(len(b.pending) for b in self.benchmarks)


def run_key(
    source: str, model_id: str, hf_name: str, revision: str, plan: BackendPlan, task_config_hash: str, lm_eval_version: str
) -> str:
    """sha256 (12 hex) over everything that determines a run's labels."""
    blob = json.dumps(
        {"source": source, "model": model_id, "hf_name": hf_name, "revision": revision, "backend": plan.backend,
         "args": plan.semantic_args, "task": task_config_hash, "lm_eval": lm_eval_version},
        sort_keys=True, default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:12]


def run_id(source: str, model_id: str, benchmark: str, key: str, shard: int, n_shards: int) -> str:
    return f"{source}:{model_id}:{benchmark}:{key}:s{shard}of{n_shards}"


def shard_of(query_ids: pd.Series | list[str], n_shards: int) -> np.ndarray:
    """Shard index of each query: crc32(query_id) mod n — stable across runs, limits and machines."""
    return np.fromiter((zlib.crc32(str(q).encode()) % n_shards for q in query_ids), dtype=np.int64, count=len(query_ids))


def select_queries(queries: pd.DataFrame, limit: int | None) -> pd.DataFrame:
    """The first `limit` queries of each benchmark, taken round-robin over its subsets (all when None).

    Round-robin (the i-th query of every subset before the (i+1)-th of any) spreads a small limit over
    MMLU subjects and BBH tasks; the order is total, so a larger limit extends a smaller one.
    """
    df = queries.sort_values("query_id").copy()
    df["_rank"] = df.groupby(["benchmark", "subset"]).cumcount()
    df = df.sort_values(["benchmark", "_rank", "subset", "query_id"])
    if limit is not None:
        df = df.groupby("benchmark", sort=False).head(limit)
    return df.drop(columns="_rank").reset_index(drop=True)


def chunks(ids: tuple[str, ...] | list[str], size: int) -> list[list[str]]:
    return [list(ids[i : i + size]) for i in range(0, len(ids), size)]
