"""Fit simulated-irt-v2's shape (r, ρ, w_s) to measured per-query correctness (docs/labels.md, "How v2 is fitted").

The simulator reproduces every (model, group) accuracy by construction, so only its structure is fitted,
each parameter to one measured statistic, by simulating on the very questions that were measured
(indirect inference: the same statistic is computed on measured and on simulated labels):

1. r (latent correlation): the value whose simulated pairwise correlations of per-query correctness
   are closest (least squares over the model pairs, mean over seeds) to the measured ones; a coarse
   grid, then a fine one around its best point. Var(δ) = 1 whatever ρ, so r is fitted first with ρ = 0.
2. ρ (predictable share): the value at which the cross-validated R² of a ridge regression from the
   query embedding to the pool's mean correctness, within group (the group mean removed), equals the
   measured one; linear interpolation between grid points, r fixed.
3. w_s (subset share): the between-group share of the measured predictable variance,
   R²(group) / (R²(group) + R²_cv(within)), on the measured mean correctness.

Everything here is arrays in, numbers out; the measured data and the embeddings are read by the caller.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

R_COARSE = tuple(np.round(np.arange(0.50, 0.96, 0.05), 2))
RHO_GRID = (0.0, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8, 1.0)
RIDGE_ALPHAS = (0.1, 1.0, 10.0, 100.0)
CV_FOLDS = 5


@dataclass(frozen=True)
class ShapeFit:
    """The fitted shape and the statistics it matched (measured vs simulated at the fit)."""

    latent_correlation: float
    predictable_share: float
    subset_share: float
    measured_correlations: list[float]  # upper-triangle pairs, row-major
    fitted_correlations: list[float]  # simulated at r, mean over seeds
    measured_r2: float  # CV R² of the mean correctness on the embedding, within group
    fitted_r2: float  # the same on simulated labels at (r, ρ), mean over seeds
    r2_between: float  # R² of the mean correctness on the group alone (measured)
    seeds: tuple[int, ...]
    path: list[dict] = field(default_factory=list)  # every evaluated (parameter, value, objective)


def pairwise_correlations(correct: np.ndarray) -> np.ndarray:
    """Pearson (phi) correlations of per-query correctness between every pair of models: upper triangle, [M(M−1)/2]."""
    c = np.corrcoef(np.asarray(correct, dtype=np.float64).T)
    return c[np.triu_indices(c.shape[0], 1)]


def within_group_r2(y: np.ndarray, embedding: np.ndarray, groups: np.ndarray, seed: int = 0) -> float:
    """Cross-validated R² (5 folds, the best of a few ridge penalties) of a ridge regression from the
    embedding (with intercept) to y − mean_group(y)."""
    y = np.asarray(y, dtype=np.float64)
    x = np.asarray(embedding, dtype=np.float64)
    resid = y - _group_means(y, groups)
    if resid.var() <= 0 or len(y) < CV_FOLDS * 2:
        return 0.0
    fold = np.random.default_rng(seed).permutation(len(y)) % CV_FOLDS
    pred = np.zeros((len(RIDGE_ALPHAS), len(y)))
    for k in range(CV_FOLDS):
        tr, te = fold != k, fold == k
        mx, my = x[tr].mean(axis=0), resid[tr].mean()
        xc = x[tr] - mx
        gram, xty = xc.T @ xc, xc.T @ (resid[tr] - my)
        for a, alpha in enumerate(RIDGE_ALPHAS):
            w = np.linalg.solve(gram + alpha * np.eye(gram.shape[0]), xty)
            pred[a, te] = (x[te] - mx) @ w + my
    r2 = 1.0 - np.mean((resid[None, :] - pred) ** 2, axis=1) / resid.var()
    return float(r2.max())


def between_group_r2(y: np.ndarray, groups: np.ndarray) -> float:
    """R² of y on its group alone: Var(group means) / Var(y)."""
    y = np.asarray(y, dtype=np.float64)
    return float(_group_means(y, groups).var() / y.var()) if y.var() > 0 else 0.0


def _group_means(y: np.ndarray, groups: np.ndarray) -> np.ndarray:
    _, inv = np.unique(np.asarray(groups).astype(str), return_inverse=True)
    return (np.bincount(inv, weights=y) / np.bincount(inv))[inv]


def fit_shape(
    correct: np.ndarray,
    groups: np.ndarray,
    n_choices: np.ndarray,
    embedding: np.ndarray,
    model_ids: Sequence[str],
    embedded: np.ndarray | None = None,
    seeds: Sequence[int] = (0, 1, 2),
    r_grid: Sequence[float] = R_COARSE,
    rho_grid: Sequence[float] = RHO_GRID,
) -> ShapeFit:
    """Fit (r, ρ, w_s) of simulated-irt-v2 to measured correctness [n, M] of `model_ids` on n questions.

    groups: [n] the unit whose accuracy the simulator matches (MMLU-Pro: category); n_choices: [n] options;
    embedding: [n, d] e(x), read only on the rows `embedded` ([n] bool; None: all), where ρ and w_s are
    fitted (r, which does not involve the text, is fitted on every row).
    """
    from cr2.config import SimulatorShape
    from cr2.labels.simulator_v2 import draw_latents, labels_from_draws

    y = np.asarray(correct, dtype=bool)
    n, m = y.shape
    groups = np.asarray(groups).astype(str)
    n_choices = np.asarray(n_choices, dtype=np.int64)
    emb = np.asarray(embedding, dtype=np.float64)
    rows = np.ones(n, dtype=bool) if embedded is None else np.asarray(embedded, dtype=bool)
    ids = np.array([f"q{i:06d}" for i in range(n)])
    path: list[dict] = []

    def prepare(sel: np.ndarray, x: np.ndarray) -> tuple:
        g = groups[sel]
        targets = {(mid, c): float(y[sel][g == c, j].mean()) for j, mid in enumerate(model_ids) for c in np.unique(g)}
        # the random terms do not depend on the shape: draw them once per seed
        draws = {s: draw_latents(ids[sel], g, g, x, list(model_ids), s) for s in seeds}
        return g, targets, draws

    def simulate(ctx: tuple, sel: np.ndarray, r: float, rho: float, seed: int) -> np.ndarray:
        g, targets, draws = ctx
        shape = SimulatorShape(name="fit", latent_correlation=r, predictable_share=rho, subset_share=0.0)
        return labels_from_draws(draws[seed], g, n_choices[sel], list(model_ids), targets, shape)[0]

    # 1. r: pairwise correlations, every row (ρ = 0: the text plays no part)
    everyone = np.ones(n, dtype=bool)
    ctx_all = prepare(everyone, np.zeros((n, 1)))
    measured_corr = pairwise_correlations(y)

    def corr_loss(r: float) -> tuple[float, np.ndarray]:
        sims = np.mean([pairwise_correlations(simulate(ctx_all, everyone, r, 0.0, s)) for s in seeds], axis=0)
        loss = float(np.sum((sims - measured_corr) ** 2))
        path.append({"parameter": "latent_correlation", "value": float(r), "objective": loss})
        return loss, sims

    fits = {float(r): corr_loss(float(r)) for r in r_grid}
    best = min(fits, key=lambda r: fits[r][0])
    step = float(np.min(np.diff(sorted(r_grid)))) if len(r_grid) > 1 else 0.05
    for r in np.round(np.arange(best - step + 0.01, best + step - 0.005, 0.01), 2):
        if 0.0 < r < 1.0 and float(r) not in fits:
            fits[float(r)] = corr_loss(float(r))
    r_hat = min(fits, key=lambda r: fits[r][0])

    # 2. ρ: CV R² of the pool's mean correctness on the embedding, within group, on the embedded rows
    ctx_emb = prepare(rows, emb[rows])
    g_emb = groups[rows]
    mean_y = y[rows].mean(axis=1)
    measured_r2 = within_group_r2(mean_y, emb[rows], g_emb)

    def sim_r2(rho: float) -> float:
        return float(np.mean([within_group_r2(simulate(ctx_emb, rows, r_hat, rho, s).mean(axis=1), emb[rows], g_emb)
                              for s in seeds]))

    curve = []
    for rho in rho_grid:
        curve.append(sim_r2(float(rho)))
        path.append({"parameter": "predictable_share", "value": float(rho), "objective": curve[-1]})
    rho_hat = _invert_monotone(np.asarray(rho_grid, dtype=float), np.maximum.accumulate(curve), measured_r2)
    # 3. w_s: the between-group share of the measured predictable variance
    r2_between = between_group_r2(mean_y, g_emb)
    return ShapeFit(
        latent_correlation=round(r_hat, 3),
        predictable_share=round(rho_hat, 3),
        subset_share=round(r2_between / (r2_between + max(measured_r2, 0.0)), 3) if r2_between > 0 else 0.0,
        measured_correlations=[round(float(v), 4) for v in measured_corr],
        fitted_correlations=[round(float(v), 4) for v in fits[r_hat][1]],
        measured_r2=round(measured_r2, 4),
        fitted_r2=round(sim_r2(rho_hat), 4),
        r2_between=round(r2_between, 4),
        seeds=tuple(int(s) for s in seeds),
        path=path,
    )


def _invert_monotone(x: np.ndarray, fx: np.ndarray, target: float) -> float:
    """x at which the non-decreasing fx reaches `target` (linear interpolation; clipped to the grid's ends)."""
    if target <= fx[0]:
        return float(x[0])
    if target >= fx[-1]:
        return float(x[-1])
    j = int(np.searchsorted(fx, target))
    lo, hi = fx[j - 1], fx[j]
    w = 0.0 if hi == lo else (target - lo) / (hi - lo)
    return float(x[j - 1] + w * (x[j] - x[j - 1]))
