"""KNN router (RouterBench style, Hu et al. 2024): p̂_m(x) = mean correctness of the k nearest train queries.

Neighbours are found by cosine similarity over the L2-normalised embeddings, i.e. a dot product with
every training vector: one matrix product per chunk of queries (chunks bound the [chunk, n_train]
similarity matrix to `max_chunk_floats` entries). The per-query cost is therefore 2·d·n_train FLOPs
(cr2.complexity.knn_flops; 13.826 M for d = 384 and ≈ 18k train queries in the paper). Selecting the
k largest similarities is a read-out and is not counted, like argmax.

k [cr2 decision]: unless given, k is chosen on the dev set from `k_grid` by the dev log-loss of p̂
(mean binary cross-entropy over all (query, model) pairs, p̂ clipped to [ε, 1 − ε] with ε = 1e-3, so
that an overconfident 0/1 average of few neighbours is penalised but stays finite); ties → smaller k.
Log-loss is a proper scoring rule, so it rewards calibrated p̂ — what the cost-weighted argmax needs.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cr2.complexity import knn_flops
from cr2.data import RoutingSet
from cr2.errors import DataValidationError
from cr2.routers.base import OneShotRouter, l2_normalise

LOGLOSS_EPS = 1e-3


class KNNRouter(OneShotRouter):
    """Cosine k-NN correctness estimator; route() takes argmax p̂ − λ·c over the pool."""

    name = "knn"

    def __init__(
        self,
        k: int | None = None,
        k_grid: Sequence[int] = (5, 10, 20, 50, 100),
        max_chunk_floats: int = 1 << 24,
    ) -> None:
        self.k = k
        self.k_grid = k_grid
        self.max_chunk_floats = max_chunk_floats

    def _fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        self.train_embedding_ = l2_normalise(train.embedding)
        self.train_correct_ = np.asarray(train.correct, dtype=np.float32)
        n_train = len(train)
        if self.k is not None:
            if int(self.k) < 1:
                raise DataValidationError(f"KNNRouter.k must be ≥ 1, got {self.k}")
            self.k_ = min(int(self.k), n_train)
            self.dev_log_loss_ = {}
            return
        grid = sorted({min(int(k), n_train) for k in self.k_grid if int(k) >= 1})
        if not grid:
            raise DataValidationError(f"KNNRouter.k_grid has no k ≥ 1: {list(self.k_grid)}")
        p_by_k = self._proba_for_ks(l2_normalise(dev.embedding), grid)
        y = np.asarray(dev.correct, dtype=np.float64)
        losses = {k: _log_loss(p_by_k[j], y) for j, k in enumerate(grid)}
        self.dev_log_loss_ = losses
        self.k_ = min(grid, key=lambda k: (losses[k], k))

    # ------------------------------------------------------------ neighbour search
    def _chunk_rows(self) -> int:
        return max(1, int(self.max_chunk_floats) // max(len(self.train_embedding_), 1))

    def _proba_for_ks(self, query: np.ndarray, ks: Sequence[int]) -> np.ndarray:
        """Return p̂ for each k in `ks` at once, float32 [len(ks), n, M] (one search up to max(ks))."""
        k_max = max(ks)
        n, n_models = len(query), self.train_correct_.shape[1]
        out = np.empty((len(ks), n, n_models), dtype=np.float32)
        step = self._chunk_rows()
        for start in range(0, n, step):
            sims = query[start : start + step] @ self.train_embedding_.T  # [c, n_train]
            top = _top_k_sorted(sims, k_max)  # [c, k_max], most similar first
            cum = np.cumsum(self.train_correct_[top], axis=1, dtype=np.float64)  # [c, k_max, M]
            for j, k in enumerate(ks):
                out[j, start : start + len(top)] = cum[:, k - 1, :] / k
        return out

    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """Return p̂_m(x) = mean y_m over the k_ most cosine-similar train queries, float32 [n, M]."""
        self._check_batch(batch)
        query = l2_normalise(batch.embedding)
        k = self.k_
        out = np.empty((len(batch), self.train_correct_.shape[1]), dtype=np.float32)
        step = self._chunk_rows()
        for start in range(0, len(query), step):
            sims = query[start : start + step] @ self.train_embedding_.T  # [c, n_train]
            if k < sims.shape[1]:
                top = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            else:
                top = np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
            out[start : start + len(sims)] = self.train_correct_[top].mean(axis=1)
        return out

    # ------------------------------------------------------------ complexity and state
    def n_params(self) -> int:
        """Return 0: KNN is non-parametric (the paper's table prints '—'); its state is the train set."""
        return 0

    def flops_per_query(self) -> int:
        """Return 2·d·n_train: one dot product with every stored training embedding."""
        self._check_fitted()
        n_train, dim = self.train_embedding_.shape
        return knn_flops(dim, n_train)

    def _state_arrays(self) -> dict[str, np.ndarray]:
        return {"train_embedding": self.train_embedding_, "train_correct": self.train_correct_}

    def _state_extra(self) -> dict[str, Any]:
        return {"k": int(self.k_), "dev_log_loss": {str(k): float(v) for k, v in self.dev_log_loss_.items()}}

    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.train_embedding_ = np.asarray(arrays["train_embedding"], dtype=np.float32)
        self.train_correct_ = np.asarray(arrays["train_correct"], dtype=np.float32)
        self.k_ = int(extra["k"])
        self.dev_log_loss_ = {int(k): float(v) for k, v in extra["dev_log_loss"].items()}


def _top_k_sorted(sims: np.ndarray, k: int) -> np.ndarray:
    """Return the column indices of the k largest entries of each row, most similar first, [rows, k]."""
    if k < sims.shape[1]:
        part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
    order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def _log_loss(p_hat: np.ndarray, y: np.ndarray) -> float:
    """Return the mean binary cross-entropy of p̂ (clipped to [ε, 1 − ε]) against y over all entries."""
    p = np.clip(p_hat.astype(np.float64), LOGLOSS_EPS, 1.0 - LOGLOSS_EPS)
    return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log1p(-p)))
