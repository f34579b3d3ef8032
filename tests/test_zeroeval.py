"""The ZeroEval data: the shipped copies, the GSM8K / CRUXEval / MATH-L5 benchmark files derived from
them, and their dataset definitions."""
from __future__ import annotations

import hashlib
import shutil

import pandas as pd
import pytest

from cr2.config import dataset_defs
from cr2.config import REPO_ROOT
from cr2.core.errors import DataValidationError
from cr2.labels.zeroeval import BENCHMARKS, zeroeval_benchmark_frame

ZE = REPO_ROOT / "data" / "measured" / "zeroeval"
SHA256 = {"zeroeval_questions.parquet": "9205446913587f3f70377aa42dfc50a2098786e36bbf00cd0c4ea40ae0c20dc4",
          "zeroeval_outputs.parquet": "60df307ee9709a1fe7e7b6794f991781d6c1170202a11203aa7deac41383143f"}
COUNTS = {"gsm8k": 1319, "cruxeval": 800, "math_l5": 721}  # data/measured/zeroeval/README.md


@pytest.fixture(scope="module")
def questions() -> pd.DataFrame:
    return pd.read_parquet(ZE / "zeroeval_questions.parquet")


def test_zeroeval_files_are_byte_identical_copies():
    for name, digest in SHA256.items():
        assert hashlib.sha256((ZE / name).read_bytes()).hexdigest() == digest, name


@pytest.mark.parametrize("name", sorted(BENCHMARKS))
def test_benchmark_file_is_the_conversion_of_the_questions(questions, name):
    shipped = pd.read_parquet(REPO_ROOT / "data" / "benchmarks" / f"{name}.parquet")
    fresh = zeroeval_benchmark_frame(questions, name)
    assert len(shipped) == len(fresh) == COUNTS[name] and shipped["query_id"].is_unique
    for col in ("query_id", "subset", "question", "target", "source_benchmark", "source_item_id"):
        assert (shipped[col].to_numpy() == fresh[col].to_numpy()).all(), col
    assert shipped["target"].str.strip().ne("").all()
    definition = dataset_defs.get_dataset(name)
    assert definition.answer == "generative" and definition.file == f"benchmarks/{name}.parquet"


def test_gsm8k_target_is_the_final_number(questions):
    frame = zeroeval_benchmark_frame(questions, "gsm8k")
    assert frame["target"].iloc[0] == "18"  # Janet's ducks: "#### 18" in openai/gsm8k
    assert frame["target"].str.fullmatch(r"-?[\d,]+(\.\d+)?").all()


def test_conversion_rejects_missing_answers_and_repeated_ids(questions):
    bad = questions.copy()
    bad.loc[bad["benchmark"] == "MATH-L5", "answer"] = bad.loc[bad["benchmark"] == "MATH-L5", "answer"].where(
        bad.loc[bad["benchmark"] == "MATH-L5", "item_id"] != "3", "  ")
    with pytest.raises(DataValidationError, match="no gold answer"):
        zeroeval_benchmark_frame(bad, "math_l5")
    dup = pd.concat([questions, questions[questions["item_id"] == "crux-test-#5"]])
    with pytest.raises(DataValidationError, match="more than once"):
        zeroeval_benchmark_frame(dup, "cruxeval")


# ---------------------------------------------------------------- the two scenarios
from cr2.config import load_config  # noqa: E402
from cr2.labels.measured import join_measured_labels  # noqa: E402

SCENARIOS = {"gemma": REPO_ROOT / "configs" / "zeroeval-gemma.yaml", "qwen": REPO_ROOT / "configs" / "zeroeval-qwen.yaml"}
# mean of `correct` per (pool model, benchmark): data/measured/zeroeval/README.md, "Models and accuracy"
README_ACCURACY = {
    ("gemma-2-2b-it", "gsm8k"): 0.516, ("gemma-2-2b-it", "cruxeval"): 0.215, ("gemma-2-2b-it", "math_l5"): 0.043,
    ("gemma-2-9b-it", "gsm8k"): 0.874, ("gemma-2-9b-it", "cruxeval"): 0.460, ("gemma-2-9b-it", "math_l5"): 0.194,
    ("gemma-2-27b-it", "gsm8k"): 0.902, ("gemma-2-27b-it", "cruxeval"): 0.572, ("gemma-2-27b-it", "math_l5"): 0.266,
    ("llama-3.1-70b-instruct", "gsm8k"): 0.942, ("llama-3.1-70b-instruct", "cruxeval"): 0.642,
    ("llama-3.1-70b-instruct", "math_l5"): 0.431,
    ("qwen2.5-3b-instruct", "cruxeval"): 0.331, ("qwen2.5-3b-instruct", "math_l5"): 0.255,
    ("qwen2.5-7b-instruct", "cruxeval"): 0.528, ("qwen2.5-7b-instruct", "math_l5"): 0.515,
    ("qwen2.5-32b-instruct", "cruxeval"): 0.699, ("qwen2.5-32b-instruct", "math_l5"): 0.595,
    ("qwen2.5-72b-instruct", "cruxeval"): 0.739, ("qwen2.5-72b-instruct", "math_l5"): 0.602,
}


