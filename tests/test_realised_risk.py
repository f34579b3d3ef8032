"""The realised risks on real labels (oracle disagreement, avoidable error, local accuracy), the rules
that control them (crc-oracle, crc-avoidable, ltt-oracle, ltt-avoidable) and the risk name every output carries.

The losses are pinned on a hand-computed six-query example; the rules on a synthetic pool (a slice) with a
re-split validity check; the long 500-re-split validity test is marked slow.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cr2.crc import RISKS, RULE_REGISTRY, RULES, calibrate_table, max_risky_count, rule_risk, rule_spec
from cr2.core.data import Decisions, RoutingSet
from cr2.evaluation.metrics import (avoidable_error_per_query, avoidable_error_risk, local_accuracy, local_accuracy_terms,
                         oracle_disagreement_per_query, oracle_disagreement_risk, risk_per_query)
from cr2.method.utility import avoidable_error_label, oracle_choice, oracle_disagree_label, risk_label

# ---------------------------------------------------------------- the hand-computed example
# three models: device m0, edge m1, edge m2; COST is the decision cost ĉ (what the teacher's reference uses too).
# Real-label utilities u = y − λ·ĉ at λ = 1 in the comments.
CORRECT = np.array([
    [1, 1, 1],  # q0: u = (0.8, 0.5, 0.0)   → m0            ; device right
    [0, 1, 0],  # q1: u = (−0.2, 0.5, −1.0) → m1            ; avoidable
    [0, 0, 0],  # q2: u = (−0.2, −0.5, −1)  → m0            ; nobody right
    [1, 1, 0],  # q3: u = (0.4, 0.5, 0.0)   → m1 (device dearer than m1)
    [0, 1, 1],  # q4: u = (−0.2, 0.5, 0.5)  → m1 (tie m1/m2 at equal cost → lower index) ; avoidable
    [1, 1, 0],  # q5: u = (0.5, 0.5, 0.0)   → m0 (tie m0/m1 at equal cost → the device)
], dtype=bool)
COST = np.array([[0.2, 0.5, 1.0], [0.2, 0.5, 1.0], [0.2, 0.5, 1.0], [0.6, 0.5, 1.0], [0.2, 0.5, 0.5],
                 [0.5, 0.5, 1.0]])
ACCEPTED = np.array([True, True, True, True, False, True])  # the gate's own acceptance


def _example() -> tuple[RoutingSet, Decisions]:
    n = len(CORRECT)
    data = RoutingSet(query_id=np.array([f"q{i}" for i in range(n)]), benchmark=np.array(["b"] * n),
                      embedding=np.zeros((n, 4), dtype=np.float32), correct=CORRECT, cost=np.full((n, 3), 0.3, np.float32),
                      model_ids=("m0", "m1", "m2"), cost_est=COST.astype(np.float32))
    chosen = np.where(ACCEPTED, 0, 1)
    dec = Decisions(chosen=chosen, accepted_local=chosen == 0, extra={"gate_accept": ACCEPTED})
    return data, dec


def test_labels_on_the_hand_computed_example():
    np.testing.assert_array_equal(oracle_choice(CORRECT, COST, 1.0), [0, 1, 0, 1, 1, 0])
    np.testing.assert_array_equal(oracle_disagree_label(CORRECT, COST, 1.0), [0, 1, 0, 1, 1, 0])
    # λ = 4: u(q1) = (−0.8, −1, −4) → the device; q3 = (−1.4, −1, −4) → m1; q5 ties m0/m1 at equal cost → m0
    np.testing.assert_array_equal(oracle_disagree_label(CORRECT, COST, 4.0), [0, 0, 0, 1, 0, 0])
    # λ = 0 (accuracy only): every correct model ties at 1 → the cheapest; q3's m1 is cheaper than the device
    np.testing.assert_array_equal(oracle_disagree_label(CORRECT, COST, 0.0), [0, 1, 0, 1, 1, 0])
    np.testing.assert_array_equal(avoidable_error_label(CORRECT), [0, 1, 0, 0, 1, 0])
    # the oracle is the paper's reference with the teacher replaced by the real labels: same costs, same ties
    from cr2.method.utility import disagree_label

    for lam in (0.0, 1.0, 4.0):
        np.testing.assert_array_equal(disagree_label(CORRECT.astype(float), COST, lam), oracle_disagree_label(CORRECT, COST, lam))
    # a λ vector adds the λ axis after the query axis; avoidable errors do not move with λ
    both = risk_label("oracle-disagreement", [1.0, 4.0], correct=CORRECT, decision_cost=COST)
    assert both.shape == (6, 2) and both[:, 1].tolist() == [False, False, False, True, False, False]
    av = risk_label("avoidable-error", [1.0, 4.0], correct=CORRECT)
    assert av.shape == (6, 2) and (av[:, 0] == av[:, 1]).all()
    with pytest.raises(LookupError, match="did you mean 'avoidable-error'"):
        risk_label("avoidable-errors", 1.0, correct=CORRECT)


def test_per_query_risks_and_their_means_on_the_hand_computed_example():
    data, dec = _example()
    # (a) accepted and the oracle prefers an edge model: q1, q3 (q4 is one too, but deferred)
    np.testing.assert_array_equal(oracle_disagreement_per_query(data, dec, 1.0), [0, 1, 0, 1, 0, 0])
    assert oracle_disagreement_risk(data, dec, 1.0) == pytest.approx(2 / 6)
    assert oracle_disagreement_risk(data, dec, 4.0) == pytest.approx(1 / 6)
    # (b) accepted, the device wrong and an edge model right: q1 only (q4 is deferred)
    np.testing.assert_array_equal(avoidable_error_per_query(data, dec), [0, 1, 0, 0, 0, 0])
    assert avoidable_error_risk(data, dec) == pytest.approx(1 / 6)
    # local accuracy: accepted q0, q1, q2, q3, q5; the device is right on q0, q3, q5
    assert local_accuracy(data, dec) == pytest.approx(3 / 5)
    np.testing.assert_array_equal(local_accuracy_terms(data, dec).sum(axis=0), [3, 5])
    # the oracle uses the decision cost ĉ (cost_est), not the realised cost (0.3 everywhere would give other labels)
    per = risk_per_query(data, dec, 1.0, proba=np.full((6, 3), 0.5))
    assert set(per) == {"risk", "oracle_risk", "avoidable_risk"} and all(v.shape == (6,) for v in per.values())
    np.testing.assert_array_equal(per["oracle_risk"], oracle_disagreement_per_query(data, dec, 1.0))
    # without a gate (a one-shot baseline) "accepted" is the choice of m0
    base = Decisions(chosen=np.array([0, 0, 1, 1, 1, 1]), accepted_local=np.array([1, 1, 0, 0, 0, 0], dtype=bool))
    np.testing.assert_array_equal(avoidable_error_per_query(data, base), [0, 1, 0, 0, 0, 0])
    none = Decisions(chosen=np.ones(6, dtype=int), accepted_local=np.zeros(6, dtype=bool))
    assert np.isnan(local_accuracy(data, none)) and oracle_disagreement_risk(data, none, 1.0) == 0


def test_metric_rows_carry_the_realised_risks_for_every_method():
    from cr2.evaluation.sweep import metric_rows

    data, dec = _example()
    rows = pd.DataFrame(metric_rows("r", "knn", 1.0, None, data, dec, np.full((6, 3), 0.5), np.ones(6, dtype=bool)))
    v = rows[rows.benchmark == "all"].set_index("metric")["value"]
    assert v["oracle_risk"] == pytest.approx(2 / 6) and v["avoidable_risk"] == pytest.approx(1 / 6)
    assert v["local_accuracy"] == pytest.approx(3 / 5)
    keep = np.array([1, 1, 0, 1, 1, 1], dtype=bool)  # q2 (nobody right) dropped from the paper's test set
    rows = pd.DataFrame(metric_rows("r", "knn", 1.0, None, data, dec, np.full((6, 3), 0.5), keep))
    v = rows[rows.benchmark == "all"].set_index("metric")["value"]
    assert v["oracle_risk"] == pytest.approx(2 / 5) and v["oracle_risk_all"] == pytest.approx(2 / 6)
    assert v["avoidable_risk"] == pytest.approx(1 / 5) and v["avoidable_risk_all"] == pytest.approx(1 / 6)


# ---------------------------------------------------------------- the rule registry
def test_one_rule_registry_names_the_risk_of_every_rule():
    import cr2.routers.cr2_router as cr2_router

    assert {"crc-oracle", "crc-avoidable", "ltt-oracle", "ltt-avoidable"} <= set(RULES)
    assert not hasattr(cr2_router, "CALIBRATION_RULES")  # the router reads cr2.crc's registry, it keeps no list of its own
    assert rule_risk("crc").name == "teacher-disagreement" and rule_risk("ltt-oracle").name == "oracle-disagreement"
    assert rule_risk("crc-avoidable").display == "avoidable error" and rule_risk("fixed") is None
    assert rule_spec("ltt-avoidable").needs_delta and not rule_spec("crc-oracle").needs_delta
    assert {r.risk for r in RULE_REGISTRY.values() if r.risk} == set(RISKS)
    with pytest.raises(LookupError, match="did you mean 'crc-oracle'"):
        rule_spec("crc-orcale")
    # the same count k as their procedure: only the risk label differs
    assert (max_risky_count(500, np.array([0.01, 0.05]), "crc-avoidable") == max_risky_count(500, np.array([0.01, 0.05]))).all()


def test_config_selects_the_new_rules_and_checks_delta():
    from cr2.config import CalibrationSpec
    from cr2.core.errors import InvalidValueError

    assert CalibrationSpec(rule="crc-oracle").rule == "crc-oracle"
    assert CalibrationSpec(rule="ltt-avoidable", delta=0.1).delta == 0.1
    with pytest.raises((InvalidValueError, ValueError), match="needs calibration.delta"):
        CalibrationSpec(rule="ltt-oracle")
    with pytest.raises((InvalidValueError, ValueError), match="did you mean 'crc-avoidable'"):
        CalibrationSpec(rule="crc-avoidabel")
    from cr2_cli.commands.pipeline import calibration_overrides

    assert calibration_overrides("crc-oracle", None, None, None) == {"rule": "crc-oracle", "delta": None}
    assert calibration_overrides("ltt-oracle", 0.1, None, None) == {"rule": "ltt-oracle", "delta": 0.1}


def test_new_rules_calibrate_on_their_own_labels_exactly():
    """crc-avoidable's τ on a slice is the CRC threshold of the avoidable-error label — not of the teacher's."""
    from cr2.evaluation.synthetic import make_pool

    lams = np.array([0.5, 2.0, 8.0])
    pool = make_pool(800, lams, seed=4)
    av = risk_label("avoidable-error", lams, correct=pool.correct)
    kw = dict(gate_fingerprint="fp", dist_id="d", label_source="s")
    t_av = calibrate_table(pool.score, av, lams, [0.01, 0.05], rule="crc-avoidable", **kw)
    t_crc = calibrate_table(pool.score, av, lams, [0.01, 0.05], rule="crc", **kw)
    np.testing.assert_array_equal(t_av.taus, t_crc.taus)  # same procedure on the same label
    assert t_av.rule == "crc-avoidable"
    for j, a in enumerate([0.01, 0.05]):  # exactness: (d_τ + 1)/(N + 1) ≤ α at τ, and > α one score below
        for i in range(len(lams)):
            s = pool.score[:, i].astype(np.float64)
            d = int((av[:, i] & (s >= t_av.taus[i, j])).sum())
            assert (d + 1) / (len(s) + 1) <= a
    ltt = calibrate_table(pool.score, av, lams, [0.05], rule="ltt-avoidable", delta=0.1, **kw)
    assert ltt.delta == 0.1 and (ltt.taus >= t_av.taus[:, [1]]).all()  # LTT is more conservative
    with pytest.raises(Exception, match="needs δ"):
        calibrate_table(pool.score, av, lams, [0.05], rule="ltt-oracle", **kw)


# ---------------------------------------------------------------- validity over re-splits (slice and long test)
LAMS_V = np.array([0.1, 0.5, 1.0, 2.0, 8.0, 20.0])
ALPHAS_V = [0.01, 0.02, 0.05]
NEW_RULES = ("crc-oracle", "crc-avoidable", "ltt-oracle", "ltt-avoidable")


def _realised_run(n_pool: int, n_calib: int, n_resplits: int, seed: int, lams=LAMS_V, alphas=ALPHAS_V) -> pd.DataFrame:
    from cr2.evaluation.guarantees import ResplitSpec, resplit_validity
    from cr2.evaluation.synthetic import make_pool

    pool = make_pool(n_pool, lams, seed)
    realised = {k: risk_label(k, lams, correct=pool.correct, decision_cost=pool.cost)
                for k in ("oracle-disagreement", "avoidable-error")}
    spec = ResplitSpec(n_calib=n_calib, n_resplits=n_resplits, delta=0.1, price_lams=(0.5, 2.0, 8.0))
    return pd.DataFrame(resplit_validity(pool.score, pool.risk, pool.proba, pool.cost, pool.correct, pool.benchmark,
                                         lams, alphas, spec, np.random.default_rng(seed + 1), realised=realised))


def test_new_rules_hold_on_a_slice_and_land_in_the_views(home):
    """40 re-splits of a 3,000-query pool: each new rule's promise within 3.4 SE, their price rows carry all three
    risks, and the paper's rule is seen to exceed α on the avoidable-error risk it does not control."""
    df = _realised_run(3000, 1500, 40, seed=5)
    crc = df[(df.check_name == "crc_mean_risk")]
    assert set(crc.rule) == {"crc", "crc-oracle", "crc-avoidable"}
    new = crc[crc.rule != "crc"]
    assert (new.value <= new.bound + 3.4 * new.se.fillna(0)).all(), new.nlargest(3, "value")
    ltt = df[(df.check_name == "ltt_any_violation") & df.metric.str.endswith("_pool")]
    assert {"ltt-oracle", "ltt-avoidable"} <= set(ltt.rule)
    assert (ltt.value <= 0.1 + 3 * np.sqrt(0.09 / 40) + 1e-12).all()
    price = df[(df.check_name == "price") & (df.lam == 0.5)].pivot(index="rule", columns="metric", values="value")
    assert {"teacher_risk", "oracle_risk", "avoidable_risk"} <= set(price.columns)
    assert set(NEW_RULES) <= set(price.index)
    # each rule controls its own risk at α = 0.01 (in mean over re-splits) …
    assert price.loc["crc-avoidable", "avoidable_risk"] <= 0.01 + 0.005
    # … and the paper's rule does not control the avoidable error (the synthetic pool's gate follows the teacher)
    assert price.loc["crc", "avoidable_risk"] > price.loc["crc-avoidable", "avoidable_risk"]
    from cr2_tasks.guarantees import write_guarantees
    from cr2_warehouse.db import Warehouse

    write_guarantees(home, df.to_dict("records"), "r26", "synthetic", "sim")
    with Warehouse(home) as wh:
        v = wh.df("SELECT * FROM v_guarantees WHERE run_id = 'r26' AND bound IS NOT NULL")
        p = wh.df("SELECT * FROM v_guarantee_price WHERE run_id = 'r26'")
    assert set(NEW_RULES) <= set(v.rule)
    row = p[(p.rule == "crc-oracle") & (p.lam == 0.5)].iloc[0]
    assert np.isfinite(row.crc_local_rate) and np.isfinite(row.oracle_risk) and np.isfinite(row.avoidable_risk)
    from cr2.report.validity import deployed_verdicts
    from cr2_warehouse.repository import guarantee_cells

    with Warehouse(home, read_only=True) as wh:
        vt = deployed_verdicts(guarantee_cells(wh, "r26"))
    assert vt.loc[vt.rule == "ltt-avoidable", "promise"].str.contains("avoidable error").all()


