"""A fixed 1:1 ensemble of KNN and the MLP router: p̂_m(x) = ½ (p̂_m^knn(x) + p̂_m^mlp(x)).

Both parts are fitted exactly as the catalogue's `knn` and `mlp` entries are (cr2.routers.knn.KNNRouter,
cr2.routers.mlp.MLPRouter with their own defaults; `knn` and `mlp` are dicts of their constructor arguments, and
`num_threads` — what the benchmark gives every router that takes it — reaches the MLP). No weight is fitted: the
mean is fixed. The averaged p̂ goes into the same utility argmax p̂_m − λ·c_m as every one-shot router.

The MLP sees the decision costs ĉ (its cost inputs), so this router reads costs. Complexity: the MLP's
parameters (KNN has none); FLOPs: the sum of both parts plus the mean (one add and one multiply per model).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cr2.method.complexity import elementwise_flops
from cr2.core.data import RoutingSet
from cr2.routers.base import OneShotRouter, part_state, restore_part
from cr2.routers.knn import KNNRouter


class KNNMLPMeanRouter(OneShotRouter):
    """p̂ = ½ (p̂_knn + p̂_mlp); route() takes argmax p̂ − λ·c over the pool."""

    name = "knn-mlp-mean"

    def __init__(self, knn: dict[str, Any] | None = None, mlp: dict[str, Any] | None = None,
                 num_threads: int = 1) -> None:
        self.knn = knn
        self.mlp = mlp
        self.num_threads = num_threads

    def _mlp_params(self) -> dict[str, Any]:
        return {"num_threads": self.num_threads, **dict(self.mlp or {})}

    def _fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        from cr2.routers.mlp import MLPRouter

        self.knn_ = KNNRouter(**dict(self.knn or {})).fit(train, dev)
        self.mlp_ = MLPRouter(**self._mlp_params()).fit(train, dev)

    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """Return p̂_m(x) = ½ (p̂_m^knn(x) + p̂_m^mlp(x)), float32 [n, M]."""
        self._check_batch(batch)
        p_knn = self.knn_.predict_proba(batch).astype(np.float64)
        p_mlp = self.mlp_.predict_proba(batch).astype(np.float64)
        return (0.5 * (p_knn + p_mlp)).astype(np.float32)

    def n_params(self) -> int:
        """Return the MLP's parameter count (KNN is non-parametric)."""
        self._check_fitted()
        return int(self.mlp_.n_params())

    def flops_per_query(self) -> int:
        """Return KNN's FLOPs + the MLP's + 2·M for the mean."""
        self._check_fitted()
        return (int(self.knn_.flops_per_query()) + int(self.mlp_.flops_per_query())
                + elementwise_flops(len(self.model_ids_), ops=2))

    def _state_arrays(self) -> dict[str, np.ndarray]:
        return {**part_state(self.knn_, "knn")[0], **part_state(self.mlp_, "mlp")[0]}

    def _state_extra(self) -> dict[str, Any]:
        return {"knn": self.knn_._state_extra(), "mlp": self.mlp_._state_extra()}

    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        from cr2.routers.mlp import MLPRouter

        self.knn_ = restore_part(KNNRouter, dict(self.knn or {}), arrays, extra["knn"], "knn", self)
        self.mlp_ = restore_part(MLPRouter, self._mlp_params(), arrays, extra["mlp"], "mlp", self)