def _scenario_labels(cfg, data_dir=None) -> pd.DataFrame:
    """The label table the scenario's measured import builds, without a warehouse (every item of the files)."""
    spec = cfg.labels.measured
    data = data_dir or cfg.data_path
    queries = pd.concat([pd.read_parquet(data / "benchmarks" / f"{b}.parquet")[["query_id", *spec.join.values()]]
                         .assign(benchmark=b) for b in spec.benchmarks], ignore_index=True)
    outputs = pd.read_parquet(data / spec.outputs_file)
    return join_measured_labels(outputs, queries, spec.join, spec.models, spec.chars_per_token)


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_labels_are_the_measured_correctness(scenario):
    cfg = load_config(SCENARIOS[scenario])
    assert cfg.splits.test == 0.3 and cfg.labels.source == f"measured-zeroeval-{scenario}-v1"
    assert cfg.models[0].platform == "jetson-agx-orin" and cfg.ref_model_id == cfg.models[-1].id
    labels = _scenario_labels(cfg)
    n_items = {"gemma": 2840, "qwen": 1521}[scenario]
    assert len(labels) == 4 * n_items and not labels.duplicated(["query_id", "model"]).any()
    labels["benchmark"] = labels["query_id"].str.split("/").str[0]
    acc = labels.groupby(["model", "benchmark"])["correct"].mean()
    for (model, bench), value in acc.items():
        assert value == pytest.approx(README_ACCURACY[(model, bench)], abs=6e-4), (model, bench)
    # L_out from the measured length with the per-benchmark factor
    outputs = pd.read_parquet(ZE / "zeroeval_outputs.parquet")
    first = outputs[(outputs["model"] == "Qwen2.5-3B-Instruct" if scenario == "qwen" else outputs["model"] == "gemma-2-2b-it")
                    & (outputs["benchmark"] == "MATH-L5") & (outputs["item_id"] == "7")].iloc[0]
    row = labels[labels["query_id"] == "math_l5/level5/00007"].iloc[0]
    assert row["output_tokens"] == round(first["generated_chars"] / 2.8)


def test_gemma_27b_gsm8k_is_the_together_run():
    cfg = load_config(SCENARIOS["gemma"])
    assert cfg.labels.measured.models["gemma-2-27b-it"]["gsm8k"] == "gemma-2-27b-it@together"
    from cr2.config import MeasuredLabelsSpec

    spec = cfg.labels.measured.model_dump()
    with pytest.raises(ValueError, match=r"models.gemma-2-27b-it: name the model for every benchmark"):
        MeasuredLabelsSpec.model_validate({**spec, "models": {**spec["models"], "gemma-2-27b-it": {"gsm8k": "x"}}})
    with pytest.raises(ValueError, match="one factor > 0 per benchmark"):
        MeasuredLabelsSpec.model_validate({**spec, "chars_per_token": {"gsm8k": 3.7}})


def _slice(root, scenario: str, per_benchmark: int):
    """data_dir with the first `per_benchmark` items of each benchmark of the scenario and the full outputs file."""
    (root / "benchmarks").mkdir(parents=True)
    (root / "measured" / "zeroeval").mkdir(parents=True)
    for b in load_config(SCENARIOS[scenario]).enabled_benchmarks:
        pd.read_parquet(REPO_ROOT / "data" / "benchmarks" / f"{b}.parquet").head(per_benchmark).to_parquet(
            root / "benchmarks" / f"{b}.parquet", index=False)
    shutil.copy(ZE / "zeroeval_outputs.parquet", root / "measured" / "zeroeval" / "zeroeval_outputs.parquet")
    return root


SLICE = """extends: {base}
data_dir: {data}
teacher: {{epochs: 3}}
gate: {{epochs: 3}}
grids: {{lam: {{min: 0.1, max: 20.0, n_log: 4, extra: [0.5, 2.0, 8.0]}}}}
baselines: {{params: {{mlp: {{epochs: 3}}, embedllm: {{epochs: 3}}, llmrank: {{epochs: 3}}, knn: {{k_grid: [3]}}}}}}
evaluation: {{n_resplits: 10, bootstrap: {{n_resamples: 200, n_resamples_compare: 1000}}}}
"""


@pytest.mark.slow
@pytest.mark.flow
@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_scenario_end_to_end_on_a_slice(prefect_harness, tmp_path, scenario):
    """`cr2 run -c configs/zeroeval-<scenario>.yaml` on 40 (gemma) / 60 (qwen) items per benchmark: its own warehouse,
    MEASURED labels (the slice keeps ≥ 48 training queries, LLMRank's cluster count)."""
    from cr2_flows.run import run_flow
    from cr2_warehouse.db import Warehouse

    per_benchmark = {"gemma": 40, "qwen": 60}[scenario]
    data = _slice(tmp_path / "data", scenario, per_benchmark=per_benchmark)
    cfg = tmp_path / "slice.yaml"
    cfg.write_text(SLICE.format(base=SCENARIOS[scenario], data=data))
    home = tmp_path / scenario
    out = run_flow(config_path=str(cfg), home=str(home))
    benchmarks = load_config(SCENARIOS[scenario]).enabled_benchmarks
    assert sorted(out["ingest"]["benchmarks"]) == sorted(benchmarks)
    with Warehouse(home, read_only=True) as wh:
        assert wh.scalar("SELECT count(DISTINCT source) FROM labels") == 1
        assert wh.count("labels") == 4 * per_benchmark * len(benchmarks)
        assert wh.scalar("SELECT min(label_source) FROM eval_runs") == f"measured-zeroeval-{scenario}-v1"
        ref = load_config(SCENARIOS[scenario]).ref_model_id
        assert wh.scalar("SELECT max(abs(cost_norm - 1)) FROM costs WHERE model_id = ?", [ref]) < 1e-9
        origin = wh.scalar("SELECT backend_args FROM label_runs LIMIT 1")
        ops = wh.df("SELECT * FROM operating_points WHERE method = 'cr2' AND benchmark = 'all'")
    assert "570c6269a2e4930ee06a17e713fece1ba52cf1dd" in origin and len(ops) and not ops["labels_simulated"].any()
    page = (home / "report" / "index.html").read_text(encoding="utf-8")
    assert "MEASURED LABELS" in page and f"measured-zeroeval-{scenario}-v1" in page
