"""Fan-out on Dask: (model, shard) tasks on a local cluster stage their chunks; the flow writes them.

Needs the `dask` extra (prefect-dask), which `make test` installs; skipped without it. The LocalCluster
runs 2 worker processes, so the tasks really run outside the labeling process: they never open the
warehouse, the flow ingests the staged chunks after the fan-out. The distributed path must write
exactly the labels of the serial path (same digest over every (query, model, correct, output_tokens)).
"""
from __future__ import annotations

import hashlib
import shutil

import pytest

from tests.labeling.conftest import cpu_spec
from warehouse.db import DB_NAME, Warehouse

pytestmark = [pytest.mark.flow, pytest.mark.slow]
pytest.importorskip("prefect_dask", reason="the Dask task runner needs the dask extra (pip install -e '.[dask]')")

MODELS, BENCHMARKS, LIMIT = ["qwen3-1.7b", "qwen3-8b"], ["mmlu", "gpqa"], 6


def label_digest(home) -> tuple[str, int]:
    """sha256 over the sorted (source, query_id, model_id, correct, output_tokens) rows, and the row count."""
    with Warehouse(home, read_only=True) as wh:
        df = wh.df("SELECT source, query_id, model_id, correct, output_tokens FROM labels "
                   "ORDER BY source, query_id, model_id")
    text = df.to_csv(index=False)
    return hashlib.sha256(text.encode()).hexdigest(), len(df)


def test_dask_fan_out_over_models_and_shards_writes_the_serial_labels(prefect_harness, label_config, label_home,
                                                                       tiny_model_dir, tmp_path):
    from flows.label import run_labeling

    serial_home = tmp_path / "serial"
    serial_home.mkdir()
    shutil.copy(label_home / DB_NAME, serial_home / DB_NAME)
    serial = run_labeling(label_config, serial_home, models=MODELS, benchmarks=BENCHMARKS, limit=LIMIT,
                          spec=cpu_spec(tiny_model_dir, shards=1, task_runner={"kind": "threads", "max_workers": 1}))
    assert serial.finished

    spec = cpu_spec(tiny_model_dir, shards=2, task_runner={"kind": "dask", "dask_n_workers": 2,
                                                           "dask_processes": True})
    report = run_labeling(label_config, label_home, models=MODELS, benchmarks=BENCHMARKS, limit=LIMIT, spec=spec)
    assert report.finished
    runs = report.runs
    assert len(runs) == 2 * 2 * 2  # model × benchmark × shard
    assert runs["run_id"].str.endswith(("s0of2", "s1of2")).all()
    per = runs.groupby(["model_id", "benchmark"])[["done", "total", "written"]].sum()
    assert (per["done"] == LIMIT).all() and (per["total"] == LIMIT).all() and (per["written"] == LIMIT).all()
    with Warehouse(label_home, read_only=True) as wh:
        assert wh.count("labels") == 2 * 2 * LIMIT
        assert wh.scalar("SELECT count(*) FROM (SELECT DISTINCT source, query_id, model_id FROM labels)") == 24
    staged = list((label_home / "labeling" / "chunks").glob("*/chunk-*.parquet"))
    assert staged == []  # every staged chunk was written and removed

    dask_digest, serial_digest = label_digest(label_home), label_digest(serial_home)
    print(f"\nlabel digest serial {serial_digest[0]} ({serial_digest[1]} rows), dask {dask_digest[0]} ({dask_digest[1]} rows)")
    assert dask_digest == serial_digest
