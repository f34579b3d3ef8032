"""The measured scenario: MMLU-Pro questions and the authors' published outputs as MEASURED labels.

Fast: the shipped copies and their conversion, the label table of the pool, the import's rejections (warehouse
unchanged), and the whole `cr2 run` on a 70-question slice into its own warehouse. Slow: the full scenario.
"""
from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from cr2.config import REPO_ROOT, load_config
from cr2.core.errors import DataValidationError
from cr2.labels.measured import measured_label_frame, mmlu_pro_benchmark_frame
from cr2_warehouse.db import Warehouse

DATA = REPO_ROOT / "data"
MEASURED_CONFIG = REPO_ROOT / "configs" / "mmlu-pro-measured.yaml"
# data/README.md (copied from the published set's README)
SHA256 = {"mmlu_pro_questions.parquet": "248c3ddc121172e4ced9eac0e785f3d13c365ea3e21273c767a5a915beeeceeb",
          "mmlu_pro_outputs.parquet": "a2e5ca88f315be9898fc44223f65af80ad6cf1b3757cc3c4dee57a1c5a34a2fc"}
POOL_ACCURACY = {"phi-3-mini": 0.415, "llama-3.1-8b-instruct": 0.442, "mixtral-8x7b-instruct": 0.419,
                 "llama-3.1-70b-instruct": 0.628}  # the source README's mean of `correct`


@pytest.fixture(scope="module")
def questions() -> pd.DataFrame:
    return pd.read_parquet(DATA / "measured" / "mmlu_pro_questions.parquet")


@pytest.fixture(scope="module")
def outputs() -> pd.DataFrame:
    return pd.read_parquet(DATA / "measured" / "mmlu_pro_outputs.parquet")


def test_measured_files_are_byte_identical_copies():
    for name, digest in SHA256.items():
        assert hashlib.sha256((DATA / "measured" / name).read_bytes()).hexdigest() == digest, name


def test_benchmark_file_is_the_conversion_of_the_questions(questions):
    shipped = pd.read_parquet(DATA / "benchmarks" / "mmlu_pro.parquet")
    fresh = mmlu_pro_benchmark_frame(questions)
    assert len(shipped) == len(questions) == 12_032 and shipped["query_id"].is_unique
    assert shipped["subset"].nunique() == 14
    for col in ("query_id", "subset", "question", "target", "mmlu_pro_question_id"):
        assert (shipped[col].to_numpy() == fresh[col].to_numpy()).all(), col
    assert [list(c) for c in shipped["choices"]] == [json.loads(o) for o in questions["options_json"]]
    n = shipped["choices"].map(len)
    assert n.min() == 2 and n.max() == 10 and (n < 10).sum() == 2_050
    pos = np.array(["ABCDEFGHIJ".index(t) for t in shipped["target"]])
    assert (pos < n.to_numpy()).all()


def test_pool_labels_are_the_measured_correctness(questions, outputs):
    cfg = load_config(MEASURED_CONFIG)
    spec = cfg.labels.measured
    ids = dict(zip(questions["question_id"], mmlu_pro_benchmark_frame(questions)["query_id"]))
    labels = measured_label_frame(outputs, ids, spec.models, spec.chars_per_token)
    assert len(labels) == 4 * 12_032
    acc = labels.groupby("model")["correct"].mean()
    for model, expected in POOL_ACCURACY.items():
        assert acc[model] == pytest.approx(expected, abs=5e-4), model
    phi = outputs[outputs["model"] == "Phi-3-mini-4k-instruct"].set_index("question_id")
    row = labels[labels["model"] == "phi-3-mini"].iloc[0]
    qid = int(row["query_id"].rsplit("/", 1)[1])
    assert row["output_tokens"] == round(phi.at[qid, "generated_chars"] / 3.4)
    assert row["correct"] == (bool(phi.at[qid, "correct"]) and not pd.isna(phi.at[qid, "pred"]))
    unextracted = phi.index[phi["pred"].isna()]
    got = labels[labels["model"] == "phi-3-mini"].set_index("query_id")["correct"]
    assert len(unextracted) == 1_855 and not got[[ids[q] for q in unextracted]].any()  # null pred counts as wrong


