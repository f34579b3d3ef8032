"""Ingest tasks: benchmark questions and the model pool into the warehouse (validated, cached)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from prefect import task

from cr2.inputs.datasets import QUERY_COLUMNS, answer_checks, prompt_texts, select_queries
from cr2.config import Config
from cr2.inputs.tokenizer import folder_token_counter, qwen_token_counter
from cr2_tasks.common import Reads, Stage
from cr2_tasks.store import tool_dir
from cr2_warehouse.db import Warehouse
from cr2_warehouse.inputs import replace_queries
from cr2_warehouse.validation import validate_frame

def _token_counter(config: Config, home: Path):
    if config.tokenizer.path:
        return folder_token_counter(config.tokenizer.path)
    return qwen_token_counter(tool_dir(home, "tokenizers"))


def build_query_frame(config: Config, home: Path) -> pd.DataFrame:
    """The `queries` rows of the selected benchmarks, with prompt-token counts."""
    df = select_queries(config)
    counter = _token_counter(config, home)
    df["prompt_tokens"] = counter.count(prompt_texts(config, df))
    df["tokenizer"] = counter.name
    # list columns as Python lists (DuckDB VARCHAR[]); NULL where absent
    for col in ("choices", "tests"):
        df[col] = [list(v) if isinstance(v, (list, np.ndarray)) else None for v in df[col]]
    df["target"] = [None if t is None or (isinstance(t, float) and np.isnan(t)) else t
                    for t in df["target"]]  # no gold answer (NaN from pandas): NULL
    return df[list(QUERY_COLUMNS[:-1]) + ["prompt_tokens", "tokenizer", "content_hash"]]


def validation_view(config: Config, df: pd.DataFrame) -> pd.DataFrame:
    """Columns the GX `queries` suite checks against each benchmark's dataset definition (options, target, tests)."""
    defs = {b: config.benchmark_def(b) for b in set(df["benchmark"])}
    return pd.concat([df, answer_checks(defs, df)], axis=1)


def models_frame(config: Config) -> pd.DataFrame:
    return pd.DataFrame(
        [{"model_id": m.id, "hf_name": m.hf_name, "params": m.params, "platform": m.platform, "role": m.role,
          "position": i} for i, m in enumerate(config.models)]
    )


@task(name="ingest-queries", retries=0)
def ingest_queries(config: Config, home: str) -> dict:
    """Load, count, validate and write the queries and the model pool; returns per-benchmark counts."""
    df = build_query_frame(config, Path(home))
    validate_frame("queries", validation_view(config, df), benchmarks=config.enabled_benchmarks)
    expected = df.groupby("benchmark").size().to_dict()
    with Warehouse(home) as wh:  # per-benchmark counts must equal the source's, or nothing is written
        replace_queries(wh, df, models_frame(config), expected)
    return summarise(df)


def summarise(df: pd.DataFrame) -> dict:
    g = df.groupby("benchmark")["prompt_tokens"]
    return {
        "tokenizer": str(df["tokenizer"].iloc[0]),
        "benchmarks": {b: {"queries": int(n), "mean_prompt_tokens": float(m)} for b, n, m in
                       zip(g.size().index, g.size().values, g.mean().values)},
    }


INGEST = Stage(ingest_queries, Reads(
    config=("benchmarks", "tokenizer", "data_dir", "models"),
    files=lambda c: [c.benchmark_file(b) for b in c.enabled_benchmarks],
    writes=("queries", "models")))
