"""The sim-to-real check: hand-computed statistics, the fixed-accuracy rule, and the task on a small slice."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.studies.simcheck import fixed_accuracy_savings, label_structure

MODELS = ("dev", "e1", "big")


def _value(rows, statistic, model="", other=""):
    (hit,) = [r["value"] for r in rows if r["statistic"] == statistic and r["model"] == model and r["other"] == other]
    return hit


def test_measured_files_are_byte_identical_to_the_source():
    import hashlib

    from cr2.config import REPO_ROOT

    want = {"mmlu_pro_questions.parquet": "248c3ddc121172e4ced9eac0e785f3d13c365ea3e21273c767a5a915beeeceeb",
            "mmlu_pro_outputs.parquet": "a2e5ca88f315be9898fc44223f65af80ad6cf1b3757cc3c4dee57a1c5a34a2fc"}
    for name, digest in want.items():
        assert hashlib.sha256((REPO_ROOT / "data" / "measured" / name).read_bytes()).hexdigest() == digest, name


def test_label_structure_by_hand():
    y = np.array([[1, 1, 1],
                  [0, 1, 1],
                  [1, 0, 0],
                  [0, 0, 0],
                  [0, 0, 1]], dtype=bool)
    rows = label_structure(y, MODELS, largest="big")
    assert _value(rows, "solvable_share") == pytest.approx(4 / 5)
    assert _value(rows, "accuracy", "big") == pytest.approx(3 / 5)
    assert _value(rows, "accuracy_on_solvable", "dev") == pytest.approx(2 / 4)
    assert _value(rows, "correlation", "dev", "e1") == pytest.approx(np.corrcoef(y[:, 0], y[:, 1])[0, 1])
    assert _value(rows, "p_device_given_right", "dev", "big") == pytest.approx(1 / 3)  # rows 0, 1, 4 → dev right on 0
    assert _value(rows, "p_device_given_wrong", "dev", "big") == pytest.approx(1 / 2)  # rows 2, 3
    assert _value(rows, "p_device_given_largest_wrong", "dev", "big") == pytest.approx(1 / 2)


def test_fixed_accuracy_savings_rule():
    points = {"knn": [(0.70, 0.5), (0.80, 0.8)], "mlp": [(0.72, 0.4), (0.85, 1.0)]}
    rows = fixed_accuracy_savings(points, targets=(0.70, 0.75, 0.80, 0.85))
    got = {(r["model"], r["target"]): r["value"] for r in rows}
    assert got[("mlp", 0.70)] == pytest.approx(100 * (1 - 0.4 / 0.5))
    assert got[("mlp", 0.75)] == pytest.approx(100 * (1 - 1.0 / 0.8))  # negative: mlp needs its costly point
    assert ("mlp", 0.85) not in got  # KNN never reaches 0.85: no saving is defined


@pytest.fixture()
def small_check(tmp_path, monkeypatch):
    """The real measured files, a 240-question subsample, embeddings replaced by cached random unit vectors
    (so no encoder runs): what the task computes on top of them is real."""
    from cr2.config import load_config
    from cr2_tasks import simcheck as task_mod
    from cr2_warehouse.measured_files import read_measured_pool

    cfg = load_config()
    cfg = cfg.model_copy(update={"simcheck": cfg.simcheck.model_copy(update={
        "n_questions": 240, "structure_seeds": 2, "routing_seeds": 1, "refit": False})})
    pool = read_measured_pool(cfg.data_path, cfg.simcheck.measured_names)
    rows = task_mod.subsample_rows(pool.question_id, 240)
    rng = np.random.default_rng(0)
    vec = rng.standard_normal((len(rows), 384)).astype(np.float32)
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    monkeypatch.setenv("CR2_CACHE", str(tmp_path / "cache"))
    task_mod.store_embeddings([pool.texts[i] for i in rows], cfg, tmp_path / "home", vec)
    return cfg, tmp_path / "home"


def test_simcheck_task_structure_on_a_slice(small_check):
    from cr2_tasks.simcheck import build_simcheck_page, simcheck_task
    from cr2_warehouse.db import Warehouse

    cfg, home = small_check
    out = simcheck_task.fn(cfg, str(home), False, False)
    assert out["n_questions"] == 240
    with Warehouse(home, read_only=True) as wh:
        v = wh.df("SELECT * FROM v_simcheck WHERE run_id = ?", [out["run_id"]])
        measured_acc = wh.df("SELECT model, value FROM simcheck WHERE run_id = ? AND source = 'measured'"
                             " AND statistic = 'accuracy'", [out["run_id"]])
    assert set(v["source"]) == {"simulated-irt-v2", "simulated-irt-v1"}
    acc = v[v["statistic"] == "accuracy"]
    # the simulators match the measured accuracy of every (model, category), hence of every model, on the slice
    assert len(acc) == 8 and (acc["diff"].abs() <= 0.005).all() and acc["meets_target"].all()
    assert len(measured_acc) == 4 and (v["n_seeds"] == 2).all()
    assert {"correlation", "solvable_share", "p_device_given_largest_wrong"} <= set(v["statistic"])
    page = build_simcheck_page(str(home), out["run_id"])
    text = open(page, encoding="utf-8").read()
    assert "SIMULATED" in text and "MEASURED" in text


@pytest.mark.slow
def test_simcheck_task_routing_on_a_slice(small_check):
    from cr2_tasks.simcheck import simcheck_task
    from cr2_warehouse.db import Warehouse

    cfg, home = small_check
    out = simcheck_task.fn(cfg, str(home), False, True)
    with Warehouse(home, read_only=True) as wh:
        r = wh.df("SELECT * FROM simcheck WHERE run_id = ? AND section = 'routing'", [out["run_id"]])
    assert {"knn", "mlp", "embedllm", "llmrank", "cr2"} <= set(r["model"])
    risk = r[(r["statistic"] == "risk")]
    assert len(risk) and risk["value"].between(0, 1).all()
    assert set(r["source"]) == {"measured", "simulated-irt-v2", "simulated-irt-v1"}


def test_a_warehouse_from_before_gains_the_simcheck_tables(tmp_path):
    """Tables added to schema.sql since a warehouse was created appear when it is opened for writing."""
    from cr2_warehouse.db import Warehouse

    with Warehouse(tmp_path) as wh:
        wh.con.execute("DROP VIEW v_simcheck; DROP TABLE simcheck; DROP TABLE simcheck_runs")
        # a warehouse from before was made from other schema files: its recorded schema digest is not this one
        wh.con.execute("UPDATE meta SET value = 'from-before' WHERE key = 'schema_digest'")
    with Warehouse(tmp_path) as wh:
        assert wh.count("simcheck") == 0 and wh.count("simcheck_runs") == 0
        assert len(wh.df("SELECT * FROM v_simcheck")) == 0
