"""Certified routing for every router (cr2.routers.certify): exact and valid thresholds for an arbitrary score, the margin
score, the router's own edge choice, names, and thresholds stored under the router's name."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cr2.routers.certify import (CertifiedRouter, calibrate_certified, calibration_risks, certifiable_routers,
                         certified_decisions, certified_name, margin_score, one_shot_decisions, parse_certified_name)
from cr2.crc import RULE_REGISTRY, RULES, ThresholdTable, ltt_delta_per_lam, ltt_max_risky_count, max_risky_count
from cr2.core.data import RoutingSet
from cr2.core.errors import DataValidationError, InvalidValueError, UncalibratedOperatingPointError, UnknownNameError
from cr2.evaluation.metrics import resplit_risk
from cr2.routers.base import one_shot_choice

DELTA = 0.1


# ---------------------------------------------------------------- (a) exact and valid for an arbitrary score
def _allowed(rule: str, n: int, alpha: float, n_lam: int = 1) -> int:
    """The rule's count k of risky calibration points it may accept (−1: none, not even with d = 0)."""
    spec = RULE_REGISTRY[rule]
    if spec.needs_delta:
        return int(ltt_max_risky_count(n, np.array([alpha]), ltt_delta_per_lam(DELTA, n_lam))[0])
    return int(max_risky_count(n, np.array([alpha]), spec.procedure)[0])


