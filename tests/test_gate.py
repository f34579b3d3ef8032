"""Margin gate: the paper's exact size, ψ(λ), score, the loss terms (sign convention of loss_mono), determinism."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from cr2.method.checkpoint import fingerprint
from cr2.config import GateSpec
from cr2.method.gate import MarginGate, fit_gate, gate_loss, load_gate, save_gate
from cr2.method.utility import sign_label, teacher_margin
from cr2.evaluation.synthetic import make_routing_set

SMALL = GateSpec(epochs=3, batch_size=64, lr=3e-3, seed=0)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(one_torch_thread):
    """Every test here trains with one torch thread (deterministic timings and results)."""


@pytest.fixture(scope="module")
def data():
    """Train/dev/test sets with a stand-in 'teacher' p_m(x): the generator's own noisy correctness rates."""
    sets = [make_routing_set(n, seed=s) for n, s in ((600, 11), (200, 12), (400, 13))]
    rng = np.random.default_rng(0)
    proba = [np.clip(0.15 + 0.7 * s.correct + 0.1 * rng.standard_normal(s.correct.shape), 0.01, 0.99) for s in sets]
    return sets, proba


@pytest.fixture(scope="module")
def gate(data):
    (train, dev, _), (p_train, p_dev, _) = data
    return fit_gate(train, dev, p_train, p_dev, SMALL)


def test_golden_size_flops_and_initial_temperature():
    g = MarginGate()
    assert g.n_params() == 104_706  # paper's router-complexity table
    assert g.flops_per_query() == 207_104  # 207.1k
    assert g.temperature.item() == pytest.approx(0.1, rel=1e-6)


def test_psi_is_log_lambda_with_four_sine_cosine_pairs():
    g = MarginGate()
    psi = g.psi(torch.tensor([1.0, math.e]))
    assert psi.shape == (2, 9)
    np.testing.assert_allclose(psi[0].numpy(), [0, 0, 1, 0, 1, 0, 1, 0, 1], atol=1e-7)  # log 1 = 0
    expected = [1.0] + [v for f in (0.5, 1, 2, 4) for v in (math.sin(2 * math.pi * f), math.cos(2 * math.pi * f))]
    np.testing.assert_allclose(psi[1].numpy(), expected, atol=1e-6)


def test_score_is_sigmoid_of_margin_over_temperature_with_lambda_shapes():
    g = MarginGate().eval()
    emb = np.random.default_rng(0).standard_normal((10, 384)).astype(np.float32)
    s_one, s_many = g.score(emb, 1.0), g.score(emb, np.array([0.1, 1.0, 20.0]))
    assert s_one.shape == (10,) and s_many.shape == (10, 3) and s_one.dtype == np.float32
    # a query's score depends on (e, λ) only, not on the batch: CRC compares these floats exactly
    np.testing.assert_array_equal(s_many[:, 1], s_one)
    np.testing.assert_array_equal(g.score(emb[3:4], 1.0), s_one[3:4])
    margin = g.margin(emb, 1.0).astype(np.float64)
    np.testing.assert_allclose(s_one, 1 / (1 + np.exp(-margin / g.temperature.item())), rtol=1e-5)
    np.testing.assert_array_equal(g.score(emb, 1.0), s_one)  # eval mode: no dropout noise


def test_monotone_term_penalises_a_margin_that_decreases_as_lambda_grows():
    spec = GateSpec(w_sign=0.0, w_margin=0.0, w_mono=1.0)
    lam = torch.tensor([2.0, 0.5, 1.0], dtype=torch.float64)  # unsorted on purpose
    temperature = torch.tensor(1.0)
    zeros = torch.zeros(3, 2)
    # Δ̂ rising with λ: sorted rows (0.5, 1, 2) = ([0, 0], [1, 1], [2, 2]) → no penalty
    rising = torch.tensor([[2.0, 2.0], [0.0, 0.0], [1.0, 1.0]])
    assert gate_loss(rising, zeros, zeros, lam, temperature, spec)[0].item() == 0.0
    # Δ̂ falling with λ: sorted rows ([2, 0], [1, 0], [0, 0]) → hinge sums (1 + 0) + (1 + 0) over (J − 1)·B = 4
    falling = torch.tensor([[0.0, 0.0], [2.0, 0.0], [1.0, 0.0]])
    assert gate_loss(falling, zeros, zeros, lam, temperature, spec)[0].item() == pytest.approx(0.5)


def test_sign_and_huber_terms_follow_the_paper():
    pred = torch.tensor([[0.05, -0.3]])
    target = torch.tensor([[0.0, 0.2]])
    z = torch.tensor([[1.0, 1.0]])
    lam, temperature = torch.tensor([1.0]), torch.tensor(0.5)
    _, parts = gate_loss(pred, target, z, lam, temperature, GateSpec(huber_beta=0.1))
    # Huber_0.1: r = 0.05 → r²/2 = 0.00125; r = −0.5 → 0.1·(0.5 − 0.05) = 0.045
    assert parts["margin"] == pytest.approx((0.00125 + 0.045) / 2)
    bce = -np.log(1 / (1 + np.exp(-np.array([0.1, -0.6]))))  # ℓ_BCE(Δ̂/T, 1) with T = 0.5
    assert parts["sign"] == pytest.approx(bce.mean(), rel=1e-6)
    assert parts["mono"] == 0.0  # J = 1


def test_fit_is_deterministic_under_a_seed(data, gate):
    (train, dev, _), (p_train, p_dev, _) = data
    again = fit_gate(train, dev, p_train, p_dev, SMALL)
    assert fingerprint(again) == fingerprint(gate)
    other = fit_gate(train, dev, p_train, p_dev, SMALL.model_copy(update={"seed": 1}))
    assert fingerprint(other) != fingerprint(gate)


def test_fitted_gate_predicts_the_teacher_sign_on_held_out_queries(data, gate):
    (_, dev, test), (_, p_dev, p_test) = data
    losses = [h["dev_loss"] for h in gate.history_]
    assert gate.best_epoch_ == int(np.argmin(losses)) and not gate.training
    lams = np.array([0.1, 0.5, 2.0, 8.0])
    z = sign_label(teacher_margin(p_test, test.cost, lams))
    s = gate.score(test.embedding, lams)
    agree = ((s >= 0.5) == z).mean()
    assert agree > max(z.mean(), 1 - z.mean()) + 0.02  # better than the majority class


def test_fingerprint_covers_weights_and_frequencies(tmp_path, gate):
    fp = save_gate(gate, tmp_path / "gate.pt")
    loaded = load_gate(tmp_path / "gate.pt")
    assert fp == fingerprint(loaded) and len(fp) == 16
    emb = np.random.default_rng(1).standard_normal((4, 384)).astype(np.float32)
    np.testing.assert_array_equal(loaded.score(emb, 2.0), gate.score(emb, 2.0))
    torch.manual_seed(0)
    a = MarginGate()
    torch.manual_seed(0)
    b = MarginGate(film_frequencies=(0.5, 1.0, 2.0, 3.0))
    assert fingerprint(a) != fingerprint(b)  # same weights, different ψ(λ): a different score
