"""`cr2 label --estimate`: shapes of the pool, batch sizing of the hf backend, and a projection checked against a run.

The projection test is the one that matters to a user: on this machine, the estimate measured on 8 queries
per benchmark must predict, within 30 %, the labeling time of a real `cr2 label` run over 24 queries per
benchmark with the same (tiny) model and settings.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from cr2.config import load_config
from cr2.labels.lmeval.architectures import count_params, load_architectures
from cr2.labels.lmeval.hf_batching import length_bucket
from tests.labeling.conftest import cpu_spec, write_label_slice
from cr2_warehouse.db import DB_NAME, Warehouse

LARGER = 24  # queries per benchmark of the measured run
SAMPLE = 8  # queries per benchmark the estimate times


def test_the_architectures_file_holds_the_published_qwen3_shapes():
    arch = load_architectures()
    pool = {m.hf_name for m in load_config().models}
    assert pool <= set(arch), f"pool models without an architecture: {pool - set(arch)}"
    a = arch["Qwen/Qwen3-1.7B"]
    assert (a.hidden_size, a.num_hidden_layers, a.num_attention_heads, a.num_key_value_heads, a.vocab_size,
            a.intermediate_size, a.head_dim, a.tie_word_embeddings, a.max_position_embeddings) == (
        2048, 28, 16, 8, 151_936, 6144, 128, True, 40_960)
    for name, a in arch.items():
        total, non_embedding = count_params(a.hf_config())
        pub = a.params_published
        # the model cards round to 2–3 significant digits
        assert abs(total / pub.total - 1) < 0.02, (name, total, pub.total)
        assert abs(non_embedding / pub.non_embedding - 1) < 0.02, (name, non_embedding, pub.non_embedding)


def test_an_unknown_architecture_says_where_to_add_it(tmp_path):
    from cr2.core.errors import ConfigError
    from cr2.labels.lmeval.estimate import resolve_shape

    with pytest.raises(ConfigError, match="configs/architectures.yaml.*--model-path m=FOLDER"):
        resolve_shape("m", "Org/Unknown-7B", None, load_architectures())
    bad = tmp_path / "arch.yaml"
    bad.write_text(yaml.safe_dump({"architectures": {"x": {"model_type": "qwen3", "hidden_size": 64}}}))
    with pytest.raises(ConfigError, match="architecture 'x'.*vocab_size"):
        load_architectures(bad)


def test_length_groups_are_powers_of_two_within_the_model():
    assert [length_bucket(n, 40_960) for n in (1, 256, 257, 700, 1024, 1025)] == [256, 256, 512, 1024, 1024, 2048]
    assert length_bucket(100_000, 40_960) == 40_960


def _requests(lm, prompts, max_gen_toks):
    from lm_eval.api.instance import Instance

    kwargs = {"until": ["Q:"], "max_gen_toks": max_gen_toks, "do_sample": False}
    return [Instance("generate_until", {}, (p, kwargs), i) for i, p in enumerate(prompts)]


def test_auto_batches_are_probed_at_the_length_the_requests_need(tiny_model_dir, monkeypatch):
    """lm-eval's auto probe runs at the model's context (2,048 for the tiny model, 40,960 for Qwen3); cr2's hf model
    on lm-eval's generation path probes each length group at prompt + max_gen_toks rounded up, once per length, and
    generates the same text."""
    from lm_eval.models.huggingface import HFLM

    from cr2.labels.lmeval.backends import backend_plan, load_lm

    spec = cpu_spec(tiny_model_dir, hf={"dtype": "float32", "device": "cpu", "batch_size": "auto",
                                        "max_batch_size": 4, "num_threads": 1, "generation": "lm-eval"})
    lm = load_lm(backend_plan("hf", spec, str(tiny_model_dir), None, "tiny"))
    short = ["Q: What is 2+2?\nA:", "Q: Name a colour.\nA:"]
    long = ["Q: " + "Consider the following sequence of words carefully. " * 40 + "\nA:"]
    need = [len(lm.tok_encode(p)) + 16 for p in short + long]
    assert max(need[:2]) <= 256 < need[2] <= 1024, need
    calls = []
    inner = HFLM._detect_batch_size

    def counting(self, requests=None, pos=0):
        calls.append(self.max_length)  # the length lm-eval's probe runs at
        return inner(self, requests, pos)

    monkeypatch.setattr(HFLM, "_detect_batch_size", counting)
    out = lm.generate_until(_requests(lm, short + long, 16))
    again = lm.generate_until(_requests(lm, short + long, 16))
    monkeypatch.undo()
    groups = sorted((g["max_length"], g["requests"]) for g in lm.size_log)
    assert groups == [(256, 2), (256, 2), (length_bucket(need[2], 2048), 1), (length_bucket(need[2], 2048), 1)]
    assert sorted(calls) == sorted({256, length_bucket(need[2], 2048)})  # one probe per length, not per call
    assert all(c < 2048 for c in calls)
    assert out == again and len(out) == 3
    lm.size_log.clear()
    fixed = load_lm(backend_plan("hf", cpu_spec(tiny_model_dir), str(tiny_model_dir), None, "tiny"))
    assert fixed.generate_until(_requests(fixed, short + long, 16)) == out  # same generations as a fixed batch


def test_static_generation_probes_auto_batches_at_its_cache_length(tiny_model_dir, monkeypatch):
    """On the static path a batch holds one cache of padded prompt + max_gen_toks slots per row: `auto` probes at
    that length (once per length), never at the model's context, and the text is lm-eval's."""
    from lm_eval.models.huggingface import HFLM

    from cr2.labels.lmeval.backends import backend_plan, load_lm
    from cr2.labels.lmeval.static_generation import prompt_bucket

    spec = cpu_spec(tiny_model_dir, hf={"dtype": "float32", "device": "cpu", "batch_size": "auto",
                                        "max_batch_size": 4, "num_threads": 1})
    lm = load_lm(backend_plan("hf", spec, str(tiny_model_dir), None, "tiny"))
    assert lm.generation == "static"
    prompts = ["Q: What is 2+2?\nA:", "Q: Name a colour.\nA:",
               "Q: " + "Consider the following sequence of words carefully. " * 40 + "\nA:"]
    calls = []
    inner = HFLM._detect_batch_size

    def counting(self, requests=None, pos=0):
        calls.append(self.max_length)
        return inner(self, requests, pos)

    monkeypatch.setattr(HFLM, "_detect_batch_size", counting)
    out = lm.generate_until(_requests(lm, prompts, 16))
    again = lm.generate_until(_requests(lm, prompts, 16))
    monkeypatch.undo()
    longest = prompt_bucket(len(lm.tok_encode(prompts[2])), 2048) + 16
    assert calls == [longest]  # the short prompts join the long prompt's batch: one length, probed once
    assert out == again
    reference = load_lm(backend_plan("hf", cpu_spec(tiny_model_dir, hf={
        "dtype": "float32", "device": "cpu", "batch_size": 16, "num_threads": 1, "generation": "lm-eval"}),
        str(tiny_model_dir), None, "tiny"))
    assert reference.generate_until(_requests(reference, prompts, 16)) == out


def test_the_estimates_warm_up_generates_one_token_and_compilation_is_kept_apart(tiny_model_dir, label_home,
                                                                                 label_data_dir, tmp_path):
    from cr2.config import load_config
    from cr2.labels.lmeval.backends import backend_plan, load_lm
    from cr2.labels.lmeval.estimate import measure_rates
    from cr2_tasks.label import _selection
    from cr2_warehouse.db import Warehouse

    spec = cpu_spec(tiny_model_dir, templates={"bbh": {"max_gen_toks": 16}})
    lm = load_lm(backend_plan("hf", spec, str(tiny_model_dir), None, "tiny"))
    with Warehouse(label_home, read_only=True) as wh:
        queries = _selection(wh, str(label_home), ["bbh"], 3)
    chunks = []
    rates, warmup_s, probe_s = measure_rates(lm, "qwen3-1.7b", spec, {"bbh": queries}, tmp_path / "work",
                                             on_chunk=lambda b, r: chunks.append((b, len(r.rows))))
    (rate,) = rates
    stats = lm.generation_stats
    assert stats.requests == 1 + 3  # the warm-up query, then the three timed
    assert stats.generated_tokens - rate.generated_tokens == 1  # the warm-up generated one token, not sixteen
    assert rate.generated_tokens == 3 * 16  # random weights: every timed answer runs to max_gen_toks
    assert rate.output_tokens > 0 and rate.decode_steps > 0 and 0 < rate.busy_row_share <= 1
    assert rate.compile_s == 0.0 and rate.warmup_s == warmup_s > 0 and probe_s == 0.0  # CPU: nothing compiled
    assert sum(n for _, n in chunks) == 3 and {b for b, _ in chunks} == {"bbh"}


@pytest.fixture(scope="module")
def larger_home(tmp_path_factory) -> tuple[Path, Path]:
    """A warehouse with LARGER queries of each benchmark (data dir, home)."""
    from cr2_tasks.ingest import ingest_queries

    data = write_label_slice(tmp_path_factory.mktemp("estimate-data"), per_benchmark=LARGER)
    home = tmp_path_factory.mktemp("estimate-home")
    ingest_queries.fn(load_config(overrides={"data_dir": str(data)}), str(home))
    return data, home


@pytest.mark.slow
@pytest.mark.flow
def test_the_estimate_projects_a_larger_run_within_a_factor_of_two(prefect_harness, larger_home, tiny_model_dir, tmp_path):
    from cr2_flows.label import estimate_labeling, run_labeling
    from cr2_tasks.label import estimate_selection

    data, template = larger_home
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(template / DB_NAME, home / DB_NAME)
    config = load_config(overrides={"data_dir": str(data)})
    spec = cpu_spec(tiny_model_dir, chunk_size=8)
    est = estimate_labeling(config, home, models=["qwen3-1.7b"], spec=spec, sample=SAMPLE)
    table = est.table.set_index("benchmark")
    assert sorted(table.index) == ["bbh", "gpqa", "mbpp", "mmlu"]
    assert (table["sample_queries"] == SAMPLE).all() and (table["queries_per_s"] > 0).all()
    assert (table["total_queries"] == LARGER).all() and (table["unlabelled_queries"] == LARGER).all()
    assert est.models[0].shape == str(tiny_model_dir.resolve())  # the folder's config.json, random weights
    with Warehouse(home, read_only=True) as wh:
        assert wh.count("labels") == 0 and wh.count("label_runs") == 0  # the estimate writes nothing

    chunk_s: dict[str, float] = {}

    def hook(event):
        chunk_s[event.benchmark] = chunk_s.get(event.benchmark, 0.0) + event.chunk_s

    report = run_labeling(config, home, models=["qwen3-1.7b"], spec=spec, progress=hook)
    assert report.finished and int(report.runs["done"].sum()) == 4 * LARGER
    measured = sum(chunk_s.values())
    # the projection is a wall time on this machine: estimated once before and once after the measured run, so a
    # change of the machine's load during the test moves both sides alike (the mean of the two is compared)
    home_after = tmp_path / "home-after"
    home_after.mkdir()
    shutil.copy(template / DB_NAME, home_after / DB_NAME)
    after = estimate_labeling(config, home_after, models=["qwen3-1.7b"], spec=spec, sample=SAMPLE).table
    projected = (float(table["projected_total_s"].sum()) + float(after["projected_total_s"].sum())) / 2
    detail = {b: (round(table.loc[b, "projected_total_s"], 2), round(chunk_s[b], 2)) for b in chunk_s}
    # a wall-clock check beside a parallel test worker: it catches a projection that is off in kind (per chunk vs
    # per query, the wrong share of the larger run: a factor of 3 here), not noise of the machine's load
    assert measured / 2 <= projected <= 2 * measured, f"projected {projected:.2f} s, measured {measured:.2f} s: {detail}"

    _, counts = estimate_selection.fn(config, str(home), ["qwen3-1.7b"], ["mmlu", "bbh", "gpqa", "mbpp"], "hf",
                                      None, spec)
    assert (counts["total"] == LARGER).all() and (counts["unlabelled"] == 0).all()  # what is labelled is not projected


@pytest.mark.slow
@pytest.mark.flow
def test_cr2_label_estimate_prints_rates_and_projections(prefect_harness, label_home, label_data_dir, tiny_model_dir,
                                                         tmp_path):
    from typer.testing import CliRunner

    from tests.labeling.test_label_cli import CONFIG, _app

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(CONFIG.format(data=label_data_dir, tiny=tiny_model_dir))
    lab = tmp_path / "labeling.yaml"
    lab.write_text("labeling:\n  hf: {dtype: float32, device: cpu, num_threads: 1}\n  chunk_size: 4\n")
    result = CliRunner().invoke(_app(), [
        "label", "--estimate", "--sample", "2", "-m", "qwen3-1.7b", "-b", "mmlu,bbh", "--labeling", str(lab),
        "--config", str(cfg), "--home", str(label_home),
    ])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "labeling estimate" in out and "q/s" in out and "not yet labelled" in out
    assert "qwen3-1.7b" in out and "mmlu" in out and "bbh" in out
    with Warehouse(label_home, read_only=True) as wh:
        assert wh.count("labels") == 0


def test_cr2_label_estimate_refuses_a_backend_it_cannot_measure(label_home, label_data_dir, tiny_model_dir, tmp_path):
    from typer.testing import CliRunner

    from tests.labeling.test_label_cli import CONFIG, _app

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(CONFIG.format(data=label_data_dir, tiny=tiny_model_dir))
    result = CliRunner().invoke(_app(), ["label", "--estimate", "--backend", "vllm", "--config", str(cfg),
                                         "--home", str(label_home)])
    assert result.exit_code == 2, result.output
    assert "measures the hf backend" in result.output.replace("\n", " ")


def test_stored_gpu_rates_project_the_default_set_and_name_what_was_not_measured():
    import math

    import pandas as pd

    from cr2.labels.lmeval.estimate import load_stored_rates, stored_projection

    stored = {m.id: m for m in load_stored_rates()}
    h100 = stored["h100-2026-11-27-lm-eval"]
    assert h100.device.startswith("NVIDIA H100") and h100.generation == "lm-eval" and "outside measurement" in h100.source
    default_set = {"mmlu": 14_042, "bbh": 6_511, "gpqa": 448, "mbpp": 500}
    counts = pd.DataFrame([{"model_id": m, "benchmark": b, "total": n, "unlabelled": n}
                           for m in ("qwen3-1.7b", "qwen3-14b") for b, n in default_set.items()])
    proj = stored_projection(h100, counts).set_index(["model_id", "benchmark"])
    assert proj.loc[("qwen3-1.7b", "bbh"), "projected_total_s"] == pytest.approx(6_511 / 1.2)  # ≈ 1.5 h
    assert math.isnan(proj.loc[("qwen3-1.7b", "mbpp"), "queries_per_s"])  # did not finish there: no rate
    assert proj.loc["qwen3-14b", "queries_per_s"].isna().all()
    assert not any(m.generation == "static" for m in stored.values())  # the static path has no GPU measurement yet


def test_cr2_label_estimate_stored_projects_without_timing_anything(label_home, label_data_dir, tiny_model_dir,
                                                                    tmp_path):
    from typer.testing import CliRunner

    from tests.labeling.test_label_cli import CONFIG, _app

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(CONFIG.format(data=label_data_dir, tiny=tiny_model_dir))
    result = CliRunner().invoke(_app(), ["label", "--estimate", "--stored", "--config", str(cfg),
                                         "--home", str(label_home)])
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "labeling estimate (measured here" not in out  # nothing was built or timed
    assert "NVIDIA H100 80GB, lm-eval [h100-2026-11-27-lm-eval]: qwen3-1.7b" in out and "outside measurement" in out
    assert "mbpp (not measured)" in out
    assert "not measured on a GPU" in out and "bash scripts/gpu_measure.sh" in out
    refused = CliRunner().invoke(_app(), ["label", "--stored", "--config", str(cfg), "--home", str(label_home)])
    assert refused.exit_code == 2 and "--stored goes with --estimate" in refused.output
