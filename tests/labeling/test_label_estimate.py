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
from warehouse.db import DB_NAME, Warehouse

LARGER = 24  # queries per benchmark of the measured run
SAMPLE = 8  # queries per benchmark the estimate times


def test_the_catalogue_holds_the_published_qwen3_shapes():
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
    probes each length group at prompt + max_gen_toks rounded up, once per length, and generates the same text."""
    from lm_eval.models.huggingface import HFLM

    from cr2.labels.lmeval.backends import backend_plan, load_lm

    spec = cpu_spec(tiny_model_dir, hf={"dtype": "float32", "device": "cpu", "batch_size": "auto",
                                        "max_batch_size": 4, "num_threads": 1})
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


@pytest.fixture(scope="module")
def larger_home(tmp_path_factory) -> tuple[Path, Path]:
    """A warehouse with LARGER queries of each benchmark (data dir, home)."""
    from tasks.ingest import ingest_queries

    data = write_label_slice(tmp_path_factory.mktemp("estimate-data"), per_benchmark=LARGER)
    home = tmp_path_factory.mktemp("estimate-home")
    ingest_queries.fn(load_config(overrides={"data_dir": str(data)}), str(home))
    return data, home


@pytest.mark.slow
@pytest.mark.flow
def test_the_estimate_projects_a_larger_run_within_a_factor_of_two(prefect_harness, larger_home, tiny_model_dir, tmp_path):
    from flows.label import estimate_labeling, run_labeling
    from tasks.label import estimate_selection

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
