"""The real labeling flow, end to end: lm-eval over the warehouse's queries with a tiny local Qwen3 (hf backend).

`cr2_flows.label.run_labeling` runs the Prefect flow under the session's test API: 4 models (all pointing at
the same tiny random-weight Qwen3 folder) × 4 benchmarks × 10 queries. The tests assert structure, ids,
provenance and that lm-eval really scored the model — never accuracy (the weights are random).
"""
from __future__ import annotations

import json
import math
import time
from importlib import metadata
from pathlib import Path

import pytest

from cr2.labels.lmeval.taskdefs import task_config_hash
from tests.labeling.conftest import PER_BENCHMARK, POOL
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.flow, pytest.mark.slow]

BENCHMARKS = ("mmlu", "bbh", "gpqa", "mbpp")
GENERATIVE = ("bbh", "mbpp")


@pytest.fixture(scope="module")
def labelled(prefect_harness, ingested_template, label_data_dir, tiny_model_dir, tmp_path_factory):
    """One real flow run over the whole 40-query warehouse for the whole pool (shared by this module's tests)."""
    import shutil

    from cr2.config import load_config
    from cr2_flows.label import run_labeling
    from tests.labeling.conftest import cpu_spec
    from cr2_warehouse.db import DB_NAME

    home = tmp_path_factory.mktemp("labelled") / "home"
    home.mkdir()
    shutil.copy(ingested_template / DB_NAME, home / DB_NAME)
    config = load_config(overrides={"data_dir": str(label_data_dir)})
    spec = cpu_spec(tiny_model_dir)
    events = []
    t0 = time.monotonic()
    report = run_labeling(config, home, spec=spec, progress=events.append)
    wall_s = time.monotonic() - t0
    print(f"\ntiny labeling run: {len(POOL)} models × {len(BENCHMARKS)} benchmarks × {PER_BENCHMARK} queries "
          f"in {wall_s:.1f} s (flow {report.wall_s:.1f} s)")
    return {"home": home, "config": config, "spec": spec, "report": report, "events": events, "wall_s": wall_s}


def _labels(home: Path):
    with Warehouse(home, read_only=True) as wh:
        return wh.df("SELECT l.*, q.benchmark FROM labels l LEFT JOIN queries q USING (query_id) ORDER BY ALL")


def test_every_query_model_pair_gets_exactly_one_label(labelled):
    home = labelled["home"]
    with Warehouse(home, read_only=True) as wh:
        queries = set(wh.df("SELECT query_id FROM queries")["query_id"])
    labels = _labels(home)
    assert len(queries) == len(BENCHMARKS) * PER_BENCHMARK
    assert len(labels) == len(queries) * len(POOL)
    assert labels["benchmark"].notna().all(), "a label's query_id is not one of the warehouse's queries"
    for m in POOL:
        assert set(labels.loc[labels["model_id"] == m, "query_id"]) == queries, m
    assert not labels.duplicated(["source", "query_id", "model_id"]).any()
    assert set(labels["source"]) == {"lm-eval"}
    assert set(labels["correct"].astype(int)) <= {0, 1}
    gen = labels["benchmark"].isin(GENERATIVE)
    assert labels.loc[gen, "output_tokens"].notna().all() and (labels.loc[gen, "output_tokens"] >= 0).all()
    assert labels.loc[~gen, "output_tokens"].isna().all()  # multiple choice generates nothing


def test_label_runs_record_provenance_and_finish(labelled):
    home, spec, report = labelled["home"], labelled["spec"], labelled["report"]
    assert report.finished
    runs = report.runs
    assert len(runs) == len(POOL) * len(BENCHMARKS)
    assert set(zip(runs["model_id"], runs["benchmark"])) == {(m, b) for m in POOL for b in BENCHMARKS}
    assert (runs["status"] == "finished").all()
    assert (runs["done"] == PER_BENCHMARK).all() and (runs["total"] == PER_BENCHMARK).all()
    assert (runs["written"] == PER_BENCHMARK).all()
    assert (runs["lm_eval_version"] == metadata.version("lm_eval")).all()
    with Warehouse(home, read_only=True) as wh:
        stored = wh.df("SELECT * FROM label_runs ORDER BY run_id")
        labels = wh.df("SELECT DISTINCT run_id, model_id FROM labels")
    assert set(stored["run_id"]) == set(runs["run_id"]) == set(labels["run_id"])
    assert stored["started_at"].notna().all() and (stored["finished_at"] >= stored["started_at"]).all()
    assert (stored["backend"] == "hf").all()
    args = json.loads(stored["backend_args"].iloc[0])
    assert args["lm_eval_model"] == "hf" and args["pretrained"] == spec.model_paths["qwen3-1.7b"]
    assert stored["revision"].str.startswith("local-").all()  # a local folder's content id, not "main"
    # the recorded hash is the task definition's (MBPP's includes its few-shot examples and sandbox limits)
    by_bench = dict(zip(runs["benchmark"], runs["task_config_hash"]))
    for b in ("mmlu", "bbh", "gpqa"):
        assert by_bench[b] == task_config_hash(b, spec.template(b), spec.sandbox)
    assert len(set(by_bench.values())) == len(BENCHMARKS)
    assert all(len(h) == 16 for h in by_bench.values())


