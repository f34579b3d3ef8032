"""Utilities, the full-information reference and the teacher margin and labels (paper §V, §VI-C, §VI-F).

Every function takes λ either as a scalar or as a 1-D vector of n_lam values. A scalar keeps the
query-level shapes ([n] or [n, n_models]); a vector adds a λ axis after the query axis
([n, n_lam] or [n, n_lam, n_models]). Arithmetic runs in float64 so that ties are decided on one
precision everywhere, whatever the dtype of the inputs.

Model axis: pool order, index 0 is the device model m0 and indices 1.. are the edge models.
"""
from __future__ import annotations

import numpy as np
from cr2.core.errors import InvalidValueError

DEVICE_INDEX = 0  # m0: the device model is first in the pool (cr2.config enforces it)


def _as_lam(lam: float | np.ndarray) -> tuple[np.ndarray, bool]:
    """Return λ as a float64 vector and whether the caller passed a scalar."""
    lam_arr = np.asarray(lam, dtype=np.float64)
    if lam_arr.ndim > 1:
        raise InvalidValueError(f"λ must be a scalar or a 1-D vector, got shape {lam_arr.shape}")
    if np.any(~np.isfinite(lam_arr)) or np.any(lam_arr < 0):
        raise InvalidValueError(f"λ must be finite and ≥ 0, got {lam_arr}")
    return np.atleast_1d(lam_arr), lam_arr.ndim == 0


def _check_pair(name: str, values: np.ndarray, cost: np.ndarray) -> None:
    if values.ndim != 2 or values.shape != cost.shape:
        raise InvalidValueError(f"{name} has shape {values.shape} and cost {cost.shape}; both must be [n, n_models]")
    if values.shape[1] < 2:
        raise InvalidValueError(f"the pool needs a device model and ≥ 1 edge model; got {values.shape[1]} model(s)")


def _scalarised(values: np.ndarray, cost: np.ndarray, lam: float | np.ndarray, name: str) -> np.ndarray:
    """Return values − λ·cost as [n, n_models] (scalar λ) or [n, n_lam, n_models] (vector λ)."""
    values = np.asarray(values, dtype=np.float64)
    cost = np.asarray(cost, dtype=np.float64)
    _check_pair(name, values, cost)
    lam_vec, scalar = _as_lam(lam)
    out = values[:, None, :] - lam_vec[None, :, None] * cost[:, None, :]
    return out[:, 0, :] if scalar else out


