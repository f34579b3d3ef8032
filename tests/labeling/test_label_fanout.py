"""Fan-out on Dask: (model, shard) tasks on a local cluster stage their chunks; the flow writes them.

Needs the `dask` extra (prefect-dask); skipped without it. The cluster runs its workers as threads here
(`dask_processes: false`) to stay light on a small test machine — the code path is the Dask one all the
same: the tasks never open the warehouse, the flow ingests the staged chunks after the fan-out.
"""
from __future__ import annotations

import pytest

from tests.labeling.conftest import cpu_spec
from warehouse.db import Warehouse

pytestmark = [pytest.mark.flow, pytest.mark.slow]
pytest.importorskip("prefect_dask", reason="the Dask task runner needs the dask extra (pip install -e '.[dask]')")


def test_dask_fan_out_over_models_and_shards(prefect_harness, label_config, label_home, tiny_model_dir):
    from flows.label import run_labeling

    spec = cpu_spec(tiny_model_dir, shards=2, task_runner={"kind": "dask", "dask_n_workers": 2,
                                                           "dask_processes": False})
    report = run_labeling(label_config, label_home, models=["qwen3-1.7b", "qwen3-8b"], benchmarks=["mmlu", "gpqa"],
                          limit=6, spec=spec)
    assert report.finished
    runs = report.runs
    assert len(runs) == 2 * 2 * 2  # model × benchmark × shard
    assert runs["run_id"].str.endswith(("s0of2", "s1of2")).all()
    per = runs.groupby(["model_id", "benchmark"])[["done", "total", "written"]].sum()
    assert (per["done"] == 6).all() and (per["total"] == 6).all() and (per["written"] == 6).all()
    with Warehouse(label_home, read_only=True) as wh:
        assert wh.count("labels") == 2 * 2 * 6
        assert wh.scalar("SELECT count(*) FROM (SELECT DISTINCT source, query_id, model_id FROM labels)") == 24
    staged = list((label_home / "labeling" / "chunks").glob("*/chunk-*.parquet"))
    assert staged == []  # every staged chunk was written and removed
