"""KNN router (RouterBench style, Hu et al. 2024): p̂_m(x) = mean correctness of the k nearest train queries.

Neighbours are found by cosine similarity over the L2-normalised embeddings, i.e. a dot product with
every training vector: one matrix product per chunk of queries (chunks bound the [chunk, n_train]
similarity matrix to `max_chunk_floats` entries). The per-query cost is therefore 2·d·n_train FLOPs
(cr2.method.complexity.knn_flops; 13.826 M for d = 384 and ≈ 18k train queries in the paper). Selecting the
k largest similarities is a read-out and is not counted, like argmax.

k [cr2 decision]: unless given, k is chosen on the dev set from `k_grid` by the dev log-loss of p̂
(mean binary cross-entropy over all (query, model) pairs, p̂ clipped to [ε, 1 − ε] with ε = 1e-3, so
that an overconfident 0/1 average of few neighbours is penalised but stays finite); ties → smaller k.
Log-loss is a proper scoring rule, so it rewards calibrated p̂ — what the cost-weighted argmax needs.

weights [cr2 decision]: "uniform" (default) averages the k neighbours' labels. "cosine" (the catalogue's
`knn-distance`) weighs neighbour i by w_i = max(cos_i, 0): p̂_m = Σ w_i y_im / Σ w_i over the k neighbours, the
plain mean where all k weights are 0; k is chosen on dev by the same log-loss rule with the same weights. The
similarities are recomputed per query from the stored unit vectors of the chosen neighbours (one dot product each,
the same arithmetic whatever the batch, where the search's matrix product may round a row differently in another
batch shape) and the weighted sums taken in float64 in train-index order, so a query's p̂ depends on its neighbours
alone, not on the batch it came in; this adds 2·k·(d + M + 1) + M FLOPs per query (the k similarities, the weighted
sums per model and of the weights, the M divisions).

index [cr2 decision]: "exact" (default) is the brute-force search above. "hnsw" and "ivf" (opt-in, for
large train sets) find approximate neighbours with faiss over the same vectors (inner product = cosine on
unit vectors): an HNSW graph (hnsw_m, hnsw_ef_construction, hnsw_ef_search), or an inverted file of
nlist = √n k-means lists of which ivf_nprobe are scanned (cheap to build: one k-means and one assignment
pass, where HNSW inserts every vector into a graph). Either visits a small share of the vectors per query, so its decisions are close to, not equal to, the exact ones —
benchmarks/bench_scale.py measures its recall@k against the exact search. The graph is part of the
router's state (serialised, so a saved router searches exactly the same graph after loading); its
FLOPs per query are 2·d times the mean number of distance computations measured on the dev set at fit.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from cr2.method.complexity import knn_flops
from cr2.core.data import RoutingSet
from cr2.core.errors import DataValidationError
from cr2.routers.base import OneShotRouter, l2_normalise

LOGLOSS_EPS = 1e-3
INDEXES = ("exact", "hnsw", "ivf")
WEIGHTS = ("uniform", "cosine")


class KNNRouter(OneShotRouter):
    """Cosine k-NN correctness estimator; route() takes argmax p̂ − λ·c over the pool."""

    name = "knn"

    def __init__(
        self,
        k: int | None = None,
        k_grid: Sequence[int] = (5, 10, 20, 50, 100),
        max_chunk_floats: int = 1 << 24,
        index: str = "exact",
        hnsw_m: int = 32,
        hnsw_ef_construction: int = 80,
        hnsw_ef_search: int = 128,
        ivf_nprobe: int = 32,
        weights: str = "uniform",
    ) -> None:
        self.k = k
        self.k_grid = k_grid
        self.max_chunk_floats = max_chunk_floats
        self.index = index
        self.hnsw_m = hnsw_m
        self.hnsw_ef_construction = hnsw_ef_construction
        self.hnsw_ef_search = hnsw_ef_search
        self.ivf_nprobe = ivf_nprobe
        self.weights = weights

    def _fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        if self.index not in INDEXES:
            raise DataValidationError(f"KNNRouter.index must be one of {', '.join(INDEXES)}, got {self.index!r}")
        if self.weights not in WEIGHTS:
            raise DataValidationError(f"KNNRouter.weights must be one of {', '.join(WEIGHTS)}, got {self.weights!r}")
        self.train_embedding_ = l2_normalise(train.embedding)
        self.train_correct_ = np.asarray(train.correct, dtype=np.float32)
        n_train = len(train)
        self.ann_ = None
        if self.index == "hnsw":
            self.ann_ = _build_hnsw(self.train_embedding_, self.hnsw_m, self.hnsw_ef_construction)
        elif self.index == "ivf":
            self.ann_ = _build_ivf(self.train_embedding_)
        self.ann_distances_per_query_ = None
        if self.k is not None:
            if int(self.k) < 1:
                raise DataValidationError(f"KNNRouter.k must be ≥ 1, got {self.k}")
            self.k_ = min(int(self.k), n_train)
            self.dev_log_loss_ = {}
            if self.ann_ is not None:  # FLOPs per query: measured on (at most 1,000 queries of) the dev search
                self.ann_neighbours(l2_normalise(dev.embedding[:1000]), self.k_, measure=True)
            return
        grid = sorted({min(int(k), n_train) for k in self.k_grid if int(k) >= 1})
        if not grid:
            raise DataValidationError(f"KNNRouter.k_grid has no k ≥ 1: {list(self.k_grid)}")
        p_by_k = self._proba_for_ks(l2_normalise(dev.embedding), grid, measure=True)
        y = np.asarray(dev.correct, dtype=np.float64)
        losses = {k: _log_loss(p_by_k[j], y) for j, k in enumerate(grid)}
        self.dev_log_loss_ = losses
        self.k_ = min(grid, key=lambda k: (losses[k], k))

    # ------------------------------------------------------------ neighbour search
    def _chunk_rows(self) -> int:
        return max(1, int(self.max_chunk_floats) // max(len(self.train_embedding_), 1))

    def _proba_for_ks(self, query: np.ndarray, ks: Sequence[int], measure: bool = False) -> np.ndarray:
        """Return p̂ for each k in `ks` at once, float32 [len(ks), n, M] (one search up to max(ks))."""
        k_max = max(ks)
        n, n_models = len(query), self.train_correct_.shape[1]
        out = np.empty((len(ks), n, n_models), dtype=np.float32)
        if getattr(self, "ann_", None) is not None:
            top = self.ann_neighbours(query, k_max, measure=measure)  # [n, k_max], most similar first
            self._cumulative_proba(query, top, ks, out)
            return out
        step = self._chunk_rows()
        for start in range(0, n, step):
            sims = query[start : start + step] @ self.train_embedding_.T  # [c, n_train]
            top = _top_k_sorted(sims, k_max)  # [c, k_max], most similar first
            self._cumulative_proba(query[start : start + step], top, ks, out[:, start : start + len(top)])
        return out

    def _cumulative_proba(self, query: np.ndarray, top: np.ndarray, ks: Sequence[int], out: np.ndarray) -> None:
        """Write p̂ of the first k of the sorted neighbours `top` [c, k_max] for each k in `ks` into out [len(ks), c, M]."""
        y = self.train_correct_[top]  # [c, k_max, M]
        cum = np.cumsum(y, axis=1, dtype=np.float64)
        if self.weights == "uniform":
            for j, k in enumerate(ks):
                out[j] = cum[:, k - 1, :] / k
            return
        w = self._cosine_weights(query, top)  # [c, k_max] float64
        cum_wy = np.cumsum(w[:, :, None] * y, axis=1)
        cum_w = np.cumsum(w, axis=1)
        for j, k in enumerate(ks):
            out[j] = _weighted_mean(cum_wy[:, k - 1, :], cum_w[:, k - 1], cum[:, k - 1, :] / k)

    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """Return p̂_m(x) = mean y_m over the k_ most cosine-similar train queries (weighted: module docstring),
        float32 [n, M]."""
        self._check_batch(batch)
        return self._neighbour_proba(l2_normalise(batch.embedding), leave_out=False)

    def leave_one_out_proba(self) -> np.ndarray:
        """Return p̂ of every training query from its k_ nearest OTHER training queries, float32 [n_train, M].

        Row i's own entry is left out of its neighbours (a duplicate of it at another row is not): what a training
        query's p̂ would be had it not been in the train set (stacking features, cr2.routers.knn_stack).
        """
        self._check_fitted()
        if len(self.train_embedding_) < 2:
            raise DataValidationError("leave-one-out neighbours need at least 2 training queries")
        return self._neighbour_proba(self.train_embedding_, leave_out=True)

    def _neighbour_proba(self, query: np.ndarray, leave_out: bool) -> np.ndarray:
        """p̂ over the k_ nearest train rows of the unit `query` rows; leave_out: query row i is train row i, excluded."""
        k, n_train = self.k_, len(self.train_embedding_)
        if getattr(self, "ann_", None) is not None:
            if not leave_out:
                return self._readout(query, self.ann_neighbours(query, k))
            k = min(k, n_train - 1)
            top = self.ann_neighbours(query, k + 1)  # most similar first; drop the row itself, else the last
            keep = top != np.arange(len(query))[:, None]
            order = np.argsort(~keep, axis=1, kind="stable")[:, :k]
            return self._readout(query, np.take_along_axis(top, order, axis=1))
        out = np.empty((len(query), self.train_correct_.shape[1]), dtype=np.float32)
        step = self._chunk_rows()
        for start in range(0, len(query), step):
            sims = query[start : start + step] @ self.train_embedding_.T  # [c, n_train]
            kk = k
            if leave_out:
                rows = np.arange(len(sims))
                sims[rows, start + rows] = -np.inf
                kk = min(k, n_train - 1)
            if kk < sims.shape[1]:
                top = np.argpartition(-sims, kk - 1, axis=1)[:, :kk]
            else:
                top = np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
            out[start : start + len(sims)] = self._readout(query[start : start + step], top)
        return out

    def _readout(self, query: np.ndarray, top: np.ndarray) -> np.ndarray:
        """p̂ from the neighbours `top` [c, k] of the unit `query` rows [c, d], float32 [c, M]."""
        if self.weights == "uniform":
            return self.train_correct_[top].mean(axis=1)
        top = np.sort(top, axis=1)  # train-index order: the sums do not depend on how the neighbours were found
        y = self.train_correct_[top].astype(np.float64)  # [c, k, M]
        w = self._cosine_weights(query, top)
        return _weighted_mean((w[:, :, None] * y).sum(axis=1), w.sum(axis=1), y.mean(axis=1))

    def _cosine_weights(self, query: np.ndarray, top: np.ndarray) -> np.ndarray:
        """w_i = max(cos(x, x_i), 0) for the neighbours `top` [c, k], float64 (one dot product per query and neighbour:
        no matrix product whose rounding depends on the batch shape)."""
        k, dim = top.shape[1], query.shape[1]
        step = max(1, int(self.max_chunk_floats) // max(k * dim, 1))
        q = np.asarray(query, dtype=np.float32)
        out = np.empty(top.shape, dtype=np.float64)
        for start in range(0, len(top), step):
            neighbours = self.train_embedding_[top[start : start + step]]  # [c, k, d]
            out[start : start + step] = np.einsum("cd,ckd->ck", q[start : start + step], neighbours)
        return np.maximum(out, 0.0)

    def ann_neighbours(self, query: np.ndarray, k: int, measure: bool = False) -> np.ndarray:
        """Return the indices of the k approximate nearest train queries (HNSW), most similar first, [n, k].

        measure: record the mean number of distance computations per query (ann_distances_per_query_).
        """
        import faiss

        k = min(int(k), len(self.train_embedding_))
        hnsw = self.index == "hnsw"
        if hnsw:
            self.ann_.hnsw.efSearch = max(int(self.hnsw_ef_search), k)  # the graph search keeps ≥ k candidates
        else:
            self.ann_.nprobe = min(int(self.ivf_nprobe), self.ann_.nlist)
        stats = faiss.cvar.hnsw_stats if hnsw else faiss.cvar.indexIVF_stats
        if measure:
            stats.reset()
        _, idx = self.ann_.search(np.ascontiguousarray(query, dtype=np.float32), k)
        if measure and len(query):  # IVF: the vectors scanned in the probed lists plus the nlist centroids
            ndis = stats.ndis if hnsw else stats.ndis + self.ann_.nlist * len(query)
            self.ann_distances_per_query_ = float(ndis) / len(query)
        if (idx < 0).any():  # fewer than k reachable: cannot happen with efSearch ≥ k on a connected graph
            raise DataValidationError(f"the HNSW index returned fewer than k={k} neighbours; raise hnsw_ef_search")
        return idx

    # ------------------------------------------------------------ complexity and state
    def n_params(self) -> int:
        """Return 0: KNN is non-parametric (the paper's table prints '—'); its state is the train set."""
        return 0

    def flops_per_query(self) -> int:
        """Return 2·d·n_train: one dot product with every stored training embedding (+ the cosine weights' FLOPs)."""
        self._check_fitted()
        n_train, dim = self.train_embedding_.shape
        if getattr(self, "ann_", None) is not None and self.ann_distances_per_query_ is not None:
            search = int(round(2 * dim * self.ann_distances_per_query_))  # measured on dev at fit
        else:
            search = knn_flops(dim, n_train)
        if self.weights == "uniform":
            return search
        n_models = self.train_correct_.shape[1]
        return search + 2 * self.k_ * (dim + n_models + 1) + n_models  # the cosine weights (module docstring)

    def _state_arrays(self) -> dict[str, np.ndarray]:
        arrays = {"train_embedding": self.train_embedding_, "train_correct": self.train_correct_}
        if getattr(self, "ann_", None) is not None:
            import faiss

            arrays["ann_index"] = faiss.serialize_index(self.ann_)
        return arrays

    def _state_extra(self) -> dict[str, Any]:
        extra = {"k": int(self.k_), "dev_log_loss": {str(k): float(v) for k, v in self.dev_log_loss_.items()}}
        if getattr(self, "ann_", None) is not None:
            extra["ann_distances_per_query"] = self.ann_distances_per_query_
        if self.weights != "uniform":  # a weighted KNN is another predictor over the same state
            extra["weights"] = self.weights
        return extra

    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.train_embedding_ = np.asarray(arrays["train_embedding"], dtype=np.float32)
        self.train_correct_ = np.asarray(arrays["train_correct"], dtype=np.float32)
        if extra.get("weights", "uniform") != self.weights:
            raise DataValidationError(f"the stored KNN state was fitted with weights={extra.get('weights', 'uniform')!r}, "
                                      f"this router has weights={self.weights!r}")
        self.k_ = int(extra["k"])
        self.dev_log_loss_ = {int(k): float(v) for k, v in extra["dev_log_loss"].items()}
        self.ann_, self.ann_distances_per_query_ = None, extra.get("ann_distances_per_query")
        if "ann_index" in arrays:
            import faiss

            self.ann_ = faiss.deserialize_index(np.asarray(arrays["ann_index"], dtype=np.uint8))


def _build_hnsw(vectors: np.ndarray, m: int, ef_construction: int) -> Any:
    """Return a faiss HNSW graph (inner product) over the unit vectors."""
    try:
        import faiss
    except ImportError:
        raise DataValidationError("KNNRouter(index='hnsw') needs faiss: pip install faiss-cpu==1.15.1") from None
    index = faiss.IndexHNSWFlat(vectors.shape[1], int(m), faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = int(ef_construction)
    index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


IVF_TRAIN_PER_LIST = 40  # k-means sample per list (faiss warns below 39)
IVF_KMEANS_ITERS = 10


def _build_ivf(vectors: np.ndarray) -> Any:
    """Return a faiss IVF-Flat index (inner product) with nlist = √n lists, k-means on a fixed sample."""
    try:
        import faiss
    except ImportError:
        raise DataValidationError("KNNRouter(index='ivf') needs faiss: pip install faiss-cpu==1.15.1") from None
    n, dim = vectors.shape
    nlist = max(1, min(int(np.sqrt(n)), n // IVF_TRAIN_PER_LIST or 1))
    quantizer = faiss.IndexFlatIP(dim)
    index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
    x = np.ascontiguousarray(vectors, dtype=np.float32)
    sample = np.random.default_rng(0).choice(n, size=min(n, nlist * IVF_TRAIN_PER_LIST), replace=False)
    index.cp.seed = 0
    index.cp.niter = IVF_KMEANS_ITERS
    index.train(x[np.sort(sample)])
    index.add(x)
    return index


def _top_k_sorted(sims: np.ndarray, k: int) -> np.ndarray:
    """Return the column indices of the k largest entries of each row, most similar first, [rows, k]."""
    if k < sims.shape[1]:
        part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
    else:
        part = np.broadcast_to(np.arange(sims.shape[1]), sims.shape)
    order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def _weighted_mean(weighted_sum: np.ndarray, weight_sum: np.ndarray, plain_mean: np.ndarray) -> np.ndarray:
    """Return Σ w y / Σ w per row (the plain mean where Σ w = 0), clipped to [0, 1], float32 [c, M]."""
    zero = weight_sum <= 0
    p = weighted_sum / np.where(zero, 1.0, weight_sum)[:, None]
    p = np.where(zero[:, None], plain_mean, p)
    return np.clip(p, 0.0, 1.0).astype(np.float32)


def _log_loss(p_hat: np.ndarray, y: np.ndarray) -> float:
    """Return the mean binary cross-entropy of p̂ (clipped to [ε, 1 − ε]) against y over all entries."""
    p = np.clip(p_hat.astype(np.float64), LOGLOSS_EPS, 1.0 - LOGLOSS_EPS)
    return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log1p(-p)))
