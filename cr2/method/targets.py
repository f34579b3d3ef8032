"""Operating by target: the (λ, α) that is cheapest at an accuracy target, or most accurate within a cost budget.

A user asks for "accuracy ≥ 0.8 at the lowest cost" or "the best accuracy at mean cost ≤ 0.5", not
for a λ. The candidates are the operating points (λ, α) of the calibrated grid, each with its
threshold τ(λ; α); the choice is certified with Learn-then-Test (Angelopoulos et al., 2021):

1. The calibration set is split once, at random, into a threshold half and a selection half. The
   threshold half calibrates τ(λ; α) (CRC by default), so the candidates are fixed before the
   selection half is looked at — LTT needs configurations that do not depend on the data it tests.
2. On the selection half, every candidate gets a p-value for "it misses the target":
   accuracy target t: H0: 1 − accuracy > 1 − t, 0/1 losses → exact binomial tail (cr2.crc);
   budget b: H0: E[cost] > b, costs bounded by cost_max → Hoeffding–Bentkus.
3. Fixed-sequence testing within each λ along a data-free order — α ascending for an accuracy target
   (more deferral first, the likelier to pass), α descending for a budget (more local first) — at
   level δ/n_lam per λ (Bonferroni over the λ grid, as in cr2.crc.ltt_delta_per_lam).
4. Among the certified candidates, pick the cheapest (accuracy target) or the most accurate (budget)
   on the selection half. Any choice among certified candidates keeps the guarantee, because with
   probability ≥ 1 − δ every certified candidate meets the target.

Guarantee: with probability ≥ 1 − δ over i.i.d. calibration data, the chosen (λ, α, τ) has population
accuracy ≥ t (or mean cost ≤ b). When nothing is certified, TargetInfeasibleError says what the grid
reaches. numpy only; the estimator that owns the gate and the teacher feeds its arrays in.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from cr2.crc import (
    binomial_tail_pvalue,
    calibrate_table,
    hoeffding_bentkus_pvalue,
    ltt_delta_per_lam,
    rule_risk,
)
from cr2.core.errors import DataValidationError, TargetInfeasibleError
from cr2.method.routing import deferred_choice

Mode = Literal["accuracy", "budget"]
SELECT_FRACTION = 0.5  # share of the calibration set that certifies the target; the rest calibrates τ


@dataclass(frozen=True)
class Outcomes:
    """What each calibration query gets at each operating point (λ_i, α_j) under fixed thresholds."""

    correct: np.ndarray  # [n, n_lam, n_alpha] bool, the routed model answers correctly
    cost: np.ndarray  # [n, n_lam, n_alpha] float64, normalised cost c of the routed model (c_ref ≡ 1)
    local: np.ndarray  # [n, n_lam, n_alpha] bool, the gate accepts on the device

    def __post_init__(self) -> None:
        if not (self.correct.shape == self.cost.shape == self.local.shape) or self.correct.ndim != 3:
            raise DataValidationError(
                f"Outcomes.correct {self.correct.shape}, .cost {self.cost.shape} and .local {self.local.shape} "
                "must be one [n, n_lam, n_alpha] shape"
            )


def operating_outcomes(
    score: np.ndarray,
    taus: np.ndarray,
    lams: np.ndarray,
    proba: np.ndarray,
    cost: np.ndarray,
    correct: np.ndarray,
    variant: str = "edge-only",
) -> Outcomes:
    """Return the per-query correctness, cost and local decision of CR² at every (λ_i, τ_ij).

    score: [n, n_lam] gate scores; taus: [n_lam, n_alpha]; proba/cost/correct: [n, M] teacher p_m(x),
    c_m(x, ξ) and y_m(x) in pool order (m0 first).
    """
    score = np.asarray(score)
    cost = np.asarray(cost, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    taus = np.asarray(taus, dtype=np.float64)
    lams = np.asarray(lams, dtype=np.float64)
    n = score.shape[0]
    if score.shape != (n, len(lams)) or taus.shape[0] != len(lams) or cost.shape != correct.shape or cost.shape[0] != n:
        raise DataValidationError(
            f"score {score.shape}, taus {taus.shape}, cost {cost.shape}, correct {correct.shape} must be "
            f"[n, n_lam], [n_lam, n_alpha], [n, M], [n, M] with n_lam = {len(lams)}"
        )
    rows = np.arange(n)
    out_c = np.empty((n, len(lams), taus.shape[1]), dtype=bool)
    out_cost = np.empty(out_c.shape, dtype=np.float64)
    out_local = np.empty(out_c.shape, dtype=bool)
    for i, lam in enumerate(lams):
        d = deferred_choice(proba, cost, float(lam), variant)  # [n]
        # eq. (cr2_rule): m̂ = m0 if s ≥ τ, else the deferred argmax — per α column at once
        acc = score[:, i].astype(np.float64)[:, None] >= taus[i][None, :]
        out_local[:, i] = acc
        out_c[:, i] = np.where(acc, correct[:, 0, None], correct[rows, d][:, None])
        out_cost[:, i] = np.where(acc, cost[:, 0, None], cost[rows, d][:, None])
    return Outcomes(correct=out_c, cost=out_cost, local=out_local)


@dataclass(frozen=True)
class TargetChoice:
    """The certified operating point for a target, with what it was chosen on."""

    mode: str  # "accuracy": accuracy ≥ target at least cost; "budget": mean cost ≤ target at best accuracy
    target: float  # the accuracy target t or the cost budget b
    delta: float  # P(the chosen point misses the target) ≤ δ
    lam: float  # chosen λ
    alpha: float  # chosen α
    tau: float  # its threshold (calibrated on the threshold half; exact in the score dtype)
    accuracy: float  # empirical accuracy on the selection half
    cost: float  # empirical mean normalised cost on the selection half
    local_rate: float  # empirical share accepted on the device on the selection half
    n_select: int  # selection-half size
    n_certified: int  # how many (λ, α) passed
    certified: np.ndarray = field(repr=False)  # [n_lam, n_alpha] bool
    p_values: np.ndarray = field(repr=False)  # [n_lam, n_alpha] float64
    rule: str = "crc"  # the rule that calibrated the candidate thresholds τ(λ; α) (cr2.crc.RULE_REGISTRY)

    @property
    def risk(self) -> str | None:
        """The risk the candidates' α bounds: teacher-disagreement, oracle-disagreement or avoidable-error."""
        r = rule_risk(self.rule)
        return None if r is None else r.name

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in ("mode", "target", "delta", "lam", "alpha", "tau", "accuracy", "cost",
                                               "local_rate", "n_select", "n_certified", "rule", "risk")}


