"""Run planning, backends, sample conversion and durable chunk writes — the parts of labeling that need no model."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from cr2.core.errors import DataValidationError, UnknownNameError
from cr2.labels.lmeval.backends import backend_plan
from cr2.labels.lmeval.runs import chunks, run_id, run_key, select_queries, shard_of
from cr2.labels.lmeval.samples import sample_records, samples_to_rows
from cr2.config.lmeval import LabelingSpec


def _queries() -> pd.DataFrame:
    rows = [(f"{b}/{s}/{i:05d}", b, s) for b, subsets in (("mmlu", "abc"), ("bbh", "xy")) for s in subsets for i in range(4)]
    return pd.DataFrame(rows, columns=["query_id", "benchmark", "subset"])


# ---------------------------------------------------------------- selection and sharding
def test_limit_takes_subsets_round_robin_and_extends_monotonically():
    q = _queries()
    small, large = select_queries(q, 4), select_queries(q, 7)
    mmlu = small[small["benchmark"] == "mmlu"]
    assert list(mmlu["subset"]) == ["a", "b", "c", "a"]  # every subject before the second of any
    for b in ("mmlu", "bbh"):
        s, lg = small[small["benchmark"] == b]["query_id"], large[large["benchmark"] == b]["query_id"]
        assert list(lg[: len(s)]) == list(s)  # a larger limit extends a smaller one
    assert len(select_queries(q, None)) == len(q)


def test_shards_partition_the_queries_stably():
    ids = _queries()["query_id"]
    s3 = shard_of(ids, 3)
    assert set(s3) <= {0, 1, 2} and np.array_equal(s3, shard_of(list(ids), 3))  # crc32: no process-seeded hash
    assert set(shard_of(ids, 1)) == {0}
    assert chunks(("a", "b", "c"), 2) == [["a", "b"], ["c"]]


def test_run_ids_change_with_what_changes_a_label_only():
    spec = LabelingSpec()
    plan = backend_plan("hf", spec, "Qwen/Qwen3-4B", "main", "Qwen/Qwen3-4B")
    key = run_key("lm-eval", "qwen3-4b", "Qwen/Qwen3-4B", "main", plan, "h1", "0.4.13")
    faster = backend_plan("hf", LabelingSpec(hf={"batch_size": 64}), "Qwen/Qwen3-4B", "main", "Qwen/Qwen3-4B")
    assert run_key("lm-eval", "qwen3-4b", "Qwen/Qwen3-4B", "main", faster, "h1", "0.4.13") == key
    half = backend_plan("hf", LabelingSpec(hf={"dtype": "float16"}), "Qwen/Qwen3-4B", "main", "Qwen/Qwen3-4B")
    for other in (run_key("lm-eval", "qwen3-4b", "Qwen/Qwen3-4B", "main", half, "h1", "0.4.13"),
                  run_key("lm-eval", "qwen3-4b", "Qwen/Qwen3-4B", "abc123", plan, "h1", "0.4.13"),
                  run_key("lm-eval", "qwen3-4b", "Qwen/Qwen3-4B", "main", plan, "h2", "0.4.13"),
                  run_key("lm-eval", "qwen3-4b", "Qwen/Qwen3-4B", "main", plan, "h1", "0.4.14")):
        assert other != key
    assert run_id("lm-eval", "qwen3-4b", "bbh", key, 0, 2) == f"lm-eval:qwen3-4b:bbh:{key}:s0of2"


# ---------------------------------------------------------------- backends
def test_vllm_and_api_backends_get_their_arguments():
    spec = LabelingSpec(vllm={"tensor_parallel_size": 2, "gpu_memory_utilization": 0.8, "max_model_len": 4096,
                              "dtype": "bfloat16"},
                        api={"base_url": "http://gpu-box:8000/v1/completions", "served_model": "qwen3-8b"})
    v = backend_plan("vllm", spec, "Qwen/Qwen3-8B", "main", "Qwen/Qwen3-8B")
    assert v.lm_eval_model == "vllm"
    assert {k: v.model_args[k] for k in ("pretrained", "tensor_parallel_size", "gpu_memory_utilization",
                                          "max_model_len", "dtype", "revision")} == {
        "pretrained": "Qwen/Qwen3-8B", "tensor_parallel_size": 2, "gpu_memory_utilization": 0.8,
        "max_model_len": 4096, "dtype": "bfloat16", "revision": "main"}
    assert "gpu_memory_utilization" not in v.semantic_args
    a = backend_plan("api", spec, "Qwen/Qwen3-8B", "main", "Qwen/Qwen3-8B")
    assert a.lm_eval_model == "local-completions"
    assert a.model_args["base_url"] == "http://gpu-box:8000/v1/completions" and a.model_args["model"] == "qwen3-8b"
    assert a.model_args["tokenizer"] == "Qwen/Qwen3-8B"
    per_model = LabelingSpec(api={"base_urls": {"qwen3-14b": "http://gpu-2:8000/v1/completions"}})
    assert backend_plan("api", per_model, "Qwen/Qwen3-14B", "main", "Qwen/Qwen3-14B", "qwen3-14b").model_args[
        "base_url"] == "http://gpu-2:8000/v1/completions"
    assert backend_plan("api", per_model, "Qwen/Qwen3-4B", "main", "Qwen/Qwen3-4B", "qwen3-4b").model_args[
        "base_url"] == per_model.api.base_url
    assert json.loads(a.args_json())["lm_eval_model"] == "local-completions"
    with pytest.raises(UnknownNameError, match="did you mean 'vllm'"):
        backend_plan("vlm", spec, "x", None, "x")


def test_cpu_thread_setting_is_not_an_lm_eval_argument(tmp_path):
    plan = backend_plan("hf", LabelingSpec(hf={"num_threads": 1}), str(tmp_path), None, "x")
    assert plan.model_args["num_threads"] == 1 and "num_threads" not in plan.semantic_args


# ---------------------------------------------------------------- samples → rows
def _mc_sample(qid: str, doc_id: int, acc: float) -> dict:
    return {"doc_id": doc_id, "doc": {"query_id": qid}, "target": 1, "filter": "none", "acc": acc,
            "arguments": [["Q?\nAnswer:", f" {c}"] for c in "ABCD"],
            "filtered_resps": [(-2.0, False), (-1.0, True), (-3.0, False), (-4.0, False)], "prompt_hash": "p"}


def test_samples_become_one_row_per_query_in_chunk_order():
    rows = samples_to_rows([_mc_sample("q2", 1, 1.0), _mc_sample("q1", 0, 0.0)], metric="acc", filter_name="none",
                           generative=False, expected_ids=["q1", "q2"])
    assert list(rows["query_id"]) == ["q1", "q2"] and list(rows["correct"]) == [False, True]
    assert rows["output_tokens"].isna().all()
    rec = sample_records([_mc_sample("q1", 0, 1.0)], metric="acc", filter_name="none", generative=False)[0]
    assert rec["prediction"] == 1 and rec["choices"] == [" A", " B", " C", " D"] and rec["loglikelihoods"][1] == -1.0
    json.dumps(rec)


@pytest.mark.parametrize("samples, expected, message", [
    ([_mc_sample("q1", 0, 1.0)], ["q1", "q2"], "missing \\['q2'\\]"),
    ([_mc_sample("q1", 0, 1.0), _mc_sample("q3", 1, 1.0)], ["q1"], "unexpected \\['q3'\\]"),
    ([_mc_sample("q1", 0, 1.0), _mc_sample("q1", 1, 1.0)], ["q1"], "more than once"),
])
def test_samples_that_do_not_match_the_chunk_are_an_error(samples, expected, message):
    with pytest.raises(DataValidationError, match=message):
        samples_to_rows(samples, metric="acc", filter_name="none", generative=False, expected_ids=expected)


def test_generative_rows_count_output_tokens():
    s = {"doc_id": 0, "doc": {"query_id": "q1"}, "filter": "flexible-extract", "exact_match": np.float64(1.0),
         "resps": [["True, it is."]], "filtered_resps": ["True"], "arguments": [["Q: x\nA:", {}]], "target": "True"}
    rows = samples_to_rows([s, {**s, "filter": "strict-match", "exact_match": 0.0}], metric="exact_match",
                           filter_name="flexible-extract", generative=True, expected_ids=["q1"],
                           count_tokens=lambda t: len(t.split()))
    assert rows["correct"].tolist() == [True] and rows["output_tokens"].tolist() == [3]
    rec = sample_records([s], metric="exact_match", filter_name="flexible-extract", generative=True)[0]
    assert rec["generation"] == "True, it is." and rec["answer"] == "True"


# ---------------------------------------------------------------- durable chunk writes
def _chunk(run: str, correct: bool) -> pd.DataFrame:
    return pd.DataFrame({"query_id": ["q1", "q2"], "correct": [correct, correct], "output_tokens": [5, None],
                         "doc_id": [0, 1], "prompt_hash": ["a", "b"], "filter": ["none", "none"]})


def test_a_chunk_replaces_older_labels_and_a_replayed_file_adds_nothing(tmp_path):
    from cr2_tasks.label import ingest_staged, stage_chunk, staged_ids, write_chunk
    from cr2_warehouse.db import Warehouse

    home, staging = tmp_path / "home", tmp_path / "staging"
    with Warehouse(home) as wh:
        write_chunk(wh, _chunk("old", False).assign(source="lm-eval", model_id="m", run_id="old"))
    path = stage_chunk(staging, "lm-eval", "m", "new", _chunk("new", True))
    assert staged_ids(staging, "new") == {"q1", "q2"}
    copy = path.with_name("chunk-replayed.parquet")
    copy.write_bytes(path.read_bytes())  # as if a crash came between the commit and the file's removal
    assert ingest_staged.fn(str(home), str(staging)) == 4
    assert staged_ids(staging, "new") == set()
    with Warehouse(home, read_only=True) as wh:
        labels = wh.df("SELECT * FROM labels ORDER BY query_id")
    assert len(labels) == 2 and set(labels["run_id"]) == {"new"} and labels["correct"].all()
    assert labels["output_tokens"].tolist()[0] == 5 and pd.isna(labels["output_tokens"].tolist()[1])


def test_a_backend_whose_library_is_missing_says_how_to_install_it():
    import importlib.util

    from cr2.core.errors import ConfigError
    from cr2.labels.lmeval.backends import load_lm

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    plan = backend_plan("vllm", LabelingSpec(), "Qwen/Qwen3-8B", "main", "Qwen/Qwen3-8B")
    with pytest.raises(ConfigError, match=r"backend 'vllm' needs vllm: pip install -e '\.\[vllm\]'"):
        load_lm(plan)
