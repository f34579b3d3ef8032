"""CR²'s margin gate trained on the realised avoidable error of the training labels, with KNN's p̂ for the rest.

The gate is cr2.method.gate's MarginGate fitted by cr2.method.gate.fit_gate, unchanged, with the training split's
REAL labels in place of the teacher's probabilities (train.correct and dev.correct as 0/1 floats). Its margin
target is then the realised utility margin

    Δ(x, ξ; λ) = (y_0 − λ·ĉ_0) − max_{m ∈ M_edge} (y_m − λ·ĉ_m)

which, with the device model the cheapest and ĉ the decision costs, is negative exactly when the device model is
wrong and some edge model is right and worth its extra cost at that λ (y_m − λĉ_m > −λĉ_0, i.e. λ·(ĉ_m − ĉ_0) < 1;
below λ = 1 that is every right edge model, the normalised costs being at most 1): the gate learns where deferring
avoids an error, on the labels, instead of where it would agree with a learned teacher. Its score
s = σ(Δ̂/T) is this router's `local_score` — the score a certified `gate-avoidable@<rule>` calibrates, computed exactly
as CR2Router computes its gate score (float32, −∞ at λ = 0 where the FiLM gate on log λ is undefined and everything
is deferred).

Design: the router's p̂ (predict_proba) is KNN's — a KNNRouter (constructor arguments `knn`, k chosen on dev) fitted
inside on the same train/dev — and serves the certified router's deferred choice argmax_{m ∈ M_edge} p̂_m − λ·ĉ_m and
the uncertified one-shot decision route() (argmax over the whole pool). So certified gate-avoidable differs from
certified KNN in one thing only: the local-acceptance score (this gate instead of KNN's utility margin).

Constructor: `gate` = GateSpec fields overriding GateSpec's defaults (e.g. a config's `gate` section), `knn`,
`num_threads` (fit_gate's thread count: same data, seed and num_threads → bit-identical gate). Complexity: the
gate's parameters; FLOPs = the gate's at one λ (as CR2Router counts it) + KNN's.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from cr2.core.data import RoutingSet
from cr2.core.errors import ConfigError
from cr2.routers.base import OneShotRouter, build_module, part_state, restore_part, torch_threads
from cr2.routers.knn import KNNRouter

GATE_PREFIX = "gate."


class GateAvoidableRouter(OneShotRouter):
    """A margin gate on the realised avoidable error (local_score) + KNN's p̂ (predict_proba, deferred choice)."""

    name = "gate-avoidable"

    def __init__(self, gate: Any = None, knn: dict[str, Any] | None = None, num_threads: int = 1) -> None:
        # a GateSpec is kept as its fields (a dict), so the router's parameters stay JSON for save()
        self.gate = gate.model_dump() if hasattr(gate, "model_dump") else gate
        self.knn = knn
        self.num_threads = num_threads

    def gate_spec(self) -> Any:
        """Return the GateSpec of this router: GateSpec's defaults overridden by `gate`."""
        from pydantic import ValidationError

        from cr2.config import GateSpec

        try:
            return GateSpec(**dict(self.gate or {}))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise ConfigError(f"gate-avoidable: bad gate parameters ({problems}); the fields are GateSpec's "
                              "(cr2.config.GateSpec), e.g. {epochs: 20, hidden: 256}") from None

    def _fit(self, train: RoutingSet, dev: RoutingSet) -> None:
        from cr2.method.checkpoint import fingerprint
        from cr2.method.gate import fit_gate

        spec = self.gate_spec()
        self.knn_ = KNNRouter(**dict(self.knn or {})).fit(train, dev)
        # eq. (teacher_margin) with the real labels y for the teacher's p: Δ = (y_0 − λĉ_0) − max_{M_edge} (y_m − λĉ_m)
        y_train = np.asarray(train.correct, dtype=np.float64)
        y_dev = np.asarray(dev.correct, dtype=np.float64)
        self.gate_ = fit_gate(train, dev, y_train, y_dev, spec, num_threads=int(self.num_threads))
        self.gate_fingerprint_ = fingerprint(self.gate_)

    # ------------------------------------------------------------ the two learned functions
    def predict_proba(self, batch: RoutingSet) -> np.ndarray:
        """Return KNN's p̂_m(x), float32 [n, M] (the deferred choice and the one-shot decision)."""
        self._check_batch(batch)
        return self.knn_.predict_proba(batch)

    def local_score(self, batch: RoutingSet, lam: float | np.ndarray) -> np.ndarray:
        """Return the gate scores s = σ(Δ̂/T) of `batch`, float32: [n] for one λ, [n, n_lam] for a vector; −∞ at λ = 0
        (CR²'s gate score, cr2.routers.cr2_router.CR2Router.scores)."""
        self._check_batch(batch)
        lam_arr = np.asarray(lam, dtype=np.float64)
        n = len(batch)
        with torch_threads(int(self.num_threads)):
            if np.all(lam_arr != 0):
                return self.gate_.score(batch.embedding, lam)
            if lam_arr.ndim == 0:
                return np.full(n, -np.inf, dtype=np.float32)
            out = np.full((n, len(lam_arr)), -np.inf, dtype=np.float32)
            positive = lam_arr != 0
            if positive.any():
                out[:, positive] = self.gate_.score(batch.embedding, lam_arr[positive])
            return out

    def local_score_fingerprint(self) -> str:
        """The fingerprint a certified router's thresholds are bound to: the gate's (what local_score depends on)."""
        self._check_fitted()
        return self.gate_fingerprint_

    # ------------------------------------------------------------ complexity and state
    def n_params(self) -> int:
        """Return the gate's trainable parameters (KNN is non-parametric)."""
        self._check_fitted()
        return int(self.gate_.n_params())

    def flops_per_query(self) -> int:
        """Return the gate's FLOPs at one λ + KNN's."""
        self._check_fitted()
        return int(self.gate_.flops_per_query()) + int(self.knn_.flops_per_query())

    def _state_arrays(self) -> dict[str, np.ndarray]:
        gate = {f"{GATE_PREFIX}{k}": v.detach().cpu().numpy() for k, v in self.gate_.state_dict().items()}
        return {**gate, **part_state(self.knn_, "knn")[0]}

    def _state_extra(self) -> dict[str, Any]:
        return {"gate_hparams": dict(self.gate_.hparams), "knn": self.knn_._state_extra()}

    def _set_state(self, arrays: dict[str, np.ndarray], extra: dict[str, Any]) -> None:
        import torch

        from cr2.method.checkpoint import fingerprint
        from cr2.method.gate import MarginGate

        self.knn_ = restore_part(KNNRouter, dict(self.knn or {}), arrays, extra["knn"], "knn", self)
        hparams = extra["gate_hparams"]
        gate = build_module(lambda: MarginGate(**hparams))  # no draw from the global torch RNG: weights are loaded
        state = {k[len(GATE_PREFIX) :]: torch.from_numpy(np.array(v)) for k, v in arrays.items()
                 if k.startswith(GATE_PREFIX)}
        gate.load_state_dict(state)
        self.gate_ = gate.eval().requires_grad_(False)
        self.gate_fingerprint_ = fingerprint(self.gate_)
