"""CR2Router: the Router protocol, fit → calibrate → route, and refusal of uncalibrated or foreign operating points."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cr2.method.checkpoint import fingerprint
from cr2.config import GateSpec, TeacherSpec
from cr2.crc import calibrate_threshold
from cr2.core.data import Router
from cr2.core.errors import FingerprintMismatchError, NotFittedError, UncalibratedOperatingPointError
from cr2.routers.cr2_router import CR2Router
from cr2.method.utility import disagree_label
from cr2.evaluation.synthetic import make_routing_set

TEACHER = TeacherSpec(epochs=2, batch_size=64, lr=3e-3)
GATE = GateSpec(epochs=2, batch_size=64, lr=3e-3)
LAMS = [0.1, 0.5, 1.0, 2.0, 8.0]
ALPHAS = [0.01, 0.05]


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(one_torch_thread):
    """Every test here trains with one torch thread (deterministic timings and results)."""


@pytest.fixture(scope="module")
def sets():
    return {name: make_routing_set(n, seed) for name, n, seed in (("train", 500, 21), ("dev", 150, 22), ("val", 400, 23), ("test", 200, 24))}


@pytest.fixture(scope="module")
def router(sets):
    r = CR2Router(TEACHER, GATE, alpha=0.05)
    assert r.fit(sets["train"], sets["dev"]) is r
    r.calibrate(sets["val"], LAMS, ALPHAS, dist_id="default@v1-test", label_source="synthetic")
    return r


def test_is_a_router_and_refuses_to_route_before_fit(sets):
    r = CR2Router(TEACHER, GATE)
    assert isinstance(r, Router) and r.name == "cr2"
    assert not hasattr(r, "teacher_")  # __init__ only stores hyperparameters
    with pytest.raises(NotFittedError, match="fit"):
        r.route(sets["test"], 1.0)
    with pytest.raises(NotFittedError):
        r.calibrate(sets["val"], LAMS, ALPHAS, dist_id="d", label_source="s")


def test_route_follows_the_calibrated_table(router, sets):
    table = router.threshold_table_
    assert table.n_calib == 400 and table.gate_fingerprint == fingerprint(router.gate_)
    assert (table.dist_id, table.label_source) == ("default@v1-test", "synthetic")
    test = sets["test"]
    d = router.route(test, 1.0)
    assert d.chosen.shape == d.accepted_local.shape == (200,)
    assert d.tau == table.tau(1.0, 0.05, router.gate_fingerprint_)
    np.testing.assert_array_equal(d.accepted_local, d.score >= d.tau)
    assert np.all(d.chosen[~d.accepted_local] >= 1)  # edge-only: a deferred query runs on an edge model
    again = router.route(test, 1.0)
    np.testing.assert_array_equal(again.chosen, d.chosen)


def test_table_thresholds_are_the_crc_thresholds_of_the_calibration_set(router, sets):
    val = sets["val"]
    scores = router.gate_.score(val.embedding, 2.0)
    risks = disagree_label(router.teacher_.predict_proba(val.embedding), val.cost, 2.0)
    assert router.threshold_table_.tau(2.0, 0.01, router.gate_fingerprint_) == calibrate_threshold(scores, risks, 0.01)


def test_off_grid_lambda_is_refused_unless_calibrated_on_demand(router, sets):
    with pytest.raises(UncalibratedOperatingPointError, match=r"λ=0.37 is not on the calibrated grid \[0.1, 0.5, 1, 2, 8\]"):
        router.route(sets["test"], 0.37)
    on_demand = CR2Router(TEACHER, GATE, alpha=0.05, on_demand_calibration=True)
    on_demand.__dict__.update({k: v for k, v in router.__dict__.items() if k.endswith("_")})  # same fitted state
    d = on_demand.route(sets["test"], 0.37)
    val = sets["val"]
    risks = disagree_label(router.teacher_.predict_proba(val.embedding), val.cost, 0.37)
    assert d.tau == calibrate_threshold(router.gate_.score(val.embedding, 0.37), risks, 0.05)  # exact, not interpolated
    assert on_demand.threshold_table_.has_lam(0.37) and not router.threshold_table_.has_lam(0.37)


def test_a_table_from_another_gate_is_refused(router, sets):
    other = CR2Router(TEACHER, GATE.model_copy(update={"seed": 7}), alpha=0.05).fit(sets["train"], sets["dev"])
    assert other.gate_fingerprint_ != router.gate_fingerprint_
    other.threshold_table_ = router.threshold_table_
    with pytest.raises(FingerprintMismatchError):
        other.route(sets["test"], 1.0)


def test_lambda_zero_defers_everything_whatever_the_rule(router, sets):
    # the accuracy-only end of the one λ sweep: the gate (FiLM on log λ) is never scored there
    val, test = sets["val"], sets["test"]
    for rule in ("crc", "empirical", "rate"):
        table = router.calibrate(val, [0.0, 1.0], [0.05, 0.1], dist_id="d", label_source="s", rule=rule)
        assert table.lams == (0.0, 1.0) and np.isinf(table.taus[0]).all() and np.isfinite(table.taus[1]).all()
    router.calibrate(val, [0.0, 1.0], [0.05, 0.1], dist_id="d", label_source="s")
    dec = router.route(test, 0.0, 0.1)
    assert not dec.accepted_local.any() and not dec.extra["gate_accept"].any()
    assert router.threshold(0.0, 0.05) == float("inf")


def test_save_load_round_trip_keeps_every_decision(router, sets, tmp_path):
    val, test = sets["val"], sets["test"]
    router.calibrate(val, [0.5, 2.0], [0.05, 0.1], dist_id="d", label_source="s")
    fp = router.save(tmp_path / "cr2")
    loaded = CR2Router.load(tmp_path / "cr2")
    assert loaded.fingerprint() == fp == router.fingerprint()
    for lam in (0.5, 2.0):
        assert np.array_equal(loaded.route(test, lam, 0.1).chosen, router.route(test, lam, 0.1).chosen)


def test_evaluation_routes_a_mondrian_table_per_group_and_reports_pooled_and_group_metrics(router, sets):
    """cr2.evaluation.sweep.evaluate_cr2 evaluates a Mondrian (per-benchmark) table — each test query at its own
    group's τ — instead of refusing it; the metric rows are pooled ('all') and per benchmark (= per group)."""
    from cr2.crc import GroupedThresholdTable
    from cr2.evaluation.sweep import Evaluation, evaluate_cr2

    import dataclasses

    def two_benchmarks(data):  # the synthetic sets are all one benchmark: split them into two
        return dataclasses.replace(data, benchmark=np.array(["bbh", "gpqa"])[np.arange(len(data)) % 2])

    val, test = two_benchmarks(sets["val"]), two_benchmarks(sets["test"])
    table = router.calibrate(val, [0.0, 0.5, 2.0], [0.1, 0.3], dist_id="d", label_source="s", groups=val.benchmark,
                             small_group="defer")
    assert isinstance(table, GroupedThresholdTable) and len(table.groups) > 1
    ev = Evaluation(run_id="r", test=test, proba=router.proba(test.embedding), keep=np.ones(len(test), dtype=bool))
    evaluate_cr2(ev, router, val, default_alpha=0.1, n_resplits=0, rng=np.random.default_rng(0), compared_rules=())
    decisions = {(m, lam, a): d for m, lam, a, d in ev.decisions}
    for lam in (0.5, 2.0):
        for alpha in (0.1, 0.3):
            taus = table.taus_for(test.benchmark, lam, alpha, router.gate_fingerprint_)
            expected = router.scores(test.embedding, lam).astype(np.float64) >= taus
            assert np.array_equal(decisions[("cr2", lam, alpha)].extra["gate_accept"], expected)
    assert not decisions[("cr2", 0.0, 0.1)].extra["gate_accept"].any()  # λ = 0 defers in every group
    rows = [r for r in ev.metrics if r["method"] == "cr2" and r["lam"] == 2.0 and r["alpha"] == 0.3
            and r["metric"] == "local_rate"]
    by = {r["benchmark"]: r["value"] for r in rows}
    assert set(by) == {"all", *table.groups}
    sizes = {g: int((test.benchmark == g).sum()) for g in table.groups}
    pooled = sum(by[g] * n for g, n in sizes.items()) / sum(sizes.values())
    assert by["all"] == pytest.approx(pooled)  # the pooled rate is the group rates weighted by group size
