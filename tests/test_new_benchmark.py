"""Adding a benchmark is one dataset definition (YAML) + its data file (docs/new_benchmark.md).

Two toy benchmarks — multiple choice with 3 to 5 options, and generative — are defined in a temporary folder,
outside configs/ and data/, and run through ingest and prepare with simulated labels; the labeler builds their
lm-eval tasks. Nothing in the repository is edited.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
import pytest

from cr2.config import dataset_defs
from cr2.config import load_config
from cr2.core.errors import ConfigError, DataValidationError
from cr2_tasks.ingest import ingest_queries
from cr2_tasks.prepare import assign_splits_task, compute_costs_task, embed_queries, sample_states_task, simulate_labels_task
from cr2_warehouse.db import Warehouse

N = 40  # queries per toy benchmark: 2 subsets of 20

TOY_MC = """\
    description: "toy multiple choice, 3 to 5 options"
    file: {file}
    answer: multiple-choice
    choices: 5
    min_choices: 3
    prompt: {{template: "Q: {{question}}{{choices}}\\nAnswer:", choice: "\\n({{letter}}) {{text}}"}}
    lm_eval:
      metric: acc
      template: {{doc_to_text: "{{{{question}}}}\\nAnswer:", doc_to_choice: [A, B, C, D, E]}}
    default_output_tokens: 7
    simulated:
      output_tokens: {{median_tokens: 5, sigma: 0.3, max_tokens: 32}}
      accuracy_pct: {{Qwen3-1.7B-Base: 30, Qwen3-4B-Base: 40, Qwen3-8B-Base: 50, Qwen3-14B-Base: 60}}
"""
TOY_GEN = """\
    description: "toy generative, exact-match answers"
    file: {file}
    answer: generative
    lm_eval:
      metric: exact_match
      template: {{doc_to_text: "{{{{question}}}}\\nA:", doc_to_target: "{{{{target}}}}", until: ["\\n"], max_gen_toks: 16}}
    default_output_tokens: 9
    simulated:
      output_tokens: {{median_tokens: 6, sigma: 0.4, max_tokens: 64}}
      accuracy_pct: {{qwen3-1.7b: 20, qwen3-4b: 25, qwen3-8b: 35, qwen3-14b: 45}}
