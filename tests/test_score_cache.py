"""The per-gate score cache behind re-calibration at operator speed.

The gate's scores and the teacher's p do not depend on the channel state, so they are computed once per gate and
reused (CR2Router.remember, tasks/inputs.remember_scores); what a user relies on is that nothing changes: the thresholds and
every CR² metric are bit-identical to recomputing them, and a different gate never reads another gate's scores.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from cr2.config import GateSpec, TeacherSpec
from cr2.evaluation.sweep import Evaluation, evaluate_cr2, evaluate_table
from cr2.routers.cr2_router import CR2Router
from cr2.evaluation.synthetic import make_routing_set

TEACHER = TeacherSpec(epochs=2, batch_size=64, lr=3e-3)
GATE = GateSpec(epochs=2, batch_size=64, lr=3e-3)
LAMS = [0.0, 0.1, 0.5, 1.0, 2.0, 8.0]
ALPHAS = [0.01, 0.05]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(one_torch_thread):
    """Every test here trains with one torch thread."""


@pytest.fixture(scope="module")
def sets():
    return {name: make_routing_set(n, seed) for name, n, seed in (("train", 400, 31), ("dev", 120, 32), ("val", 300, 33),
                                                                  ("test", 200, 34))}


@pytest.fixture(scope="module")
def fitted(sets):
    return CR2Router(TEACHER, GATE, alpha=0.05).fit(sets["train"], sets["dev"])


def _fresh(fitted: CR2Router) -> CR2Router:
    return CR2Router.from_fitted(fitted.teacher_, fitted.gate_, fitted.model_ids_, alpha=0.05)


def _with_new_costs(data, seed: int):
    """The same queries under another channel: costs change, embeddings do not."""
    rng = np.random.default_rng(seed)
    cost = data.cost * rng.uniform(0.5, 2.0, size=data.cost.shape).astype(np.float32)
    cost[:, 0] = data.cost[:, 0]
    return dataclasses.replace(data, cost=cost)


def test_remembered_scores_are_the_computed_ones_and_unknown_lambdas_are_computed(fitted, sets):
    val = sets["val"]
    lams = np.asarray(LAMS[1:])
    plain, memo = _fresh(fitted), _fresh(fitted)
    memo.remember(val.embedding, lams, plain.scores(val.embedding, lams), plain.proba(val.embedding))
    np.testing.assert_array_equal(memo.scores(val.embedding, 2.0), plain.scores(val.embedding, 2.0))
    np.testing.assert_array_equal(memo.scores(val.embedding, np.asarray(LAMS)), plain.scores(val.embedding, np.asarray(LAMS)))
    np.testing.assert_array_equal(memo.scores(val.embedding, 3.0), plain.scores(val.embedding, 3.0))  # not remembered
    other = val.embedding.copy()  # another array: looked up by identity, never by shape
    np.testing.assert_array_equal(memo.scores(other, 2.0), plain.scores(other, 2.0))
    with pytest.raises(Exception, match="do not fit"):
        memo.remember(val.embedding, lams, plain.scores(val.embedding, lams)[:, :2], plain.proba(val.embedding))


def test_cached_scores_give_the_same_thresholds_and_metrics_on_new_states(fitted, sets, tmp_path, monkeypatch):
    from cr2_tasks.inputs import remember_scores

    monkeypatch.delenv("CR2_CACHE", raising=False)
    val, test = _with_new_costs(sets["val"], 1), _with_new_costs(sets["test"], 2)
    slow = _fresh(fitted)
    slow_table = slow.calibrate(val, LAMS, ALPHAS, dist_id="far@v1", label_source="synthetic")

    # the cache is filled under the old states and read under the new ones: scores do not depend on ξ
    hits = remember_scores(_fresh(fitted), tmp_path, {"val": sets["val"], "test": sets["test"]}, LAMS)
    assert hits == {"val": False, "test": False}
    fast = _fresh(fitted)
    assert remember_scores(fast, tmp_path, {"val": val, "test": test}, LAMS) == {"val": True, "test": True}
    fast_table = fast.calibrate(val, LAMS, ALPHAS, dist_id="far@v1", label_source="synthetic")
    assert fast_table.to_records() == slow_table.to_records()

    keep = np.ones(len(test), dtype=bool)
    full = Evaluation(run_id="r", test=test, proba=slow.proba(test.embedding), keep=keep)
    evaluate_cr2(full, slow, val, default_alpha=0.05, n_resplits=0, rng=np.random.default_rng(0))
    only = Evaluation(run_id="r", test=test, proba=fast.proba(test.embedding), keep=keep)
    evaluate_table(only, fast)
    want = pd.DataFrame([r for r in full.metrics if r["method"] == "cr2"])
    assert len(want) > 0
    pd.testing.assert_frame_equal(pd.DataFrame(only.metrics), want, check_exact=True)  # NaN (empty cells) equal NaN
    got_dec = [(m, lam, a, d.chosen.tolist(), d.accepted_local.tolist()) for m, lam, a, d in only.decisions]
    want_dec = [(m, lam, a, d.chosen.tolist(), d.accepted_local.tolist()) for m, lam, a, d in full.decisions if m == "cr2"]
    assert got_dec == want_dec


def test_another_gate_never_reads_these_scores(fitted, sets, tmp_path, monkeypatch):
    from cr2_tasks.inputs import remember_scores, scores_parts

    monkeypatch.delenv("CR2_CACHE", raising=False)
    other = CR2Router(TEACHER, GATE.model_copy(update={"seed": GATE.seed + 1}), alpha=0.05).fit(
        sets["train"], sets["dev"], teacher=fitted.teacher_)
    lams = np.asarray(LAMS[1:])
    assert scores_parts(fitted, sets["val"], lams) != scores_parts(other, sets["val"], lams)
    remember_scores(_fresh(fitted), tmp_path, {"val": sets["val"]}, LAMS)
    assert remember_scores(other, tmp_path, {"val": sets["val"]}, LAMS) == {"val": False}
    np.testing.assert_array_equal(other.scores(sets["val"].embedding, 2.0), other.gate_.score(sets["val"].embedding, 2.0))


def _recorded(fitted: CR2Router, folder) -> dict:
    """What the train stage records of `fitted`: each checkpoint's path and fingerprint."""
    return fitted.save_modules(folder)


