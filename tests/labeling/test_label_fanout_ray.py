"""Fan-out on Ray: the same (model, shard) tasks on a local Ray instance; the flow writes the staged chunks.

Needs the `ray` extra (prefect-ray), which `make test` does not install (ray pulls ~80 MB plus its own
dependencies and starts a local cluster of several processes; see docs/labeling.md §7). Skipped without it.
The Ray path must write exactly the labels of the serial path.
"""
from __future__ import annotations

import pytest

from tests.labeling.conftest import cpu_spec, label_digest, serial_labels
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.flow, pytest.mark.slow]
pytest.importorskip("prefect_ray", reason="the Ray task runner needs the ray extra (pip install -e '.[ray]')")

MODELS, BENCHMARKS, LIMIT = ["qwen3-1.7b", "qwen3-8b"], ["mmlu", "gpqa"], 6


def test_ray_fan_out_writes_the_serial_labels(prefect_harness, label_config, label_home, tiny_model_dir, tmp_path):
    import ray

    from cr2_flows.label import run_labeling

    serial_digest = serial_labels(label_config, label_home, tiny_model_dir, MODELS, BENCHMARKS, LIMIT, tmp_path)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)  # RayTaskRunner connects to this instance
    try:
        spec = cpu_spec(tiny_model_dir, shards=2, task_runner={"kind": "ray"})
        report = run_labeling(label_config, label_home, models=MODELS, benchmarks=BENCHMARKS, limit=LIMIT, spec=spec)
    finally:
        ray.shutdown()
    assert report.finished and len(report.runs) == 2 * 2 * 2
    with Warehouse(label_home, read_only=True) as wh:
        assert wh.count("labels") == 2 * 2 * LIMIT
    ray_digest = label_digest(label_home)
    print(f"\nlabel digest serial {serial_digest[0]} ({serial_digest[1]} rows), ray {ray_digest[0]} ({ray_digest[1]} rows)")
    assert ray_digest == serial_digest