@pytest.mark.slow
def test_new_rules_keep_their_promise_over_500_resplits():
    """500 re-splits of a 20,000-query pool, 2,150 calibration queries: crc-oracle / crc-avoidable mean test risk
    ≤ α + 3.4 SE in every (λ, α) cell; ltt-oracle / ltt-avoidable share of re-splits with any λ over α (pool
    risk) ≤ δ + 3 SE; and the contrast that lets it fail: plain CRC's avoidable error exceeds α. The records are
    test_guarantees' long run (the same re-splits, computed once per test run)."""
    from tests.test_guarantees import ALPHAS, LAMS, Z_CELLS, long_resplits

    df = long_resplits()
    crc = df[(df.check_name == "crc_mean_risk") & df.rule.isin(["crc-oracle", "crc-avoidable"])]
    assert len(crc) == 2 * len(LAMS) * len(ALPHAS)
    assert (crc.value <= crc.bound + Z_CELLS * crc.se.fillna(0)).all(), crc.nlargest(3, "value")
    ltt = df[(df.check_name == "ltt_any_violation") & (df.metric == "share_any_lam_over_alpha_pool")
             & df.rule.isin(["ltt-oracle", "ltt-avoidable"])]
    assert len(ltt) == 2 * len(ALPHAS) and (ltt.value <= 0.1 + 3 * np.sqrt(0.09 / 500)).all(), ltt
    price = df[(df.check_name == "price") & (df.lam == 0.5)].pivot(index="rule", columns="metric", values="value")
    assert price.loc["crc", "avoidable_risk"] > 0.01 + 0.002


