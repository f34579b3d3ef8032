"""Validity over re-splits: the one verdict of a guarantee, per (router, rule, α, scenario).

A guarantee promises, cell by cell, that a Monte-Carlo quantity stays at or below its bound. A cell is one λ for the
crc rules (E[risk] ≤ α at every λ: the quantity is the mean test risk over re-splits, with its Monte-Carlo standard
error), one (group, λ) for Mondrian CRC (E[risk | group] ≤ α), and one α for the ltt rules and the target mode
(P(some λ has risk > α) ≤ δ, P(the chosen point misses) ≤ δ: the quantity is the share of re-splits).

The test. Per cell, a one-sided test of H0 "the promise holds here" (quantity ≤ bound) against "it is violated"
(quantity > bound): for a mean, z = (mean − bound) / se and p = 1 − Φ(z) (the normal approximation to a mean over
the re-splits; a cell with se = 0 has p = 0 above its bound and p = 1 at or below it); for a share, the exact
binomial p = P(Bin(B, bound) ≥ hits) over the B re-splits.

The family. The cells of ONE verdict: the λ grid of one (router, rule, α, scenario) (the groups × λ of a Mondrian
one; the single cell of an ltt or target one). Holm's step-down at 5 % over those cells; the verdict is
"violation detected" where Holm rejects at least one cell, else "no violation detected". This controls, for each
verdict on its own, the probability of reporting "violation detected" for a guarantee whose every cell keeps its
promise at 5 % or less (family-wise over its cells, under any dependence between them). It does not correct across
verdicts: a table of V verdicts whose guarantees all hold shows on average at most 0.05·V "violation detected".
"No violation detected" is not a proof of validity: it says the re-splits are consistent with the promise at
every cell, at the power their number of re-splits gives.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cr2.core.errors import InvalidValueError
from cr2.evaluation.statistics import Verdict, holm_adjust

VIOLATION = "violation detected"
NO_VIOLATION = "no violation detected"
WORDS = (NO_VIOLATION, VIOLATION)
LEVEL = 0.05  # the family-wise level of one verdict
KINDS = ("mean", "share")


@dataclass(frozen=True)
class ValidityVerdict:
    """One guarantee's verdict over its cells, and the cell that decided it (the smallest one-sided p)."""

    verdict: str | None  # NO_VIOLATION | VIOLATION; None: no cell with a finite estimate
    n_cells: int  # cells tested (finite estimate)
    n_violated: int  # cells Holm rejects at LEVEL
    worst: int  # index into the inputs of the cell with the smallest p (−1 without a finite cell)
    value: float  # that cell's Monte-Carlo estimate
    se: float  # its Monte-Carlo standard error
    bound: float  # its bound
    p: float  # its one-sided p-value
    p_holm: float  # its Holm-adjusted p-value: the smallest adjusted p of the family


def cell_p_values(values, ses, bounds, *, kind: str = "mean", n_resplits: int | None = None) -> np.ndarray:
    """One-sided p-values of H0 "quantity ≤ bound" per cell (NaN where the estimate is not finite).

    kind "mean": p = 1 − Φ((value − bound) / se); se = 0 (or missing) gives p = 0 above the bound, 1 at or below.
    kind "share": value is a share of n_resplits re-splits; p = P(Bin(n_resplits, bound) ≥ round(value · n_resplits)).
    """
    from scipy import stats

    if kind not in KINDS:
        raise InvalidValueError(f"kind must be one of {KINDS}, got {kind!r}")
    v = np.asarray(values, dtype=np.float64).ravel()
    b = np.broadcast_to(np.asarray(bounds, dtype=np.float64), v.shape)
    p = np.full(v.shape, np.nan)
    ok = np.isfinite(v) & np.isfinite(b)
    if kind == "share":
        if n_resplits is None or int(n_resplits) < 1:
            raise InvalidValueError("a share's test needs the number of re-splits it counts (n_resplits ≥ 1)")
        n = int(n_resplits)
        hits = np.rint(v[ok] * n)
        p[ok] = stats.binom.sf(hits - 1, n, np.clip(b[ok], 0.0, 1.0))  # P(X ≥ hits)
        return np.clip(p, 0.0, 1.0)
    se = np.nan_to_num(np.broadcast_to(np.asarray(ses, dtype=np.float64), v.shape), nan=0.0)
    pos = ok & (se > 0)
    p[pos] = stats.norm.sf((v[pos] - b[pos]) / se[pos])
    flat = ok & ~(se > 0)
    p[flat] = np.where(v[flat] > b[flat], 0.0, 1.0)
    return p