@st.composite
def arbitrary_scores(draw):
    """Any finite score array: float32 or float64, many ties, ±large values, and any 0/1 risks."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    n = draw(st.integers(1, 60))
    big = float(np.finfo(dtype).max)
    pool = st.sampled_from([0.0, -0.0, 1.0, -1.0, 0.5, 1e-30, -1e30, 1e30, big, -big,
                            float(np.nextafter(dtype(0.5), dtype(1)))])
    value = st.one_of(pool, st.floats(allow_nan=False, allow_infinity=False, width=32 if dtype is np.float32 else 64))
    scores = np.array(draw(st.lists(value, min_size=n, max_size=n)), dtype=dtype)
    risks = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    alpha = draw(st.one_of(st.floats(0.0, 1.0), st.integers(0, n + 1).map(lambda k: k / (n + 1))))
    return scores, risks, alpha


@pytest.mark.filterwarnings("ignore:overflow encountered in nextafter")  # above the dtype's max is +inf: accept none
@settings(max_examples=300, deadline=None)
@given(arbitrary_scores(), st.sampled_from(RULES))
def test_every_rule_threshold_is_exact_for_an_arbitrary_score(case, rule):
    scores, risks, alpha = case
    n = len(scores)
    delta = DELTA if RULE_REGISTRY[rule].needs_delta else None
    table = calibrate_certified(scores[:, None], risks[:, None], [1.0], [alpha], fingerprint="fp", dist_id="d",
                                label_source="s", rule=rule, delta=delta)
    tau = float(table.taus[0, 0])
    assert table.score_dtype == str(scores.dtype)
    k = _allowed(rule, n, alpha)
    risky = np.sort(scores[risks])[::-1]
    accepted = risks & (scores.astype(np.float64) >= tau)
    if k < 0:
        assert tau == np.inf and not accepted.any()  # not even d = 0 qualifies: accept nothing
    elif k >= len(risky):
        assert tau == -np.inf and accepted.sum() == len(risky)  # every risky point fits in the allowance
    else:
        # τ is the next value of the scores' dtype strictly above v_{k+1}, the (k+1)-th largest risky score …
        assert tau == float(np.nextafter(risky[k], scores.dtype.type(np.inf)))
        # … so the accepted risky points are exactly those above v_{k+1}: at most k of them, and k of them unless
        # v_{k+1} is tied with a higher risky score; lowering τ by one step admits v_{k+1} and breaks the allowance
        assert accepted.sum() == int((risky > risky[k]).sum()) <= k
        below = np.nextafter(scores.dtype.type(tau), scores.dtype.type(-np.inf))
        assert int((risks & (scores >= below)).sum()) > k
    # exact in the dtype: the same acceptance whether τ is compared as float64 or in the scores' own dtype
    np.testing.assert_array_equal(scores.astype(np.float64) >= tau, scores >= scores.dtype.type(tau))


@st.composite
def exchangeable_pools(draw):
    """A pool whose score is arbitrary (float32 or float64, coarse ties) and whose risk depends on it at random."""
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    seed = draw(st.integers(0, 2**32 - 1))
    levels = draw(st.integers(3, 400))  # few levels: heavy ties
    slope = draw(st.floats(-0.8, 0.8))
    return dtype, seed, levels, slope


@settings(max_examples=6, deadline=None, derandomize=True)
@given(exchangeable_pools(), st.sampled_from(["crc", "crc-oracle", "crc-avoidable"]))
def test_crc_rules_keep_their_promise_over_random_exchangeable_splits(pool, rule):
    """E[r·1[s ≥ τ]] ≤ α for an arbitrary fixed score: 1,500 queries re-split 300 times into 500 calibration and
    1,000 test queries (random splits of one pool are exchangeable). One-sided tolerance: the mean test risk may
    exceed α by at most 3 Monte-Carlo standard errors. Derandomised: the examples are fixed, the test cannot flake."""
    dtype, seed, levels, slope = pool
    rng = np.random.default_rng(seed)
    raw = np.floor(rng.random(1_500) * levels) / levels
    scores = (raw * 1e6 - 3e5).astype(dtype)  # large magnitudes, ties at every level
    risks = rng.random(1_500) < np.clip(0.3 + slope * (raw - 0.5), 0.0, 1.0)
    alphas = np.array([0.005, 0.01, 0.02, 0.05])
    test_risk = resplit_risk(scores, risks, 500, alphas, 300, rng, rule=rule)
    mean, se = test_risk.mean(axis=0), test_risk.std(axis=0, ddof=1) / np.sqrt(len(test_risk))
    for j, alpha in enumerate(alphas):
        assert mean[j] <= alpha + 3 * se[j], f"{rule} α={alpha}: mean risk {mean[j]:.5f} > α + 3 SE ({se[j]:.5f})"


def test_a_score_undefined_at_some_lambda_defers_everything_there():
    rng = np.random.default_rng(0)
    scores = rng.random((50, 3)).astype(np.float32)
    scores[:, 0] = -np.inf  # e.g. CR²'s gate at λ = 0
    table = calibrate_certified(scores, rng.random((50, 3)) < 0.2, [0.0, 1.0, 2.0], [0.05, 0.2], fingerprint="fp",
                                dist_id="d", label_source="s", rule="crc")
    assert table.lams == (0.0, 1.0, 2.0) and np.all(table.taus[0] == np.inf) and np.isfinite(table.taus[1:]).any()
    with pytest.raises(DataValidationError, match="−∞ at every λ"):
        calibrate_certified(np.full((5, 1), -np.inf), np.zeros((5, 1), bool), [1.0], [0.1], fingerprint="fp",
                            dist_id="d", label_source="s", rule="crc")


# ---------------------------------------------------------------- (c) the margin score and the decisions
P_HAT = np.array([[0.90, 0.50, 0.70, 0.95],
                  [0.20, 0.60, 0.60, 0.10],
                  [0.50, 0.75, 0.50, 0.50]], dtype=np.float32)
COST = np.array([[0.25, 0.50, 0.75, 1.00],
                 [0.25, 0.50, 0.50, 1.00],
                 [0.00, 0.25, 0.50, 1.00]], dtype=np.float32)


def test_margin_score_equals_hand_computed_values():
    # λ = 1: û = p̂ − ĉ. Row 0: û = [0.65, 0.0, −0.05, −0.05] → 0.65 − 0.0; row 1: [−0.05, 0.1, 0.1, −0.9] → −0.15;
    # row 2: [0.5, 0.5, 0.0, −0.5] → 0.0 (a tie gives 0)
    np.testing.assert_allclose(margin_score(P_HAT, COST, 1.0), [0.65, -0.15, 0.0], atol=1e-7)
    # λ = 0: p̂_0 − max_edge p̂_m
    np.testing.assert_allclose(margin_score(P_HAT, COST, 0.0), [0.9 - 0.95, 0.2 - 0.6, 0.5 - 0.75], atol=1e-7)
    both = margin_score(P_HAT, COST, np.array([0.0, 1.0]))
    assert both.shape == (3, 2) and both.dtype == np.float64
    np.testing.assert_array_equal(both[:, 1], margin_score(P_HAT, COST, 1.0))
    # batch-independent: each row's score is the same alone as in the batch
    np.testing.assert_array_equal(margin_score(P_HAT[1:2], COST[1:2], 1.0), margin_score(P_HAT, COST, 1.0)[1:2])


def test_deferred_queries_go_to_the_routers_own_best_edge_model_ties_to_the_cheaper():
    # λ = 1, nothing accepted: row 0 edge û = [0.0, −0.05, −0.05] → m1; row 1 m1 and m2 tie at 0.1 with equal cost →
    # the lower index m1; row 2 edge û = [0.5, 0.0, −0.5] → m1
    dec = certified_decisions(margin_score(P_HAT, COST, 1.0), np.inf, P_HAT, COST, 1.0)
    np.testing.assert_array_equal(dec.chosen, [1, 1, 1])
    assert not dec.accepted_local.any() and not dec.extra["gate_accept"].any()
    # a tie in utility between two edge models of different cost goes to the cheaper one
    p = np.array([[0.1, 0.8, 0.9, 0.2]], dtype=np.float32)
    c = np.array([[0.0, 0.5, 0.6, 1.0]], dtype=np.float32)  # λ = 1: û_1 = 0.3, û_2 = 0.3 (0.9 − 0.6)
    assert margin_score(p, c, 1.0)[0] < 0
    assert certified_decisions(margin_score(p, c, 1.0), np.inf, p, c, 1.0).chosen[0] == 1
    # accept iff s ≥ τ, with the ≥: a score equal to τ is accepted
    s = margin_score(P_HAT, COST, 1.0)
    dec = certified_decisions(s, float(s[2]), P_HAT, COST, 1.0)
    np.testing.assert_array_equal(dec.chosen, [0, 1, 0])


def test_one_shot_decisions_are_the_routers_own_rule():
    for lam in (0.0, 0.5, 1.0, 4.0):
        dec = one_shot_decisions(P_HAT, COST, lam)
        np.testing.assert_array_equal(dec.chosen, one_shot_choice(P_HAT, COST, lam))
        np.testing.assert_array_equal(dec.extra["gate_accept"], dec.chosen == 0)


def _batch(n: int = 40, seed: int = 0) -> RoutingSet:
    rng = np.random.default_rng(seed)
    cost = np.tile(np.array([0.2, 0.5, 0.8, 1.0], dtype=np.float32), (n, 1))
    return RoutingSet(query_id=np.array([f"q{i}" for i in range(n)]), benchmark=np.array(["mmlu"] * n),
                      embedding=rng.standard_normal((n, 384)).astype(np.float32),
                      correct=rng.random((n, 4)) < 0.6, cost=cost, model_ids=("m0", "m1", "m2", "m3"))


class _FixedProba:
    """A fitted router stand-in: p̂ is a fixed function of the embedding."""

    name = "fixed"

    def predict_proba(self, batch):
        return (1 / (1 + np.exp(-batch.embedding[:, :4]))).astype(np.float32)

    def fingerprint(self):
        return "fixed-0001"


def test_certified_router_calibrates_routes_and_refuses_misuse():
    val, test = _batch(200, 1), _batch(50, 2)
    cert = CertifiedRouter(_FixedProba(), "fixed", rule="crc-avoidable", alpha=0.05)
    assert cert.name == "fixed@crc-avoidable"
    with pytest.raises(UncalibratedOperatingPointError, match="no threshold table"):
        cert.route(test, 1.0)
    table = cert.calibrate(val, [0.5, 1.0], [0.05, 0.1], dist_id="d", label_source="s")
    assert table.gate_fingerprint == "fixed-0001" and table.score_dtype == "float64" and table.rule == "crc-avoidable"
    dec = cert.route(test, 1.0)
    s = margin_score(cert.predict_proba(test), test.decision_cost, 1.0)
    np.testing.assert_array_equal(dec.accepted_local, s >= table.tau(1.0, 0.05, "fixed-0001"))
    with pytest.raises(UncalibratedOperatingPointError, match="not on the calibrated grid"):
        cert.route(test, 2.0)
    with pytest.raises(DataValidationError, match="calibrated on float64"):
        cert.decide(test, 1.0, score=s.astype(np.float32))
    with pytest.raises(InvalidValueError, match="teacher disagreement"):
        CertifiedRouter(_FixedProba(), "fixed", rule="crc").calibrate(val, [1.0], [0.1], dist_id="d", label_source="s")
    with pytest.raises(InvalidValueError, match="not calibrated from risks"):
        CertifiedRouter(_FixedProba(), "fixed", rule="fixed")
    other = CertifiedRouter(_FixedProba(), "fixed", rule="crc-oracle")
    with pytest.raises(InvalidValueError, match="holds rule 'crc-avoidable'"):
        other.set_threshold_table(table)


def test_teacher_disagreement_risk_uses_the_given_teacher():
    val = _batch(30, 3)
    teacher = np.full((30, 4), 0.5, dtype=np.float32)
    teacher[:, 3] = 0.99  # the teacher prefers m3 at λ = 0.1 on every query
    assert calibration_risks("crc", val, [0.1], teacher)[:, 0].all()
    np.testing.assert_array_equal(calibration_risks("crc-avoidable", val, [0.1, 1.0])[:, 0],
                                  ~val.correct[:, 0] & val.correct[:, 1:].any(axis=1))


# ---------------------------------------------------------------- (c) names
def test_certifiable_routers_are_those_with_a_score():
    names = certifiable_routers()
    assert {"cr2", "knn", "mlp", "embedllm", "llmrank", "llmrank-bench"} <= set(names)
    assert "always" not in names


@pytest.mark.parametrize("name, error, match", [
    ("knn", InvalidValueError, r"not a certified router name: write <router>@<rule>"),
    ("knn@crc@x", InvalidValueError, r"not a certified router name"),
    ("@crc", InvalidValueError, r"names no router"),
    ("knn@", InvalidValueError, r"names no rule"),
    ("knn@crc-avoidabel", UnknownNameError, r"did you mean 'crc-avoidable'"),
    ("knn@fixed", UnknownNameError, r"unknown calibration rule .*'fixed'"),
    ("knnn@crc", UnknownNameError, r"unknown router .*'knnn' — did you mean 'knn'"),
    ("always@crc", InvalidValueError, r"router 'always' cannot be certified: it predicts no p̂"),
])
def test_certified_names_are_parsed_with_clear_errors(name, error, match):
    with pytest.raises(error, match=match):
        parse_certified_name(name)


def test_certified_names_round_trip():
    parsed = parse_certified_name("llmrank-bench@crc-oracle")
    assert (parsed.router, parsed.rule) == ("llmrank-bench", "crc-oracle")
    assert str(parsed) == certified_name("llmrank-bench", "crc-oracle") == "llmrank-bench@crc-oracle"


def test_methods_rows_know_certified_names():
    from cr2.evaluation.sweep import method_rows

    rows = {r["method"]: r for r in method_rows("run", ["knn@crc-avoidable", "cr2@crc", "knn@uncertified"])}
    assert rows["knn@crc-avoidable"]["display"] == "KNN @ crc-avoidable"
    assert rows["knn@crc-avoidable"]["kind"] == "certified" and rows["knn@crc-avoidable"]["router"] == "knn"
    assert rows["cr2@crc"]["kind"] == "certified" and rows["knn@uncertified"]["kind"] == "uncertified-router"
    with pytest.raises(UnknownNameError, match="did you mean 'crc'"):
        method_rows("run", ["knn@crcc"])


# ---------------------------------------------------------------- (c) thresholds stored under the router's name
def _table(fp: str) -> ThresholdTable:
    return calibrate_certified(np.linspace(-1, 1, 40)[:, None].repeat(2, axis=1), np.arange(80).reshape(40, 2) % 3 == 0,
                               [0.5, 1.0], [0.05, 0.1], fingerprint=fp, dist_id="d", label_source="s", rule="crc-oracle")


def test_thresholds_are_stored_and_read_back_with_the_certified_routers_name(home):
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import (load_threshold_table, newest_threshold_version, read_thresholds_version,
                                      write_thresholds)

    cr2_table, knn_table = _table("gate-fp"), _table("knn-fp")
    with Warehouse(home) as wh:
        v_cr2 = write_thresholds(wh, cr2_table)
        v_knn = write_thresholds(wh, knn_table, router="knn@crc-oracle")
        back = load_threshold_table(wh, v_knn, router="knn@crc-oracle")
        np.testing.assert_array_equal(back.taus, knn_table.taus)
        assert back.gate_fingerprint == "knn-fp" and back.rule == "crc-oracle" and back.score_dtype == "float64"
        assert load_threshold_table(wh, router="knn@crc-oracle").gate_fingerprint == "knn-fp"
        # CR²'s readers never pick up a certified router's table, though it is the newest version
        assert newest_threshold_version(wh) == v_cr2 < v_knn
        assert load_threshold_table(wh).gate_fingerprint == "gate-fp"
        assert newest_threshold_version(wh, "knn@crc-oracle") == v_knn
        # CR² certified by the certify stage is a router of its own name: CR²'s deployed table stays the newest 'cr2'
        v_cert = write_thresholds(wh, _table("gate-fp"), router="cr2@crc-oracle")
        assert newest_threshold_version(wh) == v_cr2 and newest_threshold_version(wh, "cr2@crc-oracle") == v_cert
        with pytest.raises(UncalibratedOperatingPointError, match="calibrates router 'knn@crc-oracle', not 'cr2'"):
            load_threshold_table(wh, v_knn)
        with pytest.raises(UncalibratedOperatingPointError, match="no threshold table of router 'mlp@crc'"):
            newest_threshold_version(wh, "mlp@crc")
    assert read_thresholds_version(home) == v_cr2  # a running `cr2 serve` is told of CR²'s tables only


def test_schema_5_thresholds_migrate_as_cr2s(home):
    from cr2_warehouse.db import SCHEMA_VERSION, Warehouse
    from cr2_warehouse.repository import load_threshold_table, write_thresholds

    with Warehouse(home) as wh:
        version = write_thresholds(wh, _table("gate-fp"))
        wh.con.execute("ALTER TABLE thresholds DROP COLUMN router")
        wh.con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    with Warehouse(home, read_only=True) as wh:  # read as it is: every table is CR²'s
        assert wh.schema_version == "5"
        assert load_threshold_table(wh).gate_fingerprint == "gate-fp"
    with Warehouse(home) as wh:
        assert wh.schema_version == SCHEMA_VERSION == "9"
        assert wh.df("SELECT DISTINCT router FROM thresholds")["router"].tolist() == ["cr2"]
        assert load_threshold_table(wh, version).gate_fingerprint == "gate-fp"
