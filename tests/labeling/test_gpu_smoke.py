"""scripts/gpu_smoke.py in its --tiny mode: the GPU smoke test's own path, on CPU, in seconds."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ("mmlu", "bbh", "gpqa", "mbpp")


def _smoke(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "smoke.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}  # the run's cache (tests/conftest.py)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_smoke.py"), "--tiny", "--out", str(out), *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    return proc, out


@pytest.mark.slow
def test_the_gpu_smoke_script_runs_both_paths_tiny_on_cpu_and_writes_rates_and_agreement(tmp_path):
    models = ["qwen3-1.7b", "qwen3-4b"]
    proc, out = _smoke(tmp_path, "--path", "both", "--models", ",".join(models))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["tiny"] is True and data["device"] == "cpu" and data["status"] == "finished"
    keys = {(r["model_id"], r["path"], r["benchmark"]) for r in data["rates"]}
    assert keys == {(m, p, b) for m in models for p in ("old", "new") for b in BENCHMARKS}
    for r in data["rates"]:
        assert r["queries"] == 2 and r["queries_per_s"] > 0 and r["warmup_s"] > 0 and r["compile_s"] == 0
        assert r["gpu_busy_share"] is None  # no nvidia-smi here
        if r["benchmark"] in ("bbh", "mbpp"):
            assert r["tokens_per_s"] > 0 and r["output_tokens"] > 0
            assert (r["generated_tokens"] == 2 * 32) is (r["path"] == "new")  # the static path counts its tokens
    # every model was built once from its architectures-file shape (tiny here) with the real Qwen3 vocabulary
    assert [m["model_id"] for m in data["models"]] == models
    assert all(m["shape"].startswith("Qwen/Qwen3-") and m["params"] > 151_936 * 64 for m in data["models"])
    assert all(set(m["paths"]) == {"old", "new"} and m["paths"]["new"]["compile_error"] is None
               for m in data["models"])
    # on CPU the two paths generate the same text, so every label agrees
    assert {(a["model_id"], a["benchmark"]) for a in data["agreement"]} == {(m, b) for m in models for b in BENCHMARKS}
    assert all(a["queries"] == 2 and a["label_agreement"] == 1.0 for a in data["agreement"])
    assert all(a["generation_agreement"] == 1.0 for a in data["agreement"] if a["benchmark"] in ("bbh", "mbpp"))
    assert {p["path"] for p in data["projection"]} == {"old", "new"}
    assert all(p["projected_s"] > 0 and not p["not_measured"] for p in data["projection"])
    assert {r["total"] for r in data["selection"]} == {4}
    assert "agree on 100.0%" in proc.stdout


@pytest.mark.slow
def test_the_gpu_smoke_script_stops_between_steps_at_its_budget_and_keeps_the_json(tmp_path):
    proc, out = _smoke(tmp_path, "--budget-s", "0", "--models", "qwen3-1.7b")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["status"] == "stopped_for_budget" and data["budget_s"] == 0
    assert data["rates"] == [] and data["models"] == []
    assert not list(tmp_path.glob(".smoke.json.*"))  # no temporary file left beside it