def test_progress_is_reported_per_chunk(labelled):
    events = labelled["events"]
    per_run = {}
    for e in events:
        assert 0 < e.done <= e.total == PER_BENCHMARK
        per_run.setdefault(e.run_id, []).append(e.done)
    assert len(per_run) == len(POOL) * len(BENCHMARKS)
    assert all(dones == [5, 10] for dones in per_run.values())  # chunk_size 5


def _sample_log(home: Path, spec, run_id: str) -> list[dict]:
    from cr2_tasks.label import samples_dir, staging_dir

    folder = samples_dir(staging_dir(spec, home), run_id)
    return [json.loads(line) for p in sorted(folder.glob("*.jsonl")) for line in p.read_text().splitlines()]


def test_lm_eval_really_scored_the_tiny_model(labelled, tiny_model_dir):
    """The per-sample log holds the model's own log-likelihoods and generations, and they explain each label."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    home, spec, runs = labelled["home"], labelled["spec"], labelled["report"].runs
    labels = _labels(home).set_index(["model_id", "query_id"])
    with Warehouse(home, read_only=True) as wh:
        questions = dict(wh.df("SELECT query_id, question FROM queries").values.tolist())
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    checked_ll = False
    for run in runs.itertuples():
        records = _sample_log(home, spec, run.run_id)
        assert sorted(r["query_id"] for r in records) == sorted(
            labels.xs(run.model_id, level="model_id").query("benchmark == @run.benchmark").index)
        for r in records:
            label = labels.loc[(run.model_id, r["query_id"])]
            assert bool(label["correct"]) == r["correct"]
            if run.benchmark == "bbh":
                assert r["prompt"].endswith(f"Q: {questions[r['query_id']]}\nA:")
            elif run.benchmark in ("mmlu", "gpqa"):
                assert questions[r["query_id"]].strip()[:40] in r["prompt"] and r["prompt"].endswith("Answer:")
            if run.benchmark in GENERATIVE:
                # output_tokens counts the model's generation with the model's own tokenizer
                assert int(label["output_tokens"]) == len(tok(r["generation"], add_special_tokens=False)["input_ids"])
                assert isinstance(r["answer"], str)
            else:
                lls = r["loglikelihoods"]
                assert len(lls) == 4 and all(math.isfinite(x) and x < 0 for x in lls)
                assert r["correct"] == (r["prediction"] == r["target"])
        if run.benchmark == "mmlu" and not checked_ll:
            # recompute one choice's log-likelihood with transformers directly: lm-eval ran this very model
            r = records[0]
            model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
            ctx = tok(r["prompt"], add_special_tokens=False)["input_ids"]
            cont = tok(r["prompt"] + r["choices"][0], add_special_tokens=False)["input_ids"][len(ctx):]
            with torch.no_grad():
                logits = model(torch.tensor([ctx + cont])).logits[0].log_softmax(-1)
            ll = sum(float(logits[len(ctx) - 1 + i, t]) for i, t in enumerate(cont))
            assert ll == pytest.approx(r["loglikelihoods"][0], abs=1e-3)
            checked_ll = True
    assert checked_ll


def test_models_with_the_same_weights_get_the_same_labels(labelled):
    labels = _labels(labelled["home"])
    wide = labels.pivot(index="query_id", columns="model_id", values="correct")
    tokens = labels.pivot(index="query_id", columns="model_id", values="output_tokens")
    for m in POOL[1:]:
        assert wide[m].equals(wide[POOL[0]]), m
        assert tokens[m].equals(tokens[POOL[0]]), m


def test_labels_source_lm_eval_feeds_the_pipeline(labelled):
    """With labels.source: lm-eval, prepare's coverage check accepts the labelled warehouse."""
    from cr2.config import load_config
    from cr2_tasks.prepare import check_label_source

    config = load_config(overrides={"data_dir": labelled["config"].data_dir, "labels": {"source": "lm-eval"}})
    with Warehouse(labelled["home"]) as wh:
        assert check_label_source(config, wh) == "lm-eval"


def test_a_second_run_labels_nothing_and_changes_nothing(labelled):
    from cr2_flows.label import run_labeling

    before = _labels(labelled["home"])
    report = run_labeling(labelled["config"], labelled["home"], spec=labelled["spec"])
    assert report.finished and (report.runs["written"] == 0).all()
    after = _labels(labelled["home"])
    assert before.equals(after)
    # a smaller --limit: the runs report the selection (3 of 3), not every label they ever wrote
    small = run_labeling(labelled["config"], labelled["home"], spec=labelled["spec"], limit=3)
    assert small.finished and (small.runs["written"] == 0).all()
    assert (small.runs["done"] == 3).all() and (small.runs["total"] == 3).all()
    assert _labels(labelled["home"]).equals(before)
