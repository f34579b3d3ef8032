"""The online CR² rule (paper Algorithm 1): accept locally iff s ≥ τ*(λ; α), otherwise defer and choose on the edge.

Deferred-branch variants (paper §VI-A, Table ablation):
- edge-only (default): M_def = M_edge, deferral commits the query to an edge model;
- inclusive: M_def = M, a deferred query may still map back to m0 when it is teacher-optimal;
- fallback: a deferred query goes to the cheapest edge model by its cost c_m(x, ξ) (Qwen3-4B in the paper).
Ties in the deferred argmax are broken like the full-information reference: lower cost, then lower index.
"""
from __future__ import annotations

import numpy as np

from cr2.crc import accept
from cr2.core.data import Decisions
from cr2.core.errors import InvalidValueError, did_you_mean
from cr2.method.utility import DEVICE_INDEX, argmax_cheapest, teacher_utility

VARIANTS = ("edge-only", "inclusive", "fallback")


def _edge_mask(n_models: int) -> np.ndarray:
    mask = np.ones(n_models, dtype=bool)
    mask[DEVICE_INDEX] = False
    return mask


def deferred_choice(proba: np.ndarray, cost: np.ndarray, lam: float, variant: str = "edge-only") -> np.ndarray:
    """Return the model each query would run on if deferred, int64 [n] (pool indices)."""
    if variant not in VARIANTS:
        raise did_you_mean("deferred variant", variant, list(VARIANTS))
    cost = np.asarray(cost, dtype=np.float64)
    n_models = cost.shape[1]
    if variant == "fallback":
        # the cheapest edge model by c_m(x, ξ); equal costs → the lower index
        return np.argmin(np.where(_edge_mask(n_models), cost, np.inf), axis=1)
    candidates = _edge_mask(n_models) if variant == "edge-only" else np.ones(n_models, dtype=bool)
    # eq. (deferred_argmax): m_def* = argmax_{m ∈ M_def} û_m(x, ξ; λ)
    return argmax_cheapest(teacher_utility(proba, cost, lam), cost, candidates)


def route(
    score: np.ndarray,
    tau: float | np.ndarray,
    proba: np.ndarray,
    cost: np.ndarray,
    lam: float,
    variant: str = "edge-only",
) -> Decisions:
    """Return the CR² decisions for a batch at one operating point (λ, τ*(λ; α)).

    score: [n] gate scores s_φ(e(x), λ) in the dtype they were calibrated in; tau: τ*(λ; α), or [n] float64 one per
    query (a Mondrian table: each query's group threshold);
    proba: [n, M] teacher p_m(x); cost: [n, M] c_m(x, ξ). Decisions.accepted_local is True iff m0 runs
    (for `inclusive` that includes deferred queries mapped back to m0); extra["gate_accept"] is the gate's
    own acceptance 1[s ≥ τ*], the event the CRC guarantee is about.
    """
    score = np.asarray(score)
    proba = np.asarray(proba)
    cost = np.asarray(cost)
    if score.ndim != 1 or proba.shape != cost.shape or proba.shape[0] != len(score):
        raise InvalidValueError(f"score {score.shape}, proba {proba.shape} and cost {cost.shape} must be [n], [n, M], [n, M]")
    if np.ndim(lam) != 0:
        raise InvalidValueError(f"route takes one λ at a time, got {lam!r}")
    if np.ndim(tau) != 0 and np.shape(tau) != score.shape:
        raise InvalidValueError(f"tau {np.shape(tau)} must be one threshold or one per query, like score {score.shape}")
    # eq. (cr2_rule): m̂ = m0 if s ≥ τ*(λ; α), else m_def*(x, ξ; λ)
    gate_accept = accept(score, tau)
    chosen = np.where(gate_accept, DEVICE_INDEX, deferred_choice(proba, cost, lam, variant)).astype(np.int64)
    return Decisions(
        chosen=chosen,
        accepted_local=chosen == DEVICE_INDEX,
        score=score,
        tau=float(tau) if np.ndim(tau) == 0 else np.asarray(tau, dtype=np.float64),
        extra={"gate_accept": gate_accept, "variant": variant, "lam": float(lam)},
    )
