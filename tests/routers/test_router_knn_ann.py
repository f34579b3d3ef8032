"""KNN router with an approximate index (faiss IVF / HNSW): high recall against the exact search, saved state."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.core.errors import DataValidationError
from cr2.routers.base import l2_normalise
from cr2.routers.knn import KNNRouter
from cr2.evaluation.synthetic import make_routing_set

pytest.importorskip("faiss")


@pytest.fixture(scope="module")
def data():
    return make_routing_set(4000, seed=1), make_routing_set(400, seed=2), make_routing_set(300, seed=3)


@pytest.fixture(scope="module")
def exact(data):
    train, dev, _ = data
    return KNNRouter(k=10).fit(train, dev)


@pytest.mark.parametrize("index", ["hnsw", "ivf"])
def test_ann_recall_against_the_exact_neighbours(data, exact, index):
    train, dev, test = data
    ann = KNNRouter(k=10, index=index).fit(train, dev)
    q = l2_normalise(test.embedding)
    sims = q @ exact.train_embedding_.T
    truth = np.argsort(-sims, axis=1)[:, :10]
    got = ann.ann_neighbours(q, 10)
    assert got.shape == (len(test), 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(truth, got)])
    assert recall >= 0.9, recall
    # p̂ is the mean correctness of the neighbours found: close to exact KNN's
    assert np.abs(ann.predict_proba(test) - exact.predict_proba(test)).mean() < 0.05
    assert 0 < ann.flops_per_query() < exact.flops_per_query()  # measured distance computations, fewer than all


def test_ann_router_round_trips_through_save_and_load(data, tmp_path):
    train, dev, test = data
    ann = KNNRouter(k=5, index="hnsw").fit(train, dev)
    fp = ann.save(tmp_path / "knn.npz")
    back = KNNRouter.load(tmp_path / "knn.npz")
    assert back.fingerprint() == fp and back.index == "hnsw"
    assert np.array_equal(back.predict_proba(test), ann.predict_proba(test))


def test_exact_stays_the_default_and_its_state_is_unchanged(data, exact):
    train, dev, _ = data
    assert KNNRouter().index == "exact"
    assert set(exact._state_arrays()) == {"train_embedding", "train_correct"}  # same fingerprint as before
    with pytest.raises(DataValidationError, match="index must be one of"):
        KNNRouter(index="lsh").fit(train, dev)


def test_k_is_chosen_on_dev_with_the_ann_index_too(data):
    train, dev, _ = data
    ann = KNNRouter(index="ivf", k_grid=(5, 20)).fit(train, dev)
    assert ann.k_ in (5, 20) and set(ann.dev_log_loss_) == {5, 20}
