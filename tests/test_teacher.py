"""Teacher selector: the paper's exact size, its loss, deterministic fitting, checkpoint selection, persistence."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from cr2.method.checkpoint import fingerprint
from cr2.config import TeacherSpec
from cr2.core.errors import DataValidationError
from cr2.method.gate import MarginGate, save_gate
from cr2.method.teacher import TeacherSelector, _dataset_loss, fit_teacher, load_teacher, save_teacher, teacher_loss
from cr2.evaluation.synthetic import make_routing_set

SMALL = TeacherSpec(epochs=3, batch_size=64, lr=3e-3, seed=0)


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread(one_torch_thread):
    """Every test here trains with one torch thread (deterministic timings and results)."""


@pytest.fixture(scope="module")
def data():
    return make_routing_set(600, seed=1), make_routing_set(200, seed=2), make_routing_set(400, seed=3)


@pytest.fixture(scope="module")
def teacher(data):
    train, dev, _ = data
    return fit_teacher(train, dev, SMALL)


def test_golden_size_and_flops():
    t = TeacherSelector(n_models=4)
    assert t.n_params() == 398_340  # paper's router-complexity table
    assert t.flops_per_query() == 789_504  # 789.5k


def test_loss_matches_the_paper_on_a_hand_example():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0], [0.5, -0.5, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    correct = torch.tensor([[1.0, 0.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 1.0]])
    bce = F.binary_cross_entropy_with_logits(logits, correct)
    sp = F.softplus
    # row 0: P+ = {0, 2}, P- = {1, 3}; pairs give softplus(ℓ- − ℓ+) = sp(1), sp(3), sp(−1), sp(1)
    rank0 = (sp(torch.tensor(1.0)) * 2 + sp(torch.tensor(3.0)) + sp(torch.tensor(-1.0))) / 4
    # row 1 is all-correct: skipped; row 2: P+ = {3}, P- = {0, 1, 2}, all gaps 0 → sp(0)
    rank2 = sp(torch.tensor(0.0))
    expected = 1.0 * bce + 0.5 * (rank0 + rank2) / 2
    assert torch.allclose(teacher_loss(logits, correct, w_cls=1.0, w_rank=0.5), expected)
    # a batch with no mixed query has L_rank = 0
    assert torch.allclose(teacher_loss(logits[1:2], correct[1:2]), F.binary_cross_entropy_with_logits(logits[1:2], correct[1:2]))


def test_fit_is_deterministic_under_a_seed_and_leaves_global_torch_state_alone(data, teacher):
    train, dev, _ = data
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    again = fit_teacher(train, dev, SMALL)
    assert fingerprint(again) == fingerprint(teacher)
    assert torch.get_num_threads() == threads
    assert torch.equal(torch.rand(3), expected)  # the fit neither used nor consumed the caller's RNG stream
    other = fit_teacher(train, dev, SMALL.model_copy(update={"seed": 1}))
    assert fingerprint(other) != fingerprint(teacher)


def test_returns_the_checkpoint_with_the_best_dev_loss_frozen(data, teacher):
    train, dev, _ = data
    losses = [h["dev_loss"] for h in teacher.history_]
    assert len(losses) == SMALL.epochs and teacher.best_epoch_ == int(np.argmin(losses))
    x = torch.from_numpy(dev.embedding)
    y = torch.from_numpy(dev.correct.astype(np.float32))
    assert _dataset_loss(teacher, x, y, SMALL) == pytest.approx(min(losses), rel=1e-6)
    assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())


def test_predicted_correctness_ranks_held_out_queries(data, teacher):
    _, _, test = data
    p = teacher.predict_proba(test.embedding)
    assert p.shape == (400, 4) and p.dtype == np.float32 and np.all((p > 0) & (p < 1))
    np.testing.assert_array_equal(teacher.predict_proba(test.embedding[7:9]), p[7:9])  # batch-invariant
    # the probability a correct (query, model) pair outranks an incorrect one (AUC) beats chance clearly
    pos, neg = p[test.correct], p[~test.correct]
    auc = (pos[:, None] > neg[None, :]).mean()
    assert auc > 0.7


def test_save_load_round_trip(tmp_path, teacher):
    path = tmp_path / "teacher.pt"
    fp = save_teacher(teacher, path)
    loaded = load_teacher(path)
    assert fp == fingerprint(loaded) == fingerprint(teacher)
    emb = np.random.default_rng(0).standard_normal((5, 384)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict_proba(emb), teacher.predict_proba(emb))
    save_gate(MarginGate(), tmp_path / "gate.pt")
    with pytest.raises(DataValidationError, match="expected a teacher checkpoint"):
        load_teacher(tmp_path / "gate.pt")
