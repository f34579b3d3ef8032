"""Always-m: the static baselines that send every query to one model of the pool (paper §VII-A).

`AlwaysRouter("qwen3-1.7b")` is the device-only policy, `AlwaysRouter("qwen3-14b")` the reference
policy; the registry spells them `always-<model_id>`. λ and the channel state are ignored.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cr2.core.data import Decisions, RoutingSet
from cr2.core.errors import did_you_mean
from cr2.routers.base import OneShotRouter
from cr2.method.utility import DEVICE_INDEX


class AlwaysRouter(OneShotRouter):
    """Route every query to the pool model `model_id`, whatever λ and ξ; no parameters, no FLOPs."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"always-{self.model_id}"

    def _fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        ids = list(train.model_ids)
        if self.model_id not in ids:
            raise did_you_mean("model", self.model_id, ids)
        self.model_index_ = ids.index(self.model_id)
        # the train accuracy of each model: Always-m's "prediction" is its prior (reporting only)
        self.prior_ = np.asarray(train.correct, dtype=np.float32).mean(axis=0)

    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """Return the train accuracy of each model for every query, float32 [n, M] (unused by route)."""
        self._check_batch(batch)
        return np.broadcast_to(self.prior_, (len(batch), len(self.prior_))).astype(np.float32)

    def route(self, batch: RoutingSet, lam: float) -> Decisions:
        """Return model_index_ for every query (accepted_local iff it is the device model)."""
        self._check_batch(batch)
        chosen = np.full(len(batch), self.model_index_, dtype=np.int64)
        return Decisions(chosen=chosen, accepted_local=chosen == DEVICE_INDEX, extra={"lam": float(lam), "router": self.name})

    def n_params(self) -> int:
        """Return 0: a static policy has no parameters."""
        return 0

    def flops_per_query(self) -> int:
        """Return 0: a static policy computes nothing per query."""
        return 0

    def _state_arrays(self) -> dict[str, np.ndarray]:
        return {"prior": self.prior_, "model_index": np.array(self.model_index_, dtype=np.int64)}

    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        self.prior_ = np.asarray(arrays["prior"], dtype=np.float32)
        self.model_index_ = int(arrays["model_index"])
