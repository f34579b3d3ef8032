"""The `api` backend (lm-eval's local-completions) against an OpenAI-compatible server on 127.0.0.1.

The server (tests/labeling/fake_openai.py) serves the tiny Qwen3 the way `vllm serve` answers /v1/completions.
Labelled through it, multiple-choice log-likelihoods equal those of the in-process `hf` backend: the api
path scores the same prompts with the same model.
"""
from __future__ import annotations

import json

import pytest

from tests.labeling.conftest import cpu_spec
from tests.labeling.fake_openai import FakeCompletionsServer
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.flow, pytest.mark.slow]
pytest.importorskip("tenacity", reason="the api backend needs lm-eval's api extra (pip install 'lm-eval[api]')")


def _records(spec, home, runs) -> dict[str, dict]:
    from cr2_tasks.label import samples_dir, staging_dir

    out = {}
    for rid in runs["run_id"]:
        for p in samples_dir(staging_dir(spec, home), rid).glob("*.jsonl"):
            for line in p.read_text().splitlines():
                rec = json.loads(line)
                out[rec["query_id"]] = rec
    return out


def test_api_backend_scores_like_the_hf_backend(prefect_harness, label_config, label_home, tiny_model_dir):
    from cr2_flows.label import run_labeling

    benchmarks, model = ["mmlu", "gpqa", "bbh"], "qwen3-4b"
    hf_spec = cpu_spec(tiny_model_dir, chunk_size=4, templates={"bbh": {"max_gen_toks": 16}})
    hf = run_labeling(label_config, label_home, models=[model], benchmarks=benchmarks, limit=4, spec=hf_spec)
    server = FakeCompletionsServer(tiny_model_dir)
    with server as url:
        api_spec = cpu_spec(tiny_model_dir, chunk_size=4, templates={"bbh": {"max_gen_toks": 16}}, source="lm-eval-api",
                            api={"base_url": url, "num_concurrent": 2})
        api = run_labeling(label_config, label_home, models=[model], benchmarks=benchmarks, limit=4, backend="api",
                           spec=api_spec)
    assert api.finished and (api.runs["written"] == 4).all()
    assert any(r.get("echo") for r in server.requests) and any("stop" in r for r in server.requests)
    with Warehouse(label_home, read_only=True) as wh:
        runs = wh.df("SELECT run_id, backend, backend_args FROM label_runs WHERE source = 'lm-eval-api'")
        labels = wh.df("SELECT l.*, q.benchmark FROM labels l JOIN queries q USING (query_id) "
                       "WHERE source = 'lm-eval-api' ORDER BY query_id")
    assert (runs["backend"] == "api").all()
    args = json.loads(runs["backend_args"].iloc[0])
    assert args["lm_eval_model"] == "local-completions" and args["base_url"] == url
    assert len(labels) == 12 and labels.loc[labels["benchmark"] == "bbh", "output_tokens"].notna().all()
    ours, theirs = _records(api_spec, label_home, api.runs), _records(hf_spec, label_home, hf.runs)
    assert set(ours) == set(theirs)
    for qid, rec in ours.items():
        if "loglikelihoods" in rec:  # multiple choice: same model, same prompt, same numbers
            assert rec["prompt"] == theirs[qid]["prompt"]
            assert rec["loglikelihoods"] == pytest.approx(theirs[qid]["loglikelihoods"], abs=1e-3)
            assert rec["correct"] == theirs[qid]["correct"]
        else:
            assert rec["prompt"] == theirs[qid]["prompt"] and isinstance(rec["generation"], str)