def _fixed_sequence(p: np.ndarray, level: float, order: np.ndarray) -> np.ndarray:
    """Return the rejections of fixed-sequence testing along `order` within each row: [n_lam, n_alpha] bool."""
    passed = np.cumprod(p[:, order] <= level, axis=1).astype(bool)  # stop at the first failure
    out = np.zeros_like(passed)
    out[:, order] = passed
    return out


def select_by_target(
    outcomes: Outcomes,
    lams: np.ndarray,
    alphas: np.ndarray,
    taus: np.ndarray,
    *,
    target_accuracy: float | None = None,
    budget: float | None = None,
    delta: float,
    cost_max: float = 1.0,
) -> TargetChoice:
    """Return the certified (λ, α) for one target (exactly one of target_accuracy, budget); see the module docstring.

    outcomes: on the selection half, under thresholds `taus` [n_lam, n_alpha] fixed beforehand.
    cost_max: a bound on every normalised cost, fixed in advance (the Hoeffding–Bentkus p-value needs
    bounded losses); an observed cost above it is an error. Raises TargetInfeasibleError when no
    candidate is certified.
    """
    if (target_accuracy is None) == (budget is None):
        raise DataValidationError("give exactly one target: target_accuracy (e.g. 0.8) or budget (mean cost, e.g. 0.5)")
    if not 0.0 < delta < 1.0:
        raise DataValidationError(f"δ must lie in (0, 1), got {delta}")
    lams = np.asarray(lams, dtype=np.float64)
    alphas = np.asarray(alphas, dtype=np.float64)
    n, n_lam, n_alpha = outcomes.correct.shape
    if (n_lam, n_alpha) != (len(lams), len(alphas)) or np.shape(taus) != (n_lam, n_alpha):
        raise DataValidationError(f"outcomes {outcomes.correct.shape} do not match the grid ({len(lams)} λ × {len(alphas)} α)")
    if n == 0:
        raise DataValidationError("the selection set is empty; a target needs calibration queries to certify it")
    level = ltt_delta_per_lam(delta, n_lam)
    acc = outcomes.correct.mean(axis=0)  # [n_lam, n_alpha]
    mean_cost = outcomes.cost.mean(axis=0)
    local = outcomes.local.mean(axis=0)
    if target_accuracy is not None:
        mode, target = "accuracy", float(target_accuracy)
        if not 0.0 < target < 1.0:
            raise DataValidationError(f"an accuracy target must lie in (0, 1), got {target}")
        wrong = (~outcomes.correct).sum(axis=0)
        # LTT, 0/1 loss 1 − y: p = P(Bin(n, 1 − t) ≤ #wrong) for H0: 1 − accuracy > 1 − t
        p = binomial_tail_pvalue(wrong, n, 1.0 - target)
        order = np.argsort(alphas)  # conservative (most deferral) first
    else:
        mode, target = "budget", float(budget)  # type: ignore[arg-type]
        if not 0.0 < target < cost_max:
            raise DataValidationError(f"a cost budget must lie in (0, cost_max={cost_max:g}), got {target}")
        if outcomes.cost.max() > cost_max or outcomes.cost.min() < 0:
            raise DataValidationError(
                f"normalised costs span [{outcomes.cost.min():.4g}, {outcomes.cost.max():.4g}], outside [0, cost_max={cost_max:g}]; "
                "pass a larger cost_max fixed in advance (the Hoeffding–Bentkus p-value needs bounded costs)"
            )
        # LTT, loss c/cost_max ∈ [0, 1]: Hoeffding–Bentkus p-value for H0: E[c] > b
        p = hoeffding_bentkus_pvalue(mean_cost / cost_max, n, target / cost_max)
        order = np.argsort(alphas)[::-1]  # most local (cheapest) first
    certified = _fixed_sequence(p, level, order)
    if not certified.any():
        if mode == "accuracy":
            i, j = np.unravel_index(np.argmax(acc), acc.shape)
            best = f"the most accurate point reaches {acc[i, j]:.3f} on the selection set (λ={lams[i]:g}, α={alphas[j]:g})"
            what = f"accuracy ≥ {target:g}"
        else:
            i, j = np.unravel_index(np.argmin(mean_cost), mean_cost.shape)
            best = f"the cheapest point costs {mean_cost[i, j]:.3f} on the selection set (λ={lams[i]:g}, α={alphas[j]:g})"
            what = f"mean cost ≤ {target:g}"
        raise TargetInfeasibleError(
            f"no operating point on the calibrated grid ({n_lam} λ × {n_alpha} α) can be certified to meet {what} "
            f"with probability ≥ 1 − δ = {1 - delta:g} from N={n} selection queries; {best}. Relax the target, raise δ, "
            f"widen the λ/α grids, or add calibration data"
        )
    if mode == "accuracy":
        # least cost, then higher accuracy, then smaller λ, smaller α (np.lexsort: last key is primary)
        keys = (np.broadcast_to(alphas, acc.shape), np.broadcast_to(lams[:, None], acc.shape), -acc, mean_cost)
    else:
        keys = (np.broadcast_to(alphas, acc.shape), np.broadcast_to(lams[:, None], acc.shape), mean_cost, -acc)
    flat = np.lexsort(tuple(np.where(certified, k, np.inf).ravel() for k in keys))
    i, j = np.unravel_index(flat[0], acc.shape)
    return TargetChoice(mode=mode, target=target, delta=float(delta), lam=float(lams[i]), alpha=float(alphas[j]),
                        tau=float(np.asarray(taus)[i, j]), accuracy=float(acc[i, j]), cost=float(mean_cost[i, j]),
                        local_rate=float(local[i, j]), n_select=int(n), n_certified=int(certified.sum()),
                        certified=certified, p_values=p)


