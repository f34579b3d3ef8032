"""KNN stacked under the MLP router: the MLP also sees what the k nearest training queries did.

    Linear(d + (M − 1) + M, H) → GELU → Dropout → Linear(H, M),   p̂_m(x) = σ(logit_m(x))

The inputs are the MLP router's (cr2.routers.mlp: the embedding e(x) and the decision costs ĉ_m of the models other
than the reference) and, per model, the mean correctness of the k nearest TRAINING queries, p̂_m^knn(x) (M stacking
features). The network, its training loop and its checkpoint choice on dev are the MLP router's; only the inputs
grow (MLPNet's n_extra).

Features without leakage: a training query's own label never enters its feature — on the train split each query's
neighbours are the k nearest OTHER training queries (leave-one-out, KNNRouter.leave_one_out_proba); on dev, val and
test they are the k nearest training queries (KNNRouter.predict_proba), as at deployment. k follows KNN's dev rule:
a KNNRouter (constructor arguments `knn`) is fitted on train, k chosen on dev by its log-loss, and kept with its
train set as part of this router's state.

Complexity: the MLP's parameters (with M more inputs); FLOPs = the KNN search + the MLP with the extra inputs.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from cr2.core.data import RoutingSet
from cr2.core.errors import DataValidationError
from cr2.routers.base import embedding_tensor, l2_normalise, part_state, restore_part
from cr2.routers.knn import KNNRouter
from cr2.routers.mlp import MLPNet, MLPRouter, mlp_flops


class KNNStackRouter(MLPRouter):
    """The MLP router with the k-NN mean correctness per model as M extra inputs (stacking)."""

    name = "knn-stack"

    def __init__(
        self,
        knn: dict[str, Any] | None = None,
        hidden: int = 600,
        dropout: float = 0.1,
        cost_inputs: bool = True,
        epochs: int = 40,
        batch_size: int = 256,
        lr: float = 1e-3,
        weight_decay: float = 0.01,
        grad_clip: float = 1.0,
        patience: int = 6,
        seed: int = 0,
        num_threads: int = 1,
    ) -> None:
        super().__init__(hidden=hidden, dropout=dropout, cost_inputs=cost_inputs, epochs=epochs,
                         batch_size=batch_size, lr=lr, weight_decay=weight_decay, grad_clip=grad_clip,
                         patience=patience, seed=seed, num_threads=num_threads)
        self.knn = knn

    def _n_extra(self, n_models: int) -> int:
        return len(self.cost_columns_) + n_models

    def _build_net(self, n_models: int, embed_dim: int) -> MLPNet:
        return MLPNet(n_models, embed_dim, self.hidden, self.dropout, self._n_extra(n_models))

    def _prepare_fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        super()._prepare_fit(train, dev)
        self.knn_ = KNNRouter(**dict(self.knn or {})).fit(train, dev)

    def _with_features(self, data: RoutingSet, features: np.ndarray) -> tuple[Any, ...]:
        """(e(x), ĉ of the cost columns ⊕ the M stacking features) as float32 tensors."""
        cost = np.asarray(data.decision_cost, dtype=np.float32)[:, list(self.cost_columns_)]
        extra = np.concatenate([cost, np.asarray(features, dtype=np.float32)], axis=1)
        return embedding_tensor(data), torch.from_numpy(np.ascontiguousarray(extra))

    def _inputs(self, data: RoutingSet) -> tuple[Any, ...]:
        return self._with_features(data, self.knn_.predict_proba(data))

    def _train_inputs(self, train: RoutingSet) -> tuple[Any, ...]:
        # leave-one-out by row: valid only for the very train set the KNN part stores
        if len(train) != len(self.knn_.train_embedding_) or not np.array_equal(
                l2_normalise(train.embedding), self.knn_.train_embedding_):
            raise DataValidationError("knn-stack trains on the train set its KNN part was fitted on (leave-one-out "
                                      "features are per training row); refit it on the new set")
        return self._with_features(train, self.knn_.leave_one_out_proba())

    def flops_per_query(self) -> int:
        """Return the KNN part's FLOPs + the MLP's with the M stacking inputs (cr2.method.complexity convention)."""
        self._check_fitted()
        n_models = len(self.model_ids_)
        return int(self.knn_.flops_per_query()) + mlp_flops(n_models, self.embed_dim_, self.hidden,
                                                            self._n_extra(n_models))

    def _state_arrays(self) -> dict[str, np.ndarray]:
        return {**super()._state_arrays(), **part_state(self.knn_, "knn")[0]}

    def _state_extra(self) -> dict[str, Any]:
        return {**super()._state_extra(), "knn": self.knn_._state_extra()}

    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.knn_ = restore_part(KNNRouter, dict(self.knn or {}), arrays, extra["knn"], "knn", self)
        super()._set_state(arrays, extra)