def test_a_recorded_router_calibrates_from_the_cache_without_loading_a_checkpoint(fitted, sets, tmp_path, monkeypatch):
    from cr2_tasks.inputs import remember_scores

    monkeypatch.delenv("CR2_CACHE", raising=False)
    trained = _recorded(fitted, tmp_path / "artifacts")
    val = _with_new_costs(sets["val"], 3)
    want = _fresh(fitted).calibrate(val, LAMS, ALPHAS, dist_id="far@v1", label_source="synthetic")
    remember_scores(_fresh(fitted), tmp_path, {"val": sets["val"]}, LAMS)  # a run before: the cache is filled

    lazy = CR2Router.from_recorded(trained, fitted.model_ids_, alpha=0.05)
    assert (lazy.gate_fingerprint_, lazy.teacher_fingerprint_) == (fitted.gate_fingerprint_, fitted.teacher_fingerprint_)
    assert remember_scores(lazy, tmp_path, {"val": val}, LAMS) == {"val": True}
    got = lazy.calibrate(val, LAMS, ALPHAS, dist_id="far@v1", label_source="synthetic")
    assert got.to_records() == want.to_records()
    assert "gate_" not in vars(lazy) and "teacher_" not in vars(lazy)  # never loaded: the cache answered

    # what the cache does not hold loads both checkpoints, once, and answers as the fitted router does
    test = sets["test"]
    np.testing.assert_array_equal(lazy.scores(test.embedding, 2.0), fitted.scores(test.embedding, 2.0))
    assert "gate_" in vars(lazy) and "_recorded" not in vars(lazy)
    assert lazy.fingerprint() == _fresh(fitted).set_threshold_table(got).fingerprint()


def test_a_recorded_router_refuses_a_missing_or_replaced_checkpoint(fitted, sets, tmp_path):
    from cr2.core.errors import DataValidationError

    trained = _recorded(fitted, tmp_path / "artifacts")
    missing = {**trained, "gate": {**trained["gate"], "path": str(tmp_path / "gone.pt")}}
    with pytest.raises(DataValidationError, match="gate checkpoint not found"):
        CR2Router.from_recorded(missing, fitted.model_ids_)

    other = CR2Router(TEACHER, GATE.model_copy(update={"seed": GATE.seed + 1}), alpha=0.05).fit(
        sets["train"], sets["dev"], teacher=fitted.teacher_)
    replaced = {**trained, "gate": {**trained["gate"], "path": other.save_modules(tmp_path / "other")["gate"]["path"]}}
    lazy = CR2Router.from_recorded(replaced, fitted.model_ids_)  # the record names a gate the file no longer holds
    with pytest.raises(DataValidationError, match="not the one recorded"):
        lazy.scores(sets["val"].embedding, 1.0)
    with pytest.raises(AttributeError, match="no attribute 'knn_'"):
        lazy.knn_


def test_a_routers_p_hat_is_cached_by_what_it_reads_and_survives_a_channel_change_only_without_costs(tmp_path):
    from cr2_tasks.inputs import router_proba

    class Counting:
        calls = 0

        def predict_proba(self, data):
            Counting.calls += 1
            return np.full((len(data), data.n_models), 0.5)

    data = make_routing_set(40, seed=3)
    other_channel = dataclasses.replace(data, cost=data.cost * 1.5)  # another state distribution, same queries
    router = Counting()
    assert router_proba(router, "fp", tmp_path, data, reads_costs=False)[1] is False
    assert router_proba(router, "fp", tmp_path, other_channel, reads_costs=False)[1] is True  # kept: reads no cost
    assert router_proba(router, "fp", tmp_path, data)[1] is False  # a router that reads ĉ: its own entry
    assert router_proba(router, "fp", tmp_path, other_channel)[1] is False  # … recomputed on new costs
    p, hit = router_proba(router, "fp", tmp_path, other_channel)
    assert hit and Counting.calls == 3 and p.shape == (40, data.n_models)
