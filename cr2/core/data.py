"""Small typed objects that carry routing data between cr2's components (arrays in, arrays out)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from cr2.core.errors import InvalidValueError

EMBED_DIM = 384


def _check_shape(name: str, arr: np.ndarray, shape: tuple) -> None:
    """Raise ValueError naming the field when arr does not have `shape` (None = any size)."""
    if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape)):
        raise InvalidValueError(f"RoutingSet.{name} has shape {arr.shape}, expected {tuple('n' if s is None else s for s in shape)}")


@dataclass(frozen=True)
class RoutingSet:
    """The routing view of a set of queries under one draw of channel states."""

    query_id: np.ndarray  # [n] str
    benchmark: np.ndarray  # [n] str
    embedding: np.ndarray  # [n, 384] float32, L2-normalised e(x)
    correct: np.ndarray  # [n, n_models] bool, y_m(x)
    cost: np.ndarray  # [n, n_models] float32, normalised c_m(x, ξ); c_ref == 1
    model_ids: tuple[str, ...]  # pool order; index 0 is the device model m0
    distance_m: np.ndarray | None = None  # [n] float, UE–edge distance of the query's state (for reporting)
    cost_est: np.ndarray | None = None  # [n, n_models] pre-execution ĉ_m(x, ξ) with L̂_out (None: decide on `cost`)

    def __post_init__(self) -> None:
        n = len(self.query_id)
        k = len(self.model_ids)
        _check_shape("query_id", np.asarray(self.query_id), (n,))
        _check_shape("benchmark", np.asarray(self.benchmark), (n,))
        _check_shape("embedding", self.embedding, (n, None))
        _check_shape("correct", self.correct, (n, k))
        _check_shape("cost", self.cost, (n, k))
        if self.distance_m is not None:
            _check_shape("distance_m", self.distance_m, (n,))
        if self.cost_est is not None:
            _check_shape("cost_est", self.cost_est, (n, k))

    def __len__(self) -> int:
        return len(self.query_id)

    @property
    def n_models(self) -> int:
        return len(self.model_ids)

    @property
    def decision_cost(self) -> np.ndarray:
        """The cost a router may decide with: the pre-execution estimate ĉ when present, else c.

        Realised costs `cost` (which depend on the output length the model has not written yet) are for
        accounting the chosen model only.
        """
        return self.cost if self.cost_est is None else self.cost_est

    def subset(self, idx: np.ndarray) -> "RoutingSet":
        """Rows `idx` (an index array or boolean mask) as a new RoutingSet."""
        return RoutingSet(
            query_id=self.query_id[idx],
            benchmark=self.benchmark[idx],
            embedding=self.embedding[idx],
            correct=self.correct[idx],
            cost=self.cost[idx],
            model_ids=self.model_ids,
            distance_m=None if self.distance_m is None else self.distance_m[idx],
            cost_est=None if self.cost_est is None else self.cost_est[idx],
        )


@dataclass(frozen=True)
class Decisions:
    """A router's choice per query: the chosen model (pool index) and whether it ran on the device."""

    chosen: np.ndarray  # [n] int, index into the pool
    accepted_local: np.ndarray  # [n] bool, True iff the device model m0 answers
    score: np.ndarray | None = None  # [n] float, gate score s (CR² only)
    tau: float | np.ndarray | None = None  # τ*(λ; α) used (CR² only); [n] per query under Mondrian thresholds
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.chosen.shape != self.accepted_local.shape:
            raise InvalidValueError(f"Decisions.chosen {self.chosen.shape} and accepted_local {self.accepted_local.shape} differ")


@runtime_checkable
class Router(Protocol):
    """What every router (CR² and each baseline) implements, so evaluation is one loop."""

    name: str

    def fit(self, train: RoutingSet, dev: RoutingSet) -> "Router": ...

    def route(self, batch: RoutingSet, lam: float) -> Decisions: ...
