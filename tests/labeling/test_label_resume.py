"""Resumption: a labeling run SIGKILLed after its first committed chunk continues where it stopped.

The first run is a real `run_labeling` (the Prefect flow, against the session's test API) in a child
process; its progress hook appends a line to a file after every chunk the warehouse committed, and the test
kills the child's process group with SIGKILL as soon as the first line appears — mid-way through the run,
usually in the middle of an lm-eval call. The same labeling started again must write exactly the missing
labels: no duplicate, none lost, the killed run's labels kept as they were.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cr2.config import REPO_ROOT
from tests.labeling.conftest import PER_BENCHMARK, cpu_spec
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.flow, pytest.mark.slow]

MODEL = "qwen3-4b"
N_QUERIES = 4 * PER_BENCHMARK

CHILD = '''
import json, sys
from pathlib import Path

from cr2.core.env import apply_offline_env

apply_offline_env()  # offline switches first
from cr2.config import load_config
from cr2.config.lmeval import LabelingSpec
from cr2_flows.label import run_labeling

data_dir, home, spec_file, marker, model = sys.argv[1:6]
spec = LabelingSpec.model_validate_json(Path(spec_file).read_text())


def committed(event):
    with open(marker, "a") as fh:
        fh.write(json.dumps({"run_id": event.run_id, "done": event.done}) + "\\n")


run_labeling(load_config(overrides={"data_dir": data_dir}), home, models=[model], spec=spec, progress=committed)
'''


def _labels(home: Path):
    with Warehouse(home, read_only=True) as wh:
        return wh.df("SELECT * FROM labels ORDER BY query_id")


def test_sigkilled_run_resumes_without_duplicates_or_losses(prefect_harness, label_config, label_home, tiny_model_dir,
                                                            tmp_path):
    from prefect.settings import PREFECT_API_URL

    from cr2_flows.label import run_labeling
    from cr2_tasks.label import samples_dir, staged_ids, staging_dir

    spec = cpu_spec(tiny_model_dir, chunk_size=2)  # 20 chunks: the kill lands early in the run
    spec_file, marker, script, log = (tmp_path / n for n in ("spec.json", "committed.jsonl", "child.py", "child.log"))
    spec_file.write_text(spec.model_dump_json())
    script.write_text(CHILD)
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "PYTHONPATH": str(REPO_ROOT)}
    with log.open("wb") as out:
        child = subprocess.Popen(
            [sys.executable, str(script), label_config.data_dir, str(label_home), str(spec_file), str(marker), MODEL],
            env=env, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240
        while not (marker.exists() and marker.read_text().strip()):
            assert child.poll() is None, f"the labeling child exited ({child.returncode}) before its first chunk:\n" \
                                         f"{log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "no chunk committed within 240 s"
            time.sleep(0.02)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL

    # ---- after the kill: some labels committed, the run is left 'running', nothing is duplicated
    killed = _labels(label_home)
    reported = [json.loads(line) for line in marker.read_text().splitlines()]
    assert 0 < len(killed) < N_QUERIES, f"kill did not land mid-way ({len(killed)} of {N_QUERIES} labelled)"
    assert len(killed) >= 2 * len(reported)  # every chunk the hook reported is in the warehouse
    assert not killed.duplicated(["source", "query_id", "model_id"]).any()
    with Warehouse(label_home, read_only=True) as wh:
        status = wh.df("SELECT run_id, status, done, total FROM label_runs")
        all_queries = set(wh.df("SELECT query_id FROM queries")["query_id"])
    assert (status["status"] == "running").all()
    staging = staging_dir(spec, label_home)
    staged = sum(len(staged_ids(staging, r)) for r in status["run_id"])  # killed between staging and commit

    # ---- started again: exactly the missing labels are written
    events = []
    report = run_labeling(label_config, label_home, models=[MODEL], spec=spec, progress=events.append)
    assert report.finished
    last = {}
    for e in events:  # progress counts each query once: it ends at the run's total, never beyond
        assert e.done <= e.total
        last[e.run_id] = e.done
    assert last and all(done == PER_BENCHMARK for done in last.values())
    assert int(report.runs["written"].sum()) == N_QUERIES - len(killed) - staged
    final = _labels(label_home)
    assert len(final) == N_QUERIES and set(final["query_id"]) == all_queries
    assert not final.duplicated(["source", "query_id", "model_id"]).any()
    assert (report.runs["done"] == report.runs["total"]).all() and (report.runs["total"] == PER_BENCHMARK).all()
    # the killed run's labels are kept, under the same (deterministic) run ids
    kept = final.set_index("query_id").loc[killed["query_id"]]
    assert (kept["run_id"].values == killed["run_id"].values).all()
    assert (kept["correct"].values == killed["correct"].values).all()
    assert set(final["run_id"]) == set(status["run_id"])
    # one sample-log record per query: a chunk labelled twice overwrote its own log
    for rid in report.runs["run_id"]:
        records = [json.loads(line) for p in samples_dir(staging, rid).glob("*.jsonl") for line in p.read_text().splitlines()]
        ids = [r["query_id"] for r in records]
        assert len(ids) == len(set(ids)) == PER_BENCHMARK, rid