def utility(correct: np.ndarray, cost: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """Return the realised utilities u_m = y_m − λ·c_m, [n, M] or [n, n_lam, M]."""
    # eq. (utility): u_m(x, ξ; λ) = y_m(x) − λ c_m(x, ξ)
    return _scalarised(correct, cost, lam, "correct")


def teacher_utility(proba: np.ndarray, cost: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """Return the teacher-estimated utilities û_m = p_m(x) − λ·c_m(x, ξ), [n, M] or [n, n_lam, M]."""
    # eq. (teacher_utility): û_m(x, ξ; λ) = p_m(x) − λ c_m(x, ξ)
    return _scalarised(proba, cost, lam, "proba")


def argmax_cheapest(util: np.ndarray, cost: np.ndarray, candidates: np.ndarray | None = None) -> np.ndarray:
    """Return the pool index maximising `util` over `candidates`; ties → lower cost, then lower index.

    util: [n, M] or [n, n_lam, M]; cost: [n, M]; candidates: [M] bool mask (None: the whole pool).
    Returns [n] or [n, n_lam] int64. Ties are exact float64 equality of the utilities.
    """
    util = np.asarray(util, dtype=np.float64)
    cost = np.asarray(cost, dtype=np.float64)
    n_models = cost.shape[1]
    mask = np.ones(n_models, dtype=bool) if candidates is None else np.asarray(candidates, dtype=bool)
    if mask.shape != (n_models,) or not mask.any():
        raise InvalidValueError(f"candidates must be a non-empty [n_models={n_models}] bool mask, got {mask}")
    cost_b = cost if util.ndim == 2 else cost[:, None, :]
    masked = np.where(mask, util, -np.inf)
    best = masked.max(axis=-1, keepdims=True)
    tied = mask & (masked == best)
    # among the tied maxima the cheaper model wins; np.argmin returns the lowest index among equal costs
    return np.argmin(np.where(tied, cost_b, np.inf), axis=-1)


def full_information_choice(proba: np.ndarray, cost: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """Return m_full* = argmax_{m ∈ M} û_m (ties → cheaper model, then lower index), [n] or [n, n_lam]."""
    # m_full*(x, ξ; λ) = argmax_{m ∈ M} û_m(x, ξ; λ), ties broken by the smaller deployment cost
    return argmax_cheapest(teacher_utility(proba, cost, lam), cost)


def teacher_margin(proba: np.ndarray, cost: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """Return the teacher margin Δθ = û_0 − max_{edge} û_m, [n] or [n, n_lam] float64."""
    util = teacher_utility(proba, cost, lam)
    # eq. (teacher_margin): Δθ(x, ξ; λ) = û_{m0} − max_{m ∈ M_edge} û_m; a tie gives Δθ = 0, i.e. favours m0
    return util[..., DEVICE_INDEX] - util[..., DEVICE_INDEX + 1 :].max(axis=-1)


def sign_label(margin: np.ndarray) -> np.ndarray:
    """Return z = 1[Δθ ≥ 0] (bool, same shape as the margin)."""
    # eq. (sign_label): z = 1[Δθ ≥ 0]
    return np.asarray(margin) >= 0


def disagree_label(proba: np.ndarray, cost: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """Return the risk label r = 1[m_full* ≠ m0] (bool), [n] or [n, n_lam].

    r and 1 − z differ only when û_0 ties the best edge utility while m0 is not the cheapest of the
    tied models, which cannot happen when the device model is the cheapest (the paper's assumption).
    """
    # eq. (disagree_label): r = 1[m_full*(x, ξ; λ) ≠ m0]
    return full_information_choice(proba, cost, lam) != DEVICE_INDEX


# ---------------------------------------------------------------- realised risks on real labels
def oracle_choice(correct: np.ndarray, cost: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """Return m_oracle* = argmax_{m ∈ M} u_m = y_m − λ·c_m over the real correctness, [n] or [n, n_lam] int64.

    Tie rule (the same as m_full*'s): among equal realised utilities the cheaper model wins, then the lower
    pool index, i.e. the device model among equally cheap ones. With 0/1 labels ties are common — at λ = 0
    every correct model ties — so the rule matters: a query the device answers correctly is never an oracle
    disagreement at λ = 0 unless an edge model that is also correct is strictly cheaper.
    """
    # eq. (utility) over the real labels: m_oracle*(x, ξ; λ) = argmax_m y_m(x) − λ c_m(x, ξ), ties → cheaper model
    return argmax_cheapest(utility(correct, cost, lam), cost)


def oracle_disagree_label(correct: np.ndarray, cost: np.ndarray, lam: float | np.ndarray) -> np.ndarray:
    """Return r^oracle = 1[m_oracle* ≠ m0] (bool), [n] or [n, n_lam]: eq. (disagree_label) with real labels for p."""
    # eq. (disagree_label) with y_m in place of the teacher's p_m: r = 1[argmax_m (y_m − λ c_m) ≠ m0]
    return oracle_choice(correct, cost, lam) != DEVICE_INDEX


def avoidable_error_label(correct: np.ndarray) -> np.ndarray:
    """Return e = 1[y_0 = 0 and max_{edge} y_m = 1] (bool [n]): the device is wrong where some edge model is right."""
    correct = np.asarray(correct, dtype=bool)
    if correct.ndim != 2 or correct.shape[1] < 2:
        raise InvalidValueError(f"correct has shape {correct.shape}; it must be [n, n_models ≥ 2]")
    return ~correct[:, DEVICE_INDEX] & correct[:, DEVICE_INDEX + 1:].any(axis=1)


def risk_label(risk: str, lam: float | np.ndarray, *, proba: np.ndarray | None = None,
               decision_cost: np.ndarray | None = None, correct: np.ndarray | None = None,
               cost: np.ndarray | None = None) -> np.ndarray:
    """Return the 0/1 risk label r_i(λ) a calibration rule controls (cr2.crc.RISKS), bool [n] or [n, n_lam].

    The risk's entry names its label function and the inputs it reads: teacher-disagreement the teacher's proba and
    the decision cost ĉ; oracle-disagreement the real correctness and the same decision cost ĉ (the paper's
    c_m(x, ξ), built from the pre-execution output-length estimate: the oracle differs from the teacher's reference
    only in its labels); avoidable-error the real correctness only (broadcast over λ). `cost` (the realised c) is
    accepted for symmetry and never read: no risk's label depends on it.
    """
    from cr2.crc import risk_spec

    lam_vec, scalar = _as_lam(lam)
    spec = risk_spec(risk)  # did-you-mean on an unknown name
    given = {"proba": proba, "decision_cost": decision_cost, "correct": correct}
    missing = [_INPUT_WORDS[k] for k in spec.inputs if given[k] is None]
    if missing:
        raise InvalidValueError(f"the {risk} label needs {' and '.join(missing)} of every query")
    label = spec.label_function()
    args = [given[k] for k in spec.inputs]
    if spec.per_lam:
        return label(*args, lam)
    e = label(*args)
    return e if scalar else np.repeat(e[:, None], len(lam_vec), axis=1)


_INPUT_WORDS = {"proba": "the teacher's proba", "decision_cost": "the decision cost ĉ_m",
                "correct": "the real correctness y_m"}  # how risk_label's error names a missing input
