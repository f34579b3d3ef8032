"""scripts/gpu_smoke.py in its --tiny mode: the GPU smoke test's own path, on CPU, in seconds."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_gpu_smoke_script_runs_tiny_on_cpu_and_writes_positive_rates(tmp_path):
    out = tmp_path / "smoke.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_smoke.py"), "--tiny", "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["tiny"] is True and data["device"] == "cpu"
    pool = ["qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b"]
    pairs = {(r["model_id"], r["benchmark"]) for r in data["rates"]}
    assert pairs == {(m, b) for m in pool for b in ("mmlu", "bbh", "gpqa", "mbpp")}
    assert all(r["queries"] == 2 and r["queries_per_s"] > 0 for r in data["rates"])
    # every model was built from its catalogue shape (tiny here) with the real Qwen3 vocabulary
    assert [m["model_id"] for m in data["models"]] == pool
    assert all(m["shape"].startswith("Qwen/Qwen3-") and m["params"] > 151_936 * 64 for m in data["models"])
    assert {r["total"] for r in data["selection"]} == {4}
