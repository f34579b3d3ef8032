"""Concurrent `cr2 labels import` of one source (N1): exactly one importer writes, every other refuses naming the
source — never a lost update reported as success.

Each importer is its own process running the real CLI. A file barrier holds every importer after validation
(where the early "source already has rows" check has passed for all of them) until all have arrived, so the
race that lost updates before — check, then lock, then write — happens on every run, not by chance.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd

from cr2_tasks.ingest import ingest_queries
from cr2_warehouse.db import Warehouse

N_IMPORTERS = 3

GATED_IMPORT = textwrap.dedent("""
    import pathlib, sys, time
    import cr2_warehouse.labels_import as li

    barrier, me, n = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    validate = li.validate_imported_labels

    def gated(*args, **kwargs):
        rows = validate(*args, **kwargs)
        (barrier / me).touch()
        t0 = time.monotonic()
        while len(list(barrier.iterdir())) < n and time.monotonic() - t0 < 120:
            time.sleep(0.02)
        return rows

    li.validate_imported_labels = gated
    from cr2_cli.main import main
    main(sys.argv[4:])
""")


def test_concurrent_imports_of_one_source_write_once_and_refuse_the_rest(small_config, home, tmp_path):
    ingest_queries.fn(small_config, str(home))
    with Warehouse(home, read_only=True) as wh:
        ids = wh.df("SELECT query_id FROM queries ORDER BY query_id")["query_id"].tolist()
    files = []
    for k in range(N_IMPORTERS):  # each file has its own pattern of correct labels, so the survivor is known
        f = tmp_path / f"labels_{k}.csv"
        pd.DataFrame([{"query_id": q, "model": m, "correct": int((i + j + k) % (k + 2) == 0), "output_tokens": 10 + k}
                      for i, q in enumerate(ids) for j, m in enumerate(("qwen3-1.7b", "qwen3-14b"))]).to_csv(f, index=False)
        files.append(f)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "CR2_LOCK_WAIT_S": "120", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", GATED_IMPORT, str(barrier), f"p{k}", str(N_IMPORTERS),
                               "labels", "import", str(f), "--source", "same", "--home", str(home)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for k, f in enumerate(files)]
    results = [(p.wait(timeout=300), p.stdout.read() + p.stderr.read()) for p in procs]
    winners = [k for k, (code, _) in enumerate(results) if code == 0]
    assert len(list(barrier.iterdir())) == N_IMPORTERS  # every importer passed the early check before any wrote
    assert len(winners) == 1, results
    for k, (code, out) in enumerate(results):
        if k != winners[0]:
            assert code == 2 and "label source 'same' already has" in out and "--replace" in out, out
    with Warehouse(home, read_only=True) as wh:
        stored = wh.df("SELECT query_id, model_id, correct FROM labels WHERE source = 'same' ORDER BY ALL")
    expected = pd.read_csv(files[winners[0]]).rename(columns={"model": "model_id"})
    expected = expected[["query_id", "model_id", "correct"]].sort_values(["query_id", "model_id"])
    assert stored["correct"].astype(int).tolist() == expected["correct"].tolist()
