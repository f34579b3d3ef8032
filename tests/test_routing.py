"""The online CR² rule (Algorithm 1) and its deferred-branch variants on hand-built cases."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.core.errors import UnknownNameError
from cr2.method.routing import deferred_choice, route

LAM = 0.5
# three queries over (m0, m1, m2, m3); teacher utilities û = p − λ c at λ = 0.5 written beside each row
PROBA = np.array([
    [0.6, 0.7, 0.9, 0.95],  # q0: û = [0.55, 0.55, 0.65, 0.45]  → best edge m2
    [0.2, 0.9, 0.5, 0.95],  # q1: û = [0.15, 0.65, 0.35, 0.45]  → best edge m1
    [0.8, 0.8, 0.8, 0.8],   # q2: û = [0.75, 0.65, 0.55, 0.30]  → m0 is teacher-optimal; best edge m1
])
COST = np.array([
    [0.1, 0.3, 0.5, 1.0],
    [0.1, 0.5, 0.3, 1.0],   # q1: m2 is its cheapest edge model (the channel made m1's link dearer)
    [0.1, 0.3, 0.5, 1.0],
])
SCORE = np.array([0.9, 0.2, 0.4], dtype=np.float32)
TAU = 0.5  # the gate accepts q0 only


def test_edge_only_defers_to_the_best_edge_model():
    d = route(SCORE, TAU, PROBA, COST, LAM, "edge-only")
    assert d.chosen.tolist() == [0, 1, 1]
    assert d.accepted_local.tolist() == [True, False, False]
    assert d.extra["gate_accept"].tolist() == [True, False, False]
    assert d.tau == TAU and np.array_equal(d.score, SCORE)


def test_inclusive_maps_a_deferred_query_back_to_m0_when_it_is_teacher_optimal():
    d = route(SCORE, TAU, PROBA, COST, LAM, "inclusive")
    assert d.chosen.tolist() == [0, 1, 0]
    assert d.accepted_local.tolist() == [True, False, True]  # m0 answers q2
    assert d.extra["gate_accept"].tolist() == [True, False, False]  # but the gate deferred it


def always_fallback_sends_deferred_queries_to_the_cheapest_edge_model():
    d = route(SCORE, TAU, PROBA, COST, LAM, "fallback")
    assert d.chosen.tolist() == [0, 2, 1]


def test_acceptance_uses_greater_or_equal_and_the_degenerate_thresholds():
    at_tau = route(np.array([0.5, 0.25, 0.75], dtype=np.float32), 0.5, PROBA, COST, LAM)
    assert at_tau.accepted_local.tolist() == [True, False, True]  # s = τ* is accepted
    assert route(SCORE, -np.inf, PROBA, COST, LAM).chosen.tolist() == [0, 0, 0]
    assert route(SCORE, np.inf, PROBA, COST, LAM).chosen.tolist() == [2, 1, 1]


def test_deferred_ties_go_to_the_cheaper_edge_model_then_the_lower_index():
    proba = np.array([[0.0, 0.75, 0.5, 0.75], [0.0, 0.75, 0.75, 0.0]])
    cost = np.array([[0.125, 0.5, 0.25, 0.5], [0.125, 0.5, 0.5, 1.0]])
    # λ = 1: q0 û = [−0.125, 0.25, 0.25, 0.25] → m2 (cheapest); q1 û = [−0.125, 0.25, 0.25, −1] → m1 (lower index)
    assert deferred_choice(proba, cost, 1.0, "edge-only").tolist() == [2, 1]
    assert deferred_choice(proba, cost, 1.0, "inclusive").tolist() == [2, 1]
    assert deferred_choice(proba, cost, 1.0, "fallback").tolist() == [2, 1]


def test_unknown_variant_suggests_the_closest():
    with pytest.raises(UnknownNameError, match="did you mean 'edge-only'"):
        route(SCORE, TAU, PROBA, COST, LAM, "edge_only")