def validity_verdict(values, ses, bound, *, kind: str = "mean", n_resplits: int | None = None,
                     level: float = LEVEL) -> ValidityVerdict:
    """The verdict of one guarantee over its cells: "violation detected" where Holm over the cells rejects one.

    values, ses: [n_cells] Monte-Carlo estimates and standard errors (ses unused for kind "share"); bound: a scalar or
    [n_cells]. See the module docstring for the test and the family it controls.
    """
    v = np.asarray(values, dtype=np.float64).ravel()
    se = np.broadcast_to(np.asarray(ses if ses is not None else np.nan, dtype=np.float64), v.shape)
    b = np.broadcast_to(np.asarray(bound, dtype=np.float64), v.shape)
    p = cell_p_values(v, se, b, kind=kind, n_resplits=n_resplits)
    ok = np.isfinite(p)
    if not ok.any():
        return ValidityVerdict(None, 0, 0, -1, float("nan"), float("nan"), float(b.max()) if b.size else float("nan"),
                               float("nan"), float("nan"))
    adjusted = holm_adjust(p)
    # the deciding cell: the smallest p; among equal p (e.g. every cell at p = 1) the one furthest above its bound
    order = np.lexsort((-(np.where(ok, v - b, -np.inf)), np.where(ok, p, np.inf)))
    w = int(order[0])
    n_violated = int((adjusted[ok] < level).sum())
    return ValidityVerdict(Verdict(VIOLATION if n_violated else NO_VIOLATION), int(ok.sum()), n_violated, w, float(v[w]),
                           float(se[w]) if np.isfinite(se[w]) else float("nan"), float(b[w]), float(p[w]),
                           float(adjusted[w]))


# ---------------------------------------------------------------- the software check: mean against its exact value
MATCHES_EXACT = "matches its exact expectation"
DIFFERS_EXACT = "differs from its exact expectation"
EXACT_WORDS = (MATCHES_EXACT, DIFFERS_EXACT)


def exactness_verdict(values, ses, exact, *, n=None, level: float = LEVEL) -> ValidityVerdict:
    """Whether a family's Monte-Carlo means agree with their exact expectations (cr2.crc.expected_resplit_risk): per
    cell a two-sided z = (mean − exact) / se, p = 2·(1 − Φ(|z|)), Holm at `level` over the cells; DIFFERS_EXACT where
    Holm rejects one.

    A cell whose re-splits all gave one value has se = 0 and no z. A risk lies in [0, 1], so E[risk] = μ puts at least
    probability μ on risk > 0: n re-splits (`n`, per cell) all at 0 have probability at most (1 − μ)^n, and all at 1
    at most μ^n — p = min(1, 2·that), a tiny exact expectation agreeing with a run of zeros. Any other flat cell (or
    one without n) has p = 0 where mean ≠ exact, else 1.

    The one-sided promise test cannot see a bug that keeps every mean just under α (a threshold one risky point too
    strict, a tie broken the wrong way); the exact expectation is what a correct implementation's mean converges to,
    so this test sees a bias of a few Monte-Carlo SEs in either direction. `bound` of the result is the deciding
    cell's exact expectation. Cells without a finite exact value are not tested."""
    from scipy import stats

    v = np.asarray(values, dtype=np.float64).ravel()
    se = np.nan_to_num(np.broadcast_to(np.asarray(ses, dtype=np.float64), v.shape), nan=0.0)
    e = np.broadcast_to(np.asarray(exact, dtype=np.float64), v.shape)
    ok = np.isfinite(v) & np.isfinite(e)
    if not ok.any():
        return ValidityVerdict(None, 0, 0, -1, float("nan"), float("nan"), float("nan"), float("nan"), float("nan"))
    p = np.full(v.shape, np.nan)
    pos = ok & (se > 0)
    p[pos] = 2.0 * stats.norm.sf(np.abs(v[pos] - e[pos]) / se[pos])
    flat = ok & ~(se > 0)
    p[flat] = np.where(np.isclose(v[flat], e[flat], rtol=1e-12, atol=1e-15), 1.0, 0.0)
    if n is not None:
        count = np.broadcast_to(np.asarray(n, dtype=np.float64), v.shape)
        counted = flat & np.isfinite(count) & (count > 0) & (p == 0.0) & (e >= 0.0) & (e <= 1.0)
        with np.errstate(divide="ignore"):
            zeros, ones = counted & (v == 0.0), counted & (v == 1.0)
            p[zeros] = np.minimum(1.0, 2.0 * np.exp(count[zeros] * np.log1p(-e[zeros])))
            p[ones] = np.minimum(1.0, 2.0 * np.exp(count[ones] * np.log(e[ones])))
    adjusted = holm_adjust(p)
    order = np.lexsort((-np.where(ok, np.abs(v - e), -np.inf), np.where(ok, p, np.inf)))
    w = int(order[0])
    n_rejected = int((adjusted[ok] < level).sum())
    return ValidityVerdict(Verdict(DIFFERS_EXACT if n_rejected else MATCHES_EXACT), int(ok.sum()), n_rejected, w,
                           float(v[w]), float(se[w]), float(e[w]), float(p[w]), float(adjusted[w]))


__all__ = ["DIFFERS_EXACT", "EXACT_WORDS", "KINDS", "LEVEL", "MATCHES_EXACT", "NO_VIOLATION", "VIOLATION", "WORDS",
           "ValidityVerdict", "cell_p_values", "exactness_verdict", "validity_verdict"]