"""


def _toy_frames() -> dict[str, pd.DataFrame]:
    rng = np.random.default_rng(0)
    mc, gen = [], []
    for s in ("alpha", "beta"):
        for i in range(N // 2):
            n = 3 + i % 3
            mc.append({"query_id": f"toy_mc/{s}/{i:05d}", "benchmark": "toy_mc", "subset": s,
                       "question": f"Which of these {s} items is number {i}?", "choices": [f"item {k}" for k in range(n)],
                       "target": "ABCDE"[int(rng.integers(n))], "tests": None, "test_setup": None})
            gen.append({"query_id": f"toy_gen/{s}/{i:05d}", "benchmark": "toy_gen", "subset": s,
                        "question": f"What is {i} plus {len(s)}?", "choices": None, "target": str(i + len(s)),
                        "tests": None, "test_setup": None})
    return {"toy_mc": pd.DataFrame(mc), "toy_gen": pd.DataFrame(gen)}


@pytest.fixture()
def toy_config(tmp_path, small_data_dir):
    """A config whose only benchmarks are the two toys, defined and stored under tmp_path."""
    cat, data = tmp_path / "datasets", tmp_path / "toydata"
    cat.mkdir()
    data.mkdir()
    for name, frame in _toy_frames().items():
        frame.to_parquet(data / f"{name}.parquet", index=False)
        text = {"toy_mc": TOY_MC, "toy_gen": TOY_GEN}[name].format(file=data / f"{name}.parquet")
        (cat / f"{name}.yaml").write_text(textwrap.dedent(text), encoding="utf-8")
    yield load_config(overrides={
        "data_dir": str(small_data_dir),  # the simulator's accuracy file; the toy files are absolute paths
        "benchmarks": {"mmlu": {"enabled": False}, "bbh": {"enabled": False}, "gpqa": {"enabled": False},
                       "mbpp": {"enabled": False},
                       "toy_mc": {"definition": str(cat / "toy_mc.yaml")},
                       "toy_gen": {"definition": str(cat / "toy_gen.yaml")}},
    })
    dataset_defs._REGISTERED.pop("toy_mc", None)
    dataset_defs._REGISTERED.pop("toy_gen", None)


def test_toy_benchmarks_run_through_ingest_and_prepare(toy_config, tmp_path):
    home = tmp_path / "home"
    assert "toy_mc" not in {p.stem for p in dataset_defs.DATASETS_DIR.glob("*.yaml")}  # nothing added to configs/
    summary = ingest_queries.fn(toy_config, str(home))
    assert {b: v["queries"] for b, v in summary["benchmarks"].items()} == {"toy_mc": N, "toy_gen": N}
    for i, step in enumerate((embed_queries, assign_splits_task, sample_states_task, simulate_labels_task,
                              compute_costs_task)):
        step.fn(toy_config, str(home))
    with Warehouse(home, read_only=True) as wh:
        q = wh.df("SELECT query_id, benchmark, len(choices) AS n_choices, prompt_tokens FROM queries")
        acc = wh.df("""SELECT q.benchmark, l.model_id, avg(l.correct::INT) AS acc FROM labels l
                       JOIN queries q USING (query_id) GROUP BY ALL""")
        n_costs = wh.scalar("SELECT count(*) FROM costs")
        n_emb = wh.scalar("SELECT count(*) FROM embeddings")
    # the definition's prompt: 'Q: ' + question + one '(X) option' line each + 'Answer:' — five options cost more tokens
    five = q[(q["benchmark"] == "toy_mc") & (q["n_choices"] == 5)]["prompt_tokens"].min()
    three = q[(q["benchmark"] == "toy_mc") & (q["n_choices"] == 3)]["prompt_tokens"].max()
    assert five > three > 0
    # simulated labels hit the definition's target accuracies exactly (rank cut: round(acc·n) correct)
    got = {(r.benchmark, r.model_id): round(r.acc * N) for r in acc.itertuples()}
    assert got[("toy_mc", "qwen3-1.7b")] == 12 and got[("toy_mc", "qwen3-14b")] == 24
    assert got[("toy_gen", "qwen3-4b")] == 10 and got[("toy_gen", "qwen3-14b")] == 18
    assert n_emb == 2 * N and n_costs == 2 * N * len(toy_config.models)
    assert toy_config.cost.default_output_tokens == {"mmlu": 16, "bbh": 48, "gpqa": 24, "mbpp": 128,
                                                     "toy_mc": 7, "toy_gen": 9}


def test_toy_benchmarks_have_lm_eval_tasks(toy_config, tmp_path):
    from cr2.labels.lmeval.docs import build_docs
    from cr2.config.lmeval import LabelingSpec
    from cr2.labels.lmeval.taskdefs import task_config

    spec = LabelingSpec()
    frames = _toy_frames()
    mc = task_config("toy_mc", spec.template("toy_mc"), tmp_path / "d.parquet", tmp_path)
    gen = task_config("toy_gen", spec.template("toy_gen"), tmp_path / "d.parquet", tmp_path)
    assert mc["output_type"] == "multiple_choice" and mc["doc_to_choice"] == ["A", "B", "C", "D", "E"]
    assert gen["output_type"] == "generate_until" and gen["metric_list"][0]["metric"] == "exact_match"
    docs = build_docs("toy_mc", frames["toy_mc"], spec.template("toy_mc"))
    assert [len(c) for c in docs["choices"][:3]] == [3, 4, 5]
    assert build_docs("toy_gen", frames["toy_gen"], spec.template("toy_gen"))["target"].iloc[0] == "5"


def test_toy_benchmark_answers_are_checked_against_its_entry(toy_config, tmp_path):
    bad = _toy_frames()["toy_mc"]
    bad.loc[0, "target"] = "E"  # the first question has 3 options: A–C
    bad.to_parquet(toy_config.benchmark_file("toy_mc"), index=False)
    home = tmp_path / "home"
    with Warehouse(home):  # an empty warehouse: the failed ingest must leave it so
        pass
    with pytest.raises(DataValidationError, match=r"toy_mc/alpha/00000: target 'E' not among A–C"):
        ingest_queries.fn(toy_config, str(home))
    with Warehouse(home, read_only=True) as wh:
        assert wh.count("queries") == 0


def test_a_bad_definition_names_the_file_and_key(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("file: x.parquet\nanswer: multiple-choice\nlm_eval: {metric: acc}\ndefault_output_tokens: 5\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml.*`choices`"):
        load_config(overrides={"benchmarks": {"broken": {"definition": str(path)}}})
    with pytest.raises(ConfigError, match=r"unknown benchmark 'mmlu_pr0'.*did you mean 'mmlu_pro'"):
        load_config(overrides={"benchmarks": {"mmlu_pr0": {}}})
