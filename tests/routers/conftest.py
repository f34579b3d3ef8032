"""Fixtures for the router tests: a synthetic pool whose correctness depends on the embedding.

Queries live near an 8-d subspace of R^384: a latent u ~ N(0, I_8) is mapped by a random orthonormal
basis, a little isotropic noise is added and the result is L2-normalised (so cosine neighbours are
neighbours in u). Each model m answers correctly with probability σ(a·u·w_m + b_m): a per-model
logistic in a random projection of the embedding, with different directions w_m per model (so the best
model depends on the query) and biases b_m growing with model size (larger models more often correct).
The projection, the directions and the biases are fixed across splits (one task); the split seed draws
the queries, labels, benchmarks and costs.
"""
from __future__ import annotations

import numpy as np
import pytest

from cr2.core.data import EMBED_DIM, RoutingSet

MODEL_IDS = ("qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b")
BENCHMARKS = ("bbh", "gpqa", "mbpp", "mmlu")
LATENT = 8
TASK_SEED = 20250101


def _task(n_models: int, dim: int):
    rng = np.random.default_rng(TASK_SEED)
    basis, _ = np.linalg.qr(rng.standard_normal((dim, LATENT)))  # [dim, 8] orthonormal columns
    directions = rng.standard_normal((LATENT, n_models))
    directions /= np.linalg.norm(directions, axis=0, keepdims=True)
    bias = np.linspace(-0.6, 0.9, n_models)  # larger models more often correct
    return basis, directions, bias


def make_set(n: int, seed: int, n_models: int = 4, dim: int = EMBED_DIM, scale: float = 2.5) -> RoutingSet:
    """Return n synthetic queries over a pool of n_models (model_ids from MODEL_IDS, m0 cheapest)."""
    basis, directions, bias = _task(n_models, dim)
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, LATENT))
    emb = u @ basis.T / np.sqrt(LATENT) + 0.02 * rng.standard_normal((n, dim))
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    logits = scale * (u @ directions) + bias[None, :]
    correct = rng.random((n, n_models)) < 1.0 / (1.0 + np.exp(-logits))
    base = np.linspace(0.15, 1.0, n_models)
    cost = np.tile(base, (n, 1))
    cost[:, :-1] *= rng.uniform(0.8, 1.2, (n, n_models - 1))  # channel-dependent, c_ref ≡ 1
    ids = MODEL_IDS if n_models == len(MODEL_IDS) else tuple(f"m{i}" for i in range(n_models))
    return RoutingSet(
        query_id=np.array([f"s{seed}-{i}" for i in range(n)]),
        benchmark=np.array(BENCHMARKS)[rng.integers(0, len(BENCHMARKS), n)],
        embedding=emb,
        correct=correct,
        cost=cost.astype(np.float32),
        model_ids=ids,
    )


@pytest.fixture(scope="session")
def synth_splits() -> tuple[RoutingSet, RoutingSet, RoutingSet]:
    """(train, dev, test) = 3000 / 500 / 2000 synthetic queries of one task."""
    return make_set(3000, 1), make_set(500, 2), make_set(2000, 3)


@pytest.fixture(scope="session")
def tiny_splits() -> tuple[RoutingSet, RoutingSet, RoutingSet]:
    """(train, dev, test) = 400 / 100 / 150 queries: enough for the contract tests, fast to fit twice."""
    return make_set(400, 11), make_set(100, 12), make_set(150, 13)
