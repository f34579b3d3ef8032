"""simulated-irt-v2: exact accuracies with a guessing floor, structure set by the shape, recoverable by the fit."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.config import SimulatorShape, SimulatorSpec, load_config
from cr2.labels import get_label_source
from cr2.labels.fit_shape import fit_shape, pairwise_correlations, within_group_r2
from cr2.labels.simulator_v2 import SOURCE, knowledge_cut, simulate_labels_v2

SPEC = SimulatorSpec(accuracy_file="-", predictable_share=0.0, difficulty_sd=1.0, idiosyncratic_sd=0.0, output_tokens={})
MODELS = ["small", "mid", "large"]


def _shape(r: float = 0.8, rho: float = 0.3, guess: bool = True) -> SimulatorShape:
    return SimulatorShape(name="t", latent_correlation=r, predictable_share=rho, subset_share=0.0, guess_floor=guess)


def _data(n: int = 3000, seed: int = 0):
    rng = np.random.default_rng(seed)
    ids = np.array([f"q{i:05d}" for i in range(n)])
    bench = np.where(np.arange(n) % 3 == 0, "a", "b")
    emb = rng.standard_normal((n, 16))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return ids, bench, emb, np.full(n, 10)


def _sim(ids, bench, emb, n_choices, shape, targets, seed=0):
    return simulate_labels_v2(ids, bench, bench, emb, n_choices, MODELS, targets, SPEC, shape, model_params=[1, 2, 3],
                              seed=seed, with_output_tokens=False)


TARGETS = {("small", "a"): 0.35, ("mid", "a"): 0.45, ("large", "a"): 0.65,
           ("small", "b"): 0.12, ("mid", "b"): 0.30, ("large", "b"): 0.55}


def test_registry_and_source_name():
    assert get_label_source("simulated-irt-v2") is simulate_labels_v2
    assert SOURCE == "simulated-irt-v2"


@pytest.mark.parametrize("target", [0, 1, 37, 250, 499, 500])
def test_knowledge_cut_hits_the_count_exactly(target):
    rng = np.random.default_rng(target)
    latent = rng.standard_normal(500)
    lucky = rng.random(500) < 0.25
    out = knowledge_cut(latent, lucky, target)
    assert out.sum() == target
    # the knowers are a top block of the latent; below it only lucky guesses are right
    if 0 < target < len(latent) and lucky.sum() < target:
        order = np.argsort(-latent)
        k = np.flatnonzero(~out[order])[0]  # first wrong by latent
        assert out[order[:k]].all() and (out[order[k:]] <= lucky[order[k:]]).all()


def test_accuracies_exact_per_model_and_benchmark():
    ids, bench, emb, k = _data()
    lab = _sim(ids, bench, emb, k, _shape(), TARGETS)
    for j, m in enumerate(MODELS):
        for b in ("a", "b"):
            rows = bench == b
            assert abs(lab.correct[rows, j].mean() - TARGETS[(m, b)]) <= 0.5 / rows.sum() + 1e-12


def test_guessing_floor_raises_the_solvable_share_of_weak_models():
    """Near the 1/n floor most right answers are guesses, independent across models: many more questions are
    solved by someone than without the floor (v1's failure on GPQA)."""
    ids, bench, emb, _ = _data()
    four = np.full(len(ids), 4)
    weak = {(m, b): 0.3 for m in MODELS for b in ("a", "b")}
    with_floor = _sim(ids, bench, emb, four, _shape(guess=True), weak).correct.any(axis=1).mean()
    without = _sim(ids, bench, emb, four, _shape(guess=False), weak).correct.any(axis=1).mean()
    assert with_floor > without + 0.15
    assert with_floor > 1 - (1 - 0.3) ** 3 - 0.1  # close to independent guessing


def test_latent_correlation_orders_pairwise_correlations():
    ids, bench, emb, k = _data()
    lo = pairwise_correlations(_sim(ids, bench, emb, k, _shape(r=0.5), TARGETS).correct).mean()
    hi = pairwise_correlations(_sim(ids, bench, emb, k, _shape(r=0.9), TARGETS).correct).mean()
    assert hi > lo + 0.1


def test_deterministic_and_seeded():
    ids, bench, emb, k = _data(600)
    a = _sim(ids, bench, emb, k, _shape(), TARGETS)
    b = _sim(ids, bench, emb, k, _shape(), TARGETS)
    c = _sim(ids, bench, emb, k, _shape(), TARGETS, seed=1)
    assert np.array_equal(a.correct, b.correct) and not np.array_equal(a.correct, c.correct)


def test_predictable_share_is_what_a_ridge_on_the_embedding_learns():
    ids, bench, emb, k = _data()
    r2 = [within_group_r2(_sim(ids, bench, emb, k, _shape(rho=rho), TARGETS).correct.mean(axis=1), emb, bench)
          for rho in (0.0, 0.8)]
    assert r2[0] < 0.02 < 0.1 < r2[1]


@pytest.mark.parametrize("r_true, rho_true", [(0.55, 0.2), (0.85, 0.6)])
def test_fit_recovers_the_shape_it_was_simulated_with(r_true, rho_true):
    """Indirect inference on labels the simulator itself produced (another seed) finds its shape again. The
    tolerances are about 3 Monte-Carlo sd at n = 6000 (the pairwise correlations vary by ≈ 0.02 between seeds)."""
    ids, bench, emb, k = _data(6000)
    y = _sim(ids, bench, emb, k, _shape(r=r_true, rho=rho_true), TARGETS, seed=7).correct
    fit = fit_shape(y, bench, k, emb, MODELS, seeds=(0, 1), r_grid=(0.5, 0.6, 0.7, 0.8, 0.9),
                    rho_grid=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0))
    assert abs(fit.latent_correlation - r_true) <= 0.1
    assert abs(fit.predictable_share - rho_true) <= 0.15


def test_default_config_uses_v2_with_the_fitted_shape():
    cfg = load_config()
    assert cfg.labels.source == "simulated-irt-v2"
    shape = cfg.labels.simulator.shape
    assert shape is not None and shape.name == "simulated-irt-v2" and shape.fitted_on
    # v1 stays selectable by name
    assert load_config(overrides={"labels": {"source": "simulated-irt-v1"}}).labels.source == "simulated-irt-v1"


def test_bad_inputs_are_errors():
    ids, bench, emb, k = _data(50)
    with pytest.raises(ValueError, match="one entry"):
        _sim(ids, bench, emb[:10], k, _shape(), TARGETS)
    with pytest.raises(ValueError, match="no target accuracy"):
        _sim(ids, bench, emb, k, _shape(), {("small", "a"): 0.3})
