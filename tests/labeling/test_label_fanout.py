"""Fan-out on Dask: (model, shard) tasks on a local cluster stage their chunks; the flow writes them.

Needs the `dask` extra (prefect-dask), which `make test` installs; skipped without it. The LocalCluster
runs 2 worker processes, so the tasks really run outside the labeling process: they never open the
warehouse, the flow ingests the staged chunks after the fan-out. The distributed path must write
exactly the labels of the serial path (same digest over every (query, model, correct, output_tokens)).
"""
from __future__ import annotations

import pytest

from tests.labeling.conftest import cpu_spec, label_digest, serial_labels
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.flow, pytest.mark.slow]
pytest.importorskip("prefect_dask", reason="the Dask task runner needs the dask extra (pip install -e '.[dask]')")

MODELS, BENCHMARKS, LIMIT = ["qwen3-1.7b", "qwen3-8b"], ["mmlu", "gpqa"], 6


def test_dask_fan_out_over_models_and_shards_writes_the_serial_labels(prefect_harness, label_config, label_home,
                                                                       tiny_model_dir, tmp_path):
    from cr2_flows.label import run_labeling

    serial_digest = serial_labels(label_config, label_home, tiny_model_dir, MODELS, BENCHMARKS, LIMIT, tmp_path)
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

    dask_digest = label_digest(label_home)
    print(f"\nlabel digest serial {serial_digest[0]} ({serial_digest[1]} rows), dask {dask_digest[0]} ({dask_digest[1]} rows)")
    assert dask_digest == serial_digest
