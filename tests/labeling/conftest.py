"""Fixtures for the real-labeling tests: a tiny local Qwen3, a 40-query warehouse, a CPU labeling spec.

Built once per session (≈10 s together) and copied per test where a test writes: the tiny random-weight
Qwen3 and its locally trained tokenizer (tests/labeling/tiny_model.py), and a warehouse into which a
slice of the shipped benchmarks — exactly 10 queries of each of MMLU, BBH, GPQA and MBPP — was ingested.
Nothing here touches the network (tests/conftest.py sets HF_HUB_OFFLINE=1 and friends first, cr2/core/env.py).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from cr2.config import load_config
from cr2.config.lmeval import LabelingSpec
from tests.conftest import write_small_benchmarks
from tests.labeling.tiny_model import build_tiny_qwen3
from cr2_warehouse.db import DB_NAME, Warehouse

PER_BENCHMARK = 10
POOL = ("qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A random-weight Qwen3ForCausalLM (hidden 64, 2 layers) with a BPE tokenizer trained on benchmark text."""
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3") / "model")


def write_label_slice(out: Path, per_benchmark: int = PER_BENCHMARK) -> Path:
    """The shipped benchmarks cut to `per_benchmark` queries each (spread over 3 MMLU subjects and 3 BBH tasks)."""
    write_small_benchmarks(out, per_subset=per_benchmark, subsets_per_benchmark=3)
    for name in ("mmlu", "bbh", "gpqa", "mbpp"):
        path = out / "benchmarks" / f"{name}.parquet"
        df = pd.read_parquet(path)
        rank = df.groupby("subset", sort=False).cumcount()
        df = df.assign(_rank=rank).sort_values(["_rank", "query_id"]).head(per_benchmark).drop(columns="_rank")
        df.to_parquet(path, compression="zstd", index=False)
    return out


@pytest.fixture(scope="session")
def label_data_dir(tmp_path_factory) -> Path:
    return write_label_slice(tmp_path_factory.mktemp("label-data"))


@pytest.fixture(scope="session")
def ingested_template(label_data_dir, tmp_path_factory) -> Path:
    """A warehouse home with the 40-query slice ingested (copied, never written, by the tests)."""
    from cr2_tasks.ingest import ingest_queries

    home = tmp_path_factory.mktemp("label-home-template")
    config = load_config(overrides={"data_dir": str(label_data_dir)})
    ingest_queries.fn(config, str(home))
    with Warehouse(home, read_only=True) as wh:
        counts = dict(wh.df("SELECT benchmark, count(*) AS n FROM queries GROUP BY 1").values.tolist())
    assert counts == {b: PER_BENCHMARK for b in ("mmlu", "bbh", "gpqa", "mbpp")}, counts
    return home


@pytest.fixture()
def label_home(ingested_template, tmp_path) -> Path:
    """A fresh copy of the ingested warehouse for one test."""
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ingested_template / DB_NAME, home / DB_NAME)
    return home


@pytest.fixture()
def label_config(label_data_dir):
    return load_config(overrides={"data_dir": str(label_data_dir)})


def cpu_spec(model_dir: Path, **changes) -> LabelingSpec:
    """A LabelingSpec for the tiny model on CPU: every pool model's weights are the tiny folder."""
    base = {
        "backend": "hf",
        "hf": {"dtype": "float32", "device": "cpu", "batch_size": 16, "num_threads": 1},
        "model_paths": {m: str(model_dir) for m in POOL},
        "chunk_size": 5,
        "retries": 0,
        "retry_delay_s": 0,
        "sandbox": {"timeout_s": 5.0, "memory_mb": 512},
    }
    base.update(changes)
    return LabelingSpec.model_validate(base)


@pytest.fixture()
def tiny_spec(tiny_model_dir) -> LabelingSpec:
    return cpu_spec(tiny_model_dir)


def label_digest(home: Path) -> tuple[str, int]:
    """sha256 over every label row (source, query_id, model_id, correct, output_tokens), sorted; and the row count."""
    import hashlib

    with Warehouse(home, read_only=True) as wh:
        df = wh.df("SELECT source, query_id, model_id, correct, output_tokens FROM labels "
                   "ORDER BY source, query_id, model_id")
    return hashlib.sha256(df.to_csv(index=False).encode()).hexdigest(), len(df)


def serial_labels(config, home: Path, model_dir: Path, models, benchmarks, limit: int, tmp: Path) -> tuple[str, int]:
    """The label digest of the serial path (threads runner, one worker, one shard) on a copy of `home`."""
    from cr2_flows.label import run_labeling

    serial_home = tmp / "serial"
    serial_home.mkdir()
    shutil.copy(home / DB_NAME, serial_home / DB_NAME)
    report = run_labeling(config, serial_home, models=models, benchmarks=benchmarks, limit=limit,
                          spec=cpu_spec(model_dir, shards=1, task_runner={"kind": "threads", "max_workers": 1}))
    assert report.finished
    return label_digest(serial_home)
