"""Evaluation metrics on a hand-built four-query example (every value worked out in the comments)."""
from __future__ import annotations

import numpy as np

from cr2.core.data import Decisions, RoutingSet
from cr2.evaluation.metrics import (
    accuracy,
    evaluable_mask,
    false_acceptance_risk,
    false_defer_rate,
    local_rate,
    mean_cost,
    oracle_accuracy,
)

# models: m0 (device), m1, m2 (edge; m2 = reference, c ≡ 1)
CORRECT = np.array([[1, 1, 1],    # q0: everyone right
                    [0, 1, 1],    # q1: only edge right
                    [0, 0, 0],    # q2: no model right → excluded from accuracy/cost by evaluable_mask
                    [1, 0, 1]], dtype=bool)
COST = np.array([[0.2, 0.5, 1.0],
                 [0.2, 0.5, 1.0],
                 [0.3, 0.6, 1.0],
                 [0.1, 0.4, 1.0]], dtype=np.float32)
DATA = RoutingSet(query_id=np.array(["q0", "q1", "q2", "q3"]), benchmark=np.array(["mmlu"] * 4),
                  embedding=np.zeros((4, 384), dtype=np.float32), correct=CORRECT, cost=COST, model_ids=("a", "b", "c"))
# teacher p_m(x): at λ = 1, û = p − c
PROBA = np.array([[0.9, 0.9, 0.9],    # û = 0.7, 0.4, −0.1 → m0 best: r = 0
                  [0.1, 0.9, 0.9],    # û = −0.1, 0.4, −0.1 → m1 best: r = 1
                  [0.1, 0.1, 0.1],    # û = −0.2, −0.5, −0.9 → m0: r = 0
                  [0.5, 0.9, 0.9]])   # û = 0.4, 0.5, −0.1 → m1: r = 1
CHOSEN = np.array([0, 1, 0, 0])       # the policy: q0 local, q1 → m1, q2 local, q3 local
DEC = Decisions(chosen=CHOSEN, accepted_local=CHOSEN == 0, extra={"gate_accept": CHOSEN == 0})


def test_accuracy_cost_and_local_rate():
    # chosen correctness: q0 1, q1 1, q2 0, q3 1 → 3/4
    assert accuracy(DATA, DEC) == 0.75
    # chosen costs: 0.2 + 0.5 + 0.3 + 0.1 = 1.1 → 0.275
    assert abs(mean_cost(DATA, DEC) - 0.275) < 1e-7
    assert local_rate(DEC) == 0.75


def test_risk_and_false_defers_against_the_teacher():
    # r = [0, 1, 0, 1]; accepted = [1, 0, 1, 1] → false accepts: q3 only → 1/4
    assert false_acceptance_risk(PROBA, DATA, DEC, 1.0) == 0.25
    # deferred = [0, 1, 0, 0] with r = 0: none → 0; deferring q0 instead would be one false defer
    assert false_defer_rate(PROBA, DATA, DEC, 1.0) == 0.0
    other = Decisions(chosen=np.array([1, 1, 0, 0]), accepted_local=np.array([False, False, True, True]),
                      extra={"gate_accept": np.array([False, False, True, True])})
    assert false_defer_rate(PROBA, DATA, other, 1.0) == 0.25


def test_unsolvable_queries_are_excluded_as_in_the_paper():
    keep = evaluable_mask(DATA)
    assert keep.tolist() == [True, True, False, True] and oracle_accuracy(DATA) == 0.75
    sub = DATA.subset(keep)
    dec = Decisions(chosen=CHOSEN[keep], accepted_local=CHOSEN[keep] == 0)
    # over q0, q1, q3: all three chosen answers right; cost (0.2 + 0.5 + 0.1)/3
    assert accuracy(sub, dec) == 1.0 and abs(mean_cost(sub, dec) - 0.8 / 3) < 1e-7


def test_labels_computed_once_on_the_whole_set_equal_those_of_each_subset():
    from cr2.evaluation.metrics import PER_QUERY_METRICS, RISK_LABELS, MetricInputs

    rng = np.random.default_rng(3)
    n = 300
    correct = rng.random((n, 3)) < 0.5
    cost = np.column_stack([rng.random(n) * 0.5, 0.3 + rng.random(n) * 0.5, np.ones(n)]).astype(np.float32)
    data = RoutingSet(query_id=np.array([f"q{i}" for i in range(n)]), benchmark=np.array(["a", "b"] * (n // 2)),
                      embedding=np.zeros((n, 8), dtype=np.float32), correct=correct, cost=cost, model_ids=("a", "b", "c"))
    proba = rng.random((n, 3))
    chosen = rng.integers(0, 3, n)
    dec = Decisions(chosen=chosen, accepted_local=chosen == 0, extra={"gate_accept": rng.random(n) < 0.5})
    idx = np.flatnonzero(rng.random(n) < 0.4)
    for lam in (0.0, 0.5, 2.0):
        whole = MetricInputs(data, proba, lam)
        sliced, fresh = whole.subset(idx), MetricInputs(data.subset(idx), proba[idx], lam)
        for name in RISK_LABELS:
            np.testing.assert_array_equal(sliced.label(name), fresh.label(name))
        sub_dec = Decisions(chosen=chosen[idx], accepted_local=chosen[idx] == 0,
                            extra={"gate_accept": dec.extra["gate_accept"][idx]})
        for m in PER_QUERY_METRICS.values():
            np.testing.assert_array_equal(m.values(sliced, sub_dec), m.values(fresh, sub_dec))
    # the public per-query functions are the registry's values
    assert false_acceptance_risk(PROBA, DATA, DEC, 1.0) == float(np.mean(PER_QUERY_METRICS["risk"].values(
        MetricInputs(DATA, PROBA, 1.0), DEC)))