def test_measured_config_pool_and_source():
    cfg = load_config(MEASURED_CONFIG)
    assert cfg.model_ids == ["phi-3-mini", "llama-3.1-8b-instruct", "mixtral-8x7b-instruct", "llama-3.1-70b-instruct"]
    assert cfg.ref_model_id == "llama-3.1-70b-instruct" and cfg.device_model.platform == "jetson-agx-orin"
    assert cfg.enabled_benchmarks == ["mmlu_pro"] and cfg.labels.source == "measured-mmlu-pro-v1"
    from cr2.core.errors import ConfigError

    with pytest.raises(ConfigError, match="labels.measured.models must name every pool model"):
        load_config(MEASURED_CONFIG, overrides={"labels": {"measured": {"models": {"gemma-7b": "gemma-7b"}}}})


def _slice(root, per_category: int):
    """data_dir with the first `per_category` questions of every category and the full outputs file."""
    import shutil

    (root / "benchmarks").mkdir(parents=True)
    (root / "measured").mkdir()
    full = pd.read_parquet(DATA / "benchmarks" / "mmlu_pro.parquet")
    full.groupby("subset", sort=False).head(per_category).to_parquet(root / "benchmarks" / "mmlu_pro.parquet", index=False)
    shutil.copy(DATA / "measured" / "mmlu_pro_outputs.parquet", root / "measured" / "mmlu_pro_outputs.parquet")
    return root


def _labels_state(home):
    with Warehouse(home, read_only=True) as wh:
        return (wh.table_fingerprint("labels", columns=("source", "query_id", "model_id", "correct", "output_tokens")),
                wh.table_fingerprint("label_runs", columns=("run_id", "source", "model_id", "backend_args")))


def test_import_rejects_unmatched_models_or_questions_and_changes_nothing(tmp_path, outputs):
    from cr2_tasks.ingest import ingest_queries
    from cr2_warehouse.labels_import import import_label_frame
    from cr2_tasks.measured import import_measured_labels_task

    data = _slice(tmp_path / "data", per_category=3)
    cfg = load_config(MEASURED_CONFIG, overrides={"data_dir": str(data)})
    home = tmp_path / "home"
    ingest_queries.fn(cfg, str(home))
    import_measured_labels_task.fn(cfg, str(home))
    before = _labels_state(home)
    with Warehouse(home, read_only=True) as wh:
        assert wh.count("labels") == 4 * 42
        origin = json.loads(wh.scalar("SELECT backend_args FROM label_runs LIMIT 1"))
    assert origin["commit"] == "f418b116db00b065c2aea046518d8fcf74d39872" and "null pred" in origin["extraction_rule"]

    renamed = outputs.assign(model=outputs["model"].replace({"Mixtral-8x7B-Instruct-v0.1": "Mixtral-renamed"}))
    renamed.to_parquet(data / "measured" / "mmlu_pro_outputs.parquet", index=False)
    with pytest.raises(DataValidationError, match="names models the outputs file does not have.*Mixtral-8x7B"):
        import_measured_labels_task.fn(cfg, str(home))
    assert _labels_state(home) == before

    first = int(pd.read_parquet(data / "benchmarks" / "mmlu_pro.parquet")["mmlu_pro_question_id"].iloc[0])
    outputs[outputs["question_id"] != first].to_parquet(data / "measured" / "mmlu_pro_outputs.parquet", index=False)
    with pytest.raises(DataValidationError, match=r"lack 1 of the 42 ingested questions"):
        import_measured_labels_task.fn(cfg, str(home))
    assert _labels_state(home) == before

    stray = pd.DataFrame({"query_id": ["mmlu_pro/math/99999"], "model": ["phi-3-mini"], "correct": [True]})
    with pytest.raises(DataValidationError, match="not in the warehouse"):
        import_label_frame(home, stray, "measured-mmlu-pro-v1", {}, "x", replace=True)
    assert _labels_state(home) == before


SLICE = """extends: {base}
data_dir: {data}
teacher: {{epochs: 3}}
gate: {{epochs: 3}}
grids: {{lam: {{min: 0.1, max: 20.0, n_log: 4, extra: [0.5, 2.0, 8.0]}}}}
baselines: {{params: {{mlp: {{epochs: 3}}, embedllm: {{epochs: 3}}, llmrank: {{epochs: 3}}, knn: {{k_grid: [3]}}}}}}
evaluation: {{n_resplits: 10, bootstrap: {{n_resamples: 200, n_resamples_compare: 1000}}}}
"""


