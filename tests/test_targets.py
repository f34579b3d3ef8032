"""Operating by target (cr2.method.targets): hand-computed certification, fixed-sequence order, infeasibility, the recipe."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.config import LambdaGrid
from cr2.crc import calibrate_table
from cr2.core.errors import DataValidationError, TargetInfeasibleError
from cr2.method.targets import Outcomes, choose_by_target, operating_outcomes, select_by_target, split_for_target
from cr2.evaluation.synthetic import make_pool

LAMS = np.array([1.0, 2.0])
ALPHAS = np.array([0.01, 0.05])
TAUS = np.array([[0.9, 0.6], [0.8, 0.5]])


def _outcomes(wrong: np.ndarray, cost: np.ndarray, n: int) -> Outcomes:
    """n queries; cell (i, j) has wrong[i, j] wrong answers and constant cost[i, j]."""
    correct = np.ones((n, 2, 2), dtype=bool)
    for (i, j), w in np.ndenumerate(wrong):
        correct[:w, i, j] = False
    return Outcomes(correct=correct, cost=np.broadcast_to(cost, (n, 2, 2)).astype(float).copy(),
                    local=np.zeros((n, 2, 2), dtype=bool))


def test_accuracy_target_by_hand_follows_the_fixed_sequence():
    # N = 10, t = 0.5, δ = 0.2 → each λ at 0.1. p = P(Bin(10, 0.5) ≤ #wrong): 1 → 0.011, 2 → 0.055, 3 → 0.172
    wrong = np.array([[1, 2], [3, 0]])
    cost = np.array([[0.8, 0.5], [0.6, 0.2]])
    ch = select_by_target(_outcomes(wrong, cost, 10), LAMS, ALPHAS, TAUS, target_accuracy=0.5, delta=0.2)
    # λ = 2 fails at α = 0.01 (p = 0.172), so its cheaper α = 0.05 is never tested, though its own p is 0.001
    assert ch.certified.tolist() == [[True, True], [False, False]]
    assert (ch.lam, ch.alpha, ch.tau, ch.cost, ch.accuracy) == (1.0, 0.05, 0.6, 0.5, 0.8)
    assert ch.p_values[0, 0] == pytest.approx(11 / 1024) and ch.p_values[1, 0] == pytest.approx(176 / 1024)
    assert ch.n_certified == 2 and ch.mode == "accuracy"


def test_budget_by_hand_picks_the_most_accurate_certified_point():
    # N = 200, b = 0.7, δ = 0.2 (0.1 per λ), Hoeffding–Bentkus: mean 0.5 → 3e-8, 0.6 → 0.011, 0.8 → 1 (order: α descending)
    wrong = np.array([[0, 100], [20, 60]])  # the most accurate cell (λ=1, α=0.01) costs 0.8 > b
    cost = np.array([[0.8, 0.5], [0.6, 0.2]])
    ch = select_by_target(_outcomes(wrong, cost, 200), LAMS, ALPHAS, TAUS, budget=0.7, delta=0.2)
    assert ch.certified.tolist() == [[False, True], [True, True]]
    assert (ch.lam, ch.alpha, ch.accuracy) == (2.0, 0.01, 0.9) and ch.cost == pytest.approx(0.6)


def test_infeasible_targets_are_refused_clearly():
    out = _outcomes(np.array([[1, 2], [3, 0]]), np.array([[0.8, 0.5], [0.6, 0.2]]), 10)
    with pytest.raises(TargetInfeasibleError, match=r"accuracy ≥ 0.95 .* N=10 selection queries; the most accurate point "
                                                    r"reaches 1.000 .*\(λ=2, α=0.05\)\. Relax the target"):
        select_by_target(out, LAMS, ALPHAS, TAUS, target_accuracy=0.95, delta=0.1)
    with pytest.raises(TargetInfeasibleError, match=r"mean cost ≤ 0.1 .* the cheapest point costs 0.200"):
        select_by_target(out, LAMS, ALPHAS, TAUS, budget=0.1, delta=0.1)
    with pytest.raises(DataValidationError, match="exactly one target"):
        select_by_target(out, LAMS, ALPHAS, TAUS, target_accuracy=0.5, budget=0.5, delta=0.1)
    with pytest.raises(DataValidationError, match="cost_max"):
        select_by_target(out, LAMS, ALPHAS, TAUS, budget=0.3, delta=0.1, cost_max=0.5)


def test_operating_outcomes_follow_the_cr2_rule():
    score = np.array([[0.9, 0.2], [0.1, 0.95]], dtype=np.float32)  # [n=2, n_lam=2]
    taus = np.array([[0.5, -np.inf], [0.9, np.inf]])
    proba = np.array([[0.5, 0.9, 0.6], [0.5, 0.6, 0.9]])
    cost = np.array([[0.1, 0.4, 0.5], [0.1, 0.4, 0.5]])
    correct = np.array([[True, False, True], [False, True, False]])
    out = operating_outcomes(score, taus, LAMS, proba, cost, correct)
    # query 0 at λ=1, τ=0.5: s = 0.9 ≥ τ → m0 (correct, 0.1); query 1 at λ=1: deferred → argmax p − λc = model 2
    assert out.local[:, 0, 0].tolist() == [True, False]
    assert out.correct[:, 0, 0].tolist() == [True, False] and out.cost[:, 0, 0].tolist() == [0.1, 0.5]
    assert out.local[:, 0, 1].all() and not out.local[:, 1, 1].any()  # τ = −inf accepts all, +inf none


def test_choose_by_target_uses_thresholds_from_the_other_half():
    lams = np.array(LambdaGrid(min=0.1, max=20.0, n_log=24, extra=[0.5, 1.0, 2.0, 8.0]).values())
    alphas = [0.002, 0.005, 0.01, 0.02, 0.05]
    pool = make_pool(3000, lams, seed=5)
    ch = choose_by_target(pool.score, pool.risk, pool.proba, pool.cost, pool.correct, lams, alphas,
                          rng=np.random.default_rng(9), target_accuracy=0.65, delta=0.1)
    again = choose_by_target(pool.score, pool.risk, pool.proba, pool.cost, pool.correct, lams, alphas,
                             rng=np.random.default_rng(9), target_accuracy=0.65, delta=0.1)
    assert ch.as_dict() == again.as_dict()  # deterministic under the seed
    thr, sel = split_for_target(3000, np.random.default_rng(9))
    assert len(sel) == 1500 and not set(thr) & set(sel)
    table = calibrate_table(pool.score[thr], pool.risk[thr], lams, alphas, gate_fingerprint="-", dist_id="-", label_source="-")
    assert ch.tau == table.taus[table.lam_index(ch.lam), table.alphas.index(ch.alpha)]
    assert ch.accuracy >= 0.65 and ch.n_select == 1500
    # a budget: the most accurate certified point, within the budget on the selection half
    b = choose_by_target(pool.score, pool.risk, pool.proba, pool.cost, pool.correct, lams, alphas,
                         rng=np.random.default_rng(9), budget=0.4, delta=0.1)
    assert b.cost <= 0.4 and b.mode == "budget"
