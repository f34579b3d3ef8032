"""MLP router (RouterBench style, Hu et al. 2024): a multi-output correctness predictor.

    Linear(384 + (M − 1), H) → GELU → Dropout → Linear(H, M),   p̂_m(x) = σ(logit_m(x))

trained on BCE against y_m(x) with the checkpoint of lowest dev BCE (cr2.routers.base.TorchOneShotRouter).

Inputs and width [cr2 decision]: the paper counts 235,204 parameters, which is exactly a
387 → 600 → 4 network (387·600 + 600 + 600·4 + 4), so the paper's MLP sees three inputs beyond the 384-d
embedding. The most plausible three, for a four-model pool, are the query's normalised pre-execution
costs ĉ_m(x, ξ) of the models other than the reference (ĉ_ref ≡ 1 carries nothing): the MLP is the one
baseline that sees the request-time cost vector, as a cost-aware router would. cr2 uses exactly that:
e(x) ⊕ (ĉ_m, m ≠ ref) → H = 600 → M, 235,204 parameters for the paper's pool. The reference column is the
one whose train cost is identically 1; with `cost_inputs=False` the MLP sees e(x) only (384 → 600 → 4).
FLOPs: 2·(d + M − 1)·H + H + 2·H·M = 469,800 (the paper prints 469.2 k, −0.13 %; its convention is not given).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from cr2.method.complexity import elementwise_flops, linear_flops
from cr2.core.data import EMBED_DIM, RoutingSet
from cr2.routers.base import TorchOneShotRouter, embedding_tensor, gen_dropout

PAPER_PARAMS = 235_204  # = 387·600 + 600 + 600·4 + 4
PAPER_FLOPS = 469_200  # printed "469.2 k"


class MLPNet(nn.Module):
    """Linear(d, H) → GELU → Dropout → Linear(H, M); forward returns the correctness logits [B, M]."""

    def __init__(self, n_models: int, embed_dim: int = EMBED_DIM, hidden: int = 600, dropout: float = 0.1,
                 n_extra: int = 0) -> None:
        super().__init__()
        self.fc1 = nn.Linear(embed_dim + n_extra, hidden)
        self.fc2 = nn.Linear(hidden, n_models)
        self.dropout = float(dropout)
        self.dropout_generator: Any = None

    def forward(self, embedding: torch.Tensor, extra: torch.Tensor | None = None) -> torch.Tensor:
        x = embedding if extra is None else torch.cat([embedding, extra], dim=1)
        h = nn.functional.gelu(self.fc1(x))
        return self.fc2(gen_dropout(h, self.dropout, self.dropout_generator, self.training))


def mlp_flops(n_models: int, embed_dim: int = EMBED_DIM, hidden: int = 600, n_extra: int = 0) -> int:
    """Return the FLOPs of one query: 2·(d + extra)·H + H (GELU) + 2·H·M."""
    return linear_flops(embed_dim + n_extra, hidden) + elementwise_flops(hidden) + linear_flops(hidden, n_models)


class MLPRouter(TorchOneShotRouter):
    """RouterBench-style MLP correctness predictor; route() takes argmax p̂ − λ·c over the pool."""

    name = "mlp"

    def __init__(
        self,
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
        self.hidden = hidden
        self.dropout = dropout
        self.cost_inputs = cost_inputs
        self.epochs = epochs
        self.batch_size = batch_size
        self.lr = lr
        self.weight_decay = weight_decay
        self.grad_clip = grad_clip
        self.patience = patience
        self.seed = seed
        self.num_threads = num_threads

    def _build_net(self, n_models: int, embed_dim: int) -> MLPNet:
        return MLPNet(n_models, embed_dim, self.hidden, self.dropout, len(self.cost_columns_))

    def _prepare_fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        cost = np.asarray(train.decision_cost, dtype=np.float64)
        # every model but the reference, whose normalised cost is identically 1 (it carries no information)
        informative = ~np.all(np.isclose(cost, 1.0), axis=0) if len(cost) else np.ones(train.n_models, dtype=bool)
        self.cost_columns_ = tuple(int(i) for i in np.flatnonzero(informative)) if self.cost_inputs else ()

    def _inputs(self, data: RoutingSet) -> tuple[Any, ...]:
        if not self.cost_columns_:
            return (embedding_tensor(data),)
        extra = np.asarray(data.decision_cost, dtype=np.float32)[:, list(self.cost_columns_)]
        return (embedding_tensor(data), torch.from_numpy(np.ascontiguousarray(extra)))

    def flops_per_query(self) -> int:
        """Return 2·(d + extra)·H + H + 2·H·M (cr2.method.complexity convention)."""
        self._check_fitted()
        return mlp_flops(len(self.model_ids_), self.embed_dim_, self.hidden, len(self.cost_columns_))

    def _state_extra(self) -> dict[str, Any]:
        return {**super()._state_extra(), "cost_columns": list(self.cost_columns_)}

    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.cost_columns_ = tuple(int(i) for i in extra.get("cost_columns", []))
        super()._set_state(arrays, extra)
