"""A risk is one entry of cr2.crc.RISKS: its label function, inputs, metric names and words. risk_label, the
guarantee study's metrics, the evaluation's test metrics and the figures' rule colours all read that entry."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from cr2.core.errors import InvalidValueError, UnknownNameError
from cr2.crc import RISKS, RULE_REGISTRY, risk_spec
from cr2.method.utility import avoidable_error_label, disagree_label, oracle_disagree_label, risk_label

RNG = np.random.default_rng(0)
PROBA = RNG.uniform(size=(40, 3))
COST = np.column_stack([np.zeros(40), RNG.uniform(0.2, 1.0, size=(40, 2))])
CORRECT = RNG.uniform(size=(40, 3)) > 0.5
LAMS = np.array([0.1, 0.5, 2.0])


def test_each_risk_entry_names_a_label_function_whose_arguments_are_its_inputs():
    for spec in RISKS.values():
        params = list(inspect.signature(spec.label_function()).parameters)
        assert params[:len(spec.inputs)] == [{"decision_cost": "cost"}.get(k, k) for k in spec.inputs], spec.name
        assert ("lam" in params) == spec.per_lam, spec.name


def test_risk_label_computes_each_risk_with_the_function_of_its_entry():
    np.testing.assert_array_equal(risk_label("teacher-disagreement", LAMS, proba=PROBA, decision_cost=COST),
                                  disagree_label(PROBA, COST, LAMS))
    np.testing.assert_array_equal(risk_label("oracle-disagreement", LAMS, correct=CORRECT, decision_cost=COST),
                                  oracle_disagree_label(CORRECT, COST, LAMS))
    # λ-free: computed once, the same column at every λ
    out = risk_label("avoidable-error", LAMS, correct=CORRECT)
    assert out.shape == (40, 3)
    assert (out == avoidable_error_label(CORRECT)[:, None]).all()


def test_a_missing_input_is_named_and_an_unknown_risk_gets_a_suggestion():
    with pytest.raises(InvalidValueError, match="needs the teacher's proba"):
        risk_label("teacher-disagreement", LAMS, decision_cost=COST)
    with pytest.raises(InvalidValueError, match="needs the decision cost"):
        risk_label("oracle-disagreement", LAMS, correct=CORRECT)
    with pytest.raises(UnknownNameError, match="did you mean 'avoidable-error'"):
        risk_spec("avoidable-eror")


def test_each_risks_metrics_are_the_ones_the_evaluation_and_the_guarantee_study_record():
    from cr2.evaluation.guarantees import _metric
    from cr2.evaluation.metrics import PER_QUERY_METRICS, RISK_ALL_METRICS

    assert {k: _metric(k) for k in RISKS} == {"teacher-disagreement": "teacher_risk",
                                              "oracle-disagreement": "oracle_risk", "avoidable-error": "avoidable_risk"}
    assert RISK_ALL_METRICS == {"teacher-disagreement": "risk_all", "oracle-disagreement": "oracle_risk_all",
                                "avoidable-error": "avoidable_risk_all"}
    assert all(m in PER_QUERY_METRICS for m in RISK_ALL_METRICS.values())


def test_a_rules_display_and_colour_come_from_the_registry():
    from cr2.evaluation.sweep import method_rows

    rows = {r["method"]: r for r in method_rows("run", ["cr2-crc-oracle", "cr2-ltt-avoidable", "cr2-ltt"])}
    assert rows["cr2-crc-oracle"]["display"] == "CR² crc-oracle (oracle disagreement on real labels)"
    assert rows["cr2-crc-oracle"]["colour"] == RULE_REGISTRY["crc-oracle"].colour == "#d35400"
    assert rows["cr2-ltt-avoidable"]["colour"] == "#a569bd"
    assert rows["cr2-ltt"]["colour"] == "#16a085"
