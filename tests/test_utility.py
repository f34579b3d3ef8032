"""Utilities, the full-information reference (tie-breaking), the teacher margin and the labels z and r."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cr2.method.utility import (
    disagree_label,
    full_information_choice,
    sign_label,
    teacher_margin,
    teacher_utility,
    utility,
)

# dyadic numbers: every utility below is exact in float64, so the ties are real ties
P_ALL_TIE = np.array([[0.5, 0.625, 0.75, 1.0]])
C_ALL_TIE = np.array([[0.25, 0.375, 0.5, 0.75]])  # û = 0.25 for every model at λ = 1


def test_utility_is_correctness_minus_weighted_cost():
    correct = np.array([[1, 0, 1, 1]], dtype=bool)
    cost = np.array([[0.25, 0.5, 0.75, 1.0]])
    np.testing.assert_array_equal(utility(correct, cost, 2.0), [[0.5, -1.0, -0.5, -1.0]])


def test_vector_lambda_adds_an_axis_after_the_queries():
    rng = np.random.default_rng(0)
    p, c = rng.random((7, 4)), rng.random((7, 4))
    lams = np.array([0.1, 1.0, 20.0])
    assert teacher_utility(p, c, lams).shape == (7, 3, 4)
    margins = teacher_margin(p, c, lams)
    choices = full_information_choice(p, c, lams)
    assert margins.shape == choices.shape == (7, 3)
    for j, lam in enumerate(lams):
        np.testing.assert_array_equal(margins[:, j], teacher_margin(p, c, lam))
        np.testing.assert_array_equal(choices[:, j], full_information_choice(p, c, lam))


def test_full_information_ties_go_to_the_cheaper_model():
    assert full_information_choice(P_ALL_TIE, C_ALL_TIE, 1.0).tolist() == [0]  # all four tie: m0 is cheapest
    # m1, m2, m3 tie at 0.25; m3 is the cheapest of them
    p = np.array([[0.25, 0.75, 0.75, 0.5]])
    c = np.array([[0.25, 0.5, 0.5, 0.25]])
    assert full_information_choice(p, c, 1.0).tolist() == [3]
    # m1 and m2 tie in utility and in cost: the lower index wins
    p = np.array([[0.0, 0.75, 0.75, 0.0]])
    c = np.array([[0.25, 0.5, 0.5, 1.0]])
    assert full_information_choice(p, c, 1.0).tolist() == [1]


def test_margin_ties_favour_the_device_model():
    margin = teacher_margin(P_ALL_TIE, C_ALL_TIE, 1.0)
    assert margin.tolist() == [0.0]
    assert sign_label(margin).tolist() == [True]  # z = 1[Δθ ≥ 0]
    assert disagree_label(P_ALL_TIE, C_ALL_TIE, 1.0).tolist() == [False]


def test_hand_computed_margin_and_labels():
    p = np.array([[0.5, 0.75, 0.875, 1.0]])
    c = np.array([[0.125, 0.25, 0.5, 1.0]])
    # λ = 0.5: û = [0.4375, 0.625, 0.625, 0.5] → Δθ = −0.1875, m_full* = m1 (ties m2, cheaper)
    assert teacher_margin(p, c, 0.5).tolist() == [-0.1875]
    assert full_information_choice(p, c, 0.5).tolist() == [1]
    # λ = 4: û = [0, −0.25, −1.125, −3] → Δθ = 0.25, m0 chosen
    assert teacher_margin(p, c, 4.0).tolist() == [0.25]
    assert disagree_label(p, c, np.array([0.5, 4.0])).tolist() == [[True, False]]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_margin_non_decreasing_in_lambda_and_labels_agree_when_device_is_cheapest(seed):
    rng = np.random.default_rng(seed)
    n = 20
    p = rng.random((n, 4))
    c = np.concatenate([rng.random((n, 1)) * 0.3, 0.3 + rng.random((n, 3))], axis=1)  # c0 ≤ every edge cost
    lams = np.sort(rng.uniform(0.1, 20.0, 6))
    margin = teacher_margin(p, c, lams)
    assert np.all(np.diff(margin, axis=1) >= -1e-12)
    np.testing.assert_array_equal(disagree_label(p, c, lams), ~sign_label(margin))


def test_rejects_mismatched_shapes_and_negative_lambda():
    with pytest.raises(ValueError, match="cost"):
        teacher_utility(np.zeros((3, 4)), np.zeros((3, 3)), 1.0)
    with pytest.raises(ValueError, match="λ"):
        teacher_margin(np.zeros((3, 4)), np.zeros((3, 4)), -1.0)