def split_for_target(n: int, rng: np.random.Generator, select_fraction: float = SELECT_FRACTION) -> tuple[np.ndarray, np.ndarray]:
    """Return (threshold rows, selection rows): one random split of the n calibration queries."""
    if not 0.0 < select_fraction < 1.0:
        raise DataValidationError(f"select_fraction must lie in (0, 1), got {select_fraction}")
    perm = rng.permutation(n)
    n_sel = int(round(select_fraction * n))
    if n_sel < 1 or n_sel >= n:
        raise DataValidationError(f"{n} calibration queries cannot be split into a threshold and a selection part")
    return np.sort(perm[n_sel:]), np.sort(perm[:n_sel])


def choose_by_target(
    score: np.ndarray,
    risk: np.ndarray,
    proba: np.ndarray,
    cost: np.ndarray,
    correct: np.ndarray,
    lams: np.ndarray,
    alphas: np.ndarray,
    *,
    rng: np.random.Generator,
    target_accuracy: float | None = None,
    budget: float | None = None,
    delta: float = 0.1,
    rule: str = "crc",
    rule_delta: float | None = None,
    variant: str = "edge-only",
    cost_max: float = 1.0,
    select_fraction: float = SELECT_FRACTION,
) -> TargetChoice:
    """Return the certified operating point for a target from one calibration set (the whole recipe).

    score: [n, n_lam] gate scores; risk: [n, n_lam] bool r(λ) — the label `rule` controls (teacher disagreement
    for crc, the real-label risks for crc-oracle / crc-avoidable); proba, cost, correct: [n, M]. The thresholds
    come from calibrate_table(rule, rule_delta) on the threshold rows, the certificate from select_by_target on
    the selection rows (split by `rng`); the choice records `rule` and so the risk its α bounds.
    """
    score = np.asarray(score)
    thr, sel = split_for_target(score.shape[0], rng, select_fraction)
    table = calibrate_table(score[thr], np.asarray(risk)[thr], lams, alphas, gate_fingerprint="-", dist_id="-",
                            label_source="-", rule=rule, delta=rule_delta)  # type: ignore[arg-type]
    order = np.argsort(np.asarray(lams, dtype=np.float64))
    out = operating_outcomes(score[sel][:, order], table.taus, np.asarray(table.lams), np.asarray(proba)[sel],
                             np.asarray(cost)[sel], np.asarray(correct)[sel], variant)
    choice = select_by_target(out, np.asarray(table.lams), np.asarray(table.alphas), table.taus,
                              target_accuracy=target_accuracy, budget=budget, delta=delta, cost_max=cost_max)
    return dataclasses.replace(choice, rule=rule)
