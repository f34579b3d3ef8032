"""KNN router: predictions against a brute-force reference, dev choice of k, and the FLOPs formula."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.method.complexity import format_flops, knn_flops
from cr2.core.data import RoutingSet
from cr2.routers.knn import KNNRouter, _log_loss


def _random_set(n: int, dim: int, n_models: int, seed: int) -> RoutingSet:
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((n, dim)).astype(np.float32)  # not normalised: the router must normalise
    return RoutingSet(
        query_id=np.array([f"{seed}-{i}" for i in range(n)]),
        benchmark=np.array(["mmlu"] * n),
        embedding=emb,
        correct=rng.random((n, n_models)) < np.linspace(0.3, 0.8, n_models),
        cost=np.tile(np.linspace(0.2, 1.0, n_models), (n, 1)).astype(np.float32),
        model_ids=tuple(f"m{i}" for i in range(n_models)),
    )


def _brute_force(train: RoutingSet, query: RoutingSet, k: int) -> np.ndarray:
    """p̂ by the definition: for each query, sort all train rows by cosine similarity, average the top k."""
    out = []
    for q in query.embedding.astype(np.float64):
        cos = [float(q @ e) / (np.linalg.norm(q) * np.linalg.norm(e)) for e in train.embedding.astype(np.float64)]
        top = np.argsort(cos)[::-1][:k]
        out.append(train.correct[top].mean(axis=0))
    return np.array(out)


@pytest.mark.parametrize("k", [1, 3, 7, 40])
def test_knn_matches_brute_force(k):
    train, query = _random_set(120, 16, 3, 0), _random_set(25, 16, 3, 1)
    router = KNNRouter(k=k, max_chunk_floats=500).fit(train, query)  # 500 floats → chunks of 4 queries
    np.testing.assert_allclose(router.predict_proba(query), _brute_force(train, query, k), atol=1e-6)


def test_k_larger_than_train_averages_everything():
    train, query = _random_set(10, 8, 2, 0), _random_set(5, 8, 2, 1)
    router = KNNRouter(k=50).fit(train, query)
    assert router.k_ == 10
    np.testing.assert_allclose(router.predict_proba(query), np.tile(train.correct.mean(0), (5, 1)), atol=1e-6)


def test_k_is_chosen_by_dev_log_loss():
    train, dev = _random_set(300, 16, 3, 2), _random_set(80, 16, 3, 3)
    grid = (1, 5, 15, 60)
    router = KNNRouter(k_grid=grid).fit(train, dev)
    losses = {k: _log_loss(_brute_force(train, dev, k), dev.correct.astype(float)) for k in grid}
    assert router.dev_log_loss_ == pytest.approx(losses, abs=1e-6)  # p̂ is float32
    assert router.k_ == min(grid, key=lambda k: (losses[k], k))
    # with labels that do not depend on the embedding, averaging many neighbours is better calibrated
    assert router.k_ > 1


def test_knn_flops_formula():
    assert knn_flops(384, 18_003) == 2 * 384 * 18_003 == 13_826_304
    assert format_flops(knn_flops(384, 18_003)) == "13.826 M"  # the paper's ~18k train queries
    train, dev = _random_set(500, 384, 4, 4), _random_set(50, 384, 4, 5)
    router = KNNRouter(k=5).fit(train, dev)
    assert router.flops_per_query() == 2 * 384 * 500
    assert router.n_params() == 0
