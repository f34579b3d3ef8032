"""The exact expectation of a calibrated rule's test risk over random calibration/test re-splits of one pool.

A re-split draws a calibration set C of N rows uniformly at random from a pool of n rows (the rest, n − N rows, is
the test set), calibrates τ on C and measures R̂ = #{test i : r_i = 1, s_i ≥ τ} / (n − N). For every rule of the
form "accept at most k risky calibration points" (crc, empirical, ltt and their label variants: k depends on N, α
and δ only, cr2.crc.rules.allowed_risky_count), τ is the next score above v_{k+1}, the (k+1)-th largest risky
calibration score, so a test row i is accepted iff s_i > v_{k+1}, i.e. iff at most k risky calibration rows have a
score ≥ s_i. Given that i is a test row, C is a uniform N-subset of the n − 1 other rows, so that count is
hypergeometric and, summing over the risky rows (each a test row with probability (n − N)/n):

    E[R̂] = (1/n) Σ_{i : r_i = 1} P(H_i ≤ k),   H_i ~ Hypergeometric(n − 1 rows, a_i marked, N drawn),
    a_i = #{j ≠ i : r_j = 1, s_j ≥ s_i}   (ties counted: a tied risky row blocks, as `≥` and nextafter decide).

Exact for any scores, ties included (no continuity assumption), for a 0/1 risk label. k = −1 (τ = +∞) gives 0;
k ≥ N gives the pool's risk R/n. This is the expectation conformal risk control bounds by α (paper eq. crc_tau:
E[r·1[s ≥ τ*]] ≤ α for exchangeable data); re-splits of a fixed pool are exchangeable, so for crc it is ≤ α, and the
Monte-Carlo mean of the re-splits (cr2.evaluation.metrics.resplit_risk) estimates exactly this number.

Not covered: Mondrian CRC (a group's calibration size is itself random over re-splits, and groups too small to
calibrate defer), whose per-group expectation is a mixture over group sizes not derived here; and the
high-probability promises (ltt's P(some λ over α), the target mode's miss share), which are shares, not means.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from cr2.crc.registry import Rule


def expected_resplit_risk(scores: np.ndarray, risks: np.ndarray, n_calib: int,
                          alphas: Sequence[float] | np.ndarray, rule: Rule = "crc",
                          delta: float | None = None) -> np.ndarray:
    """Return E[test risk] of `rule`'s threshold over uniform re-splits of the pool into n_calib calibration rows and
    the rest, per α: float64 [n_alpha] (the formula in the module docstring).

    scores, risks: one λ's pooled scores and 0/1 risk labels [n] (the rule's own label); rule / delta: as
    cr2.crc.calibrate_thresholds takes them (δ for one λ, for the ltt rules).
    """
    from scipy import stats

    from cr2.core.errors import DataValidationError
    from cr2.crc.rules import _check_pair, allowed_risky_count

    scores, risks = _check_pair(scores, risks)
    n = len(scores)
    if not 0 < int(n_calib) < n:
        raise DataValidationError(f"n_calib={n_calib} must leave a test set out of the pool of {n}")
    k = allowed_risky_count(int(n_calib), alphas, rule, delta)
    risky = np.sort(scores[risks].astype(np.float64))  # widened as cr2.crc.accept compares: exact for float16/32
    # a_i: the other risky rows with a score ≥ s_i (ties included)
    marked = len(risky) - np.searchsorted(risky, risky, side="left") - 1
    values, count = np.unique(marked, return_counts=True)  # tied rows share one term
    cdf = stats.hypergeom.cdf(k[None, :], n - 1, values[:, None], int(n_calib))  # [n_distinct, n_alpha]; k = −1 → 0
    return (count[:, None] * cdf).sum(axis=0) / n


__all__ = ["expected_resplit_risk"]