@pytest.mark.flow
@pytest.mark.slow  # end to end: builds the measured slice (≈ 20 s); in `make test`, not in `make test-fast`
def test_measured_scenario_end_to_end_on_a_slice(measured_slice):
    """`cr2 run -c configs/mmlu-pro-measured.yaml` on 70 questions: its own warehouse, MEASURED everywhere, no Qwen3.
    The run is the test run's shared measured slice (conftest.measured_slice; the browser test opens its report)."""
    out, home = measured_slice["first"], measured_slice["home"]
    assert list(out["ingest"]["benchmarks"]) == ["mmlu_pro"] and out["ingest"]["benchmarks"]["mmlu_pro"]["queries"] == 70
    with Warehouse(home, read_only=True) as wh:
        assert wh.scalar("SELECT count(DISTINCT source) FROM labels") == 1
        assert wh.scalar("SELECT min(label_source) FROM eval_runs") == "measured-mmlu-pro-v1"
        assert wh.scalar("SELECT max(abs(cost_norm - 1)) FROM costs WHERE model_id = 'llama-3.1-70b-instruct'") < 1e-9
        ops = wh.df("SELECT * FROM operating_points WHERE method = 'cr2' AND benchmark = 'all'")
        methods = set(wh.df("SELECT DISTINCT method FROM operating_points")["method"])
    assert len(ops) and not ops["labels_simulated"].any()
    assert {"knn", "mlp", "embedllm", "llmrank", "always-phi-3-mini", "always-llama-3.1-70b-instruct"} <= methods
    import re

    page = (home / "report" / "index.html").read_text(encoding="utf-8")
    page = re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "", page)  # figures: base64 can spell anything
    assert "MEASURED LABELS" in page and "measured-mmlu-pro-v1" in page and "TIGER-AI-Lab/MMLU-Pro" in page
    assert "qwen" not in page.lower() and "SIMULATED" not in page
    for table in (home / "report" / "tables").glob("*.csv"):
        assert "qwen" not in table.read_text(encoding="utf-8").lower(), table.name


def test_route_on_a_pool_without_mmlu_costs_the_query_as_its_own_benchmark(measured_slice):
    """`cr2 route` without --benchmark on the MMLU-Pro pool (no MMLU there) routes the query as mmlu_pro, the
    config's benchmark, instead of failing on an unknown 'mmlu'."""
    from typer.testing import CliRunner

    from cr2_cli.main import app

    with Warehouse(measured_slice["home"], read_only=True) as wh:
        lam = wh.scalar("SELECT max(lam) FROM thresholds WHERE router = 'cr2'")
    result = CliRunner().invoke(app, ["route", "What is 2 + 2?", "--lam", repr(lam), "-c", str(measured_slice["cfg"]),
                                      "--home", str(measured_slice["home"])])
    assert result.exit_code == 0 and "unknown benchmark" not in result.output, result.output


@pytest.mark.slow
@pytest.mark.flow
@pytest.mark.fullsize  # `make test-full`; the slice above runs in `make test`
def test_full_measured_scenario(prefect_harness, tmp_path):
    """The whole 12,032-question scenario as `make run-measured` runs it (≈ an hour on a busy 2-core machine)."""
    from cr2_flows.run import run_flow

    home = tmp_path / "mmlu-pro"
    out = run_flow(config_path=str(MEASURED_CONFIG), home=str(home))
    assert out["ingest"]["benchmarks"]["mmlu_pro"]["queries"] == 12_032
    with Warehouse(home, read_only=True) as wh:
        acc = dict(wh.df("SELECT model_id, accuracy FROM model_summary").itertuples(index=False))
        assert wh.count("labels") == 4 * 12_032
    for model, expected in POOL_ACCURACY.items():
        assert acc[model] == pytest.approx(expected, abs=5e-4)
    assert "MEASURED LABELS" in (home / "report" / "index.html").read_text(encoding="utf-8")