# ---------------------------------------------------------------- the name travels
def test_thresholds_export_and_runtime_carry_the_risk_name():
    import json

    from cr2.deploy.export import thresholds_json
    from cr2.deploy.runtime import DeviceThresholds
    from cr2.evaluation.synthetic import make_pool

    lams = np.array([0.5, 2.0])
    pool = make_pool(600, lams, seed=9)
    av = risk_label("avoidable-error", lams, correct=pool.correct)
    t = calibrate_table(pool.score, av, lams, [0.05], rule="crc-avoidable", gate_fingerprint="fp", dist_id="d",
                        label_source="s")
    out = json.loads(json.dumps(thresholds_json(t, [{"mode": "accuracy", "target": 0.7, "delta": 0.1, "lam": 0.5,
                                                      "alpha": 0.05, "tau": 0.5, "rule": "crc-avoidable",
                                                      "risk": "avoidable-error"}])))
    assert out["rule"] == "crc-avoidable" and out["risk"] == "avoidable-error"
    assert out["risk_display"] == "avoidable error" and "edge model" in out["risk_definition"]
    d = DeviceThresholds.from_json(out)
    assert d.rule == "crc-avoidable" and d.risk == "avoidable-error"
    assert d.target(target_accuracy=0.7)["risk"] == "avoidable-error"
    old = {k: v for k, v in out.items() if not k.startswith("risk")}  # an export that names no risk
    assert DeviceThresholds.from_json({**old, "rule": "crc"}).risk == "teacher-disagreement"
