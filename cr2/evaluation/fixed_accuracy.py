"""Cost at a fixed accuracy on a method's monotone frontier, and its paired bootstrap (paper Fig. dumbbell_cost_saving).

The same rule as warehouse/views/v_fixed_accuracy.sql, in arrays, so that it can be recomputed on every
bootstrap resample: the frontier is the operating points no cheaper-or-equal point matches in accuracy;
the cost at target a* is linear between the two frontier points that bracket a* (the cheapest point if it
already reaches a*); a target above the method's best accuracy is NaN (not reached). `grid_cost_at` is
the no-interpolation variant (cheapest point with accuracy ≥ a*).

A comparison's estimand must exist on every bootstrap resample, so it is read on a target grid fixed before the
test split is read (`target_grid`: from the validation split's Always-model accuracies), and every side is charged
what a deployer would pay (`FallbackCost.charge`): the lower of its own frontier cost and the cheapest Always-model
that reaches the target on the same rows — a deployer who can reach a target more cheaply by always calling one model
would. Where the frontier misses, that Always cost; where no Always-model reaches the target on a resample, the
side's own cost if its frontier reaches it, else the most accurate Always-model's (below the target; it keeps the
statistic defined). No resample is dropped. A grid target that no Always-model reaches on the full TEST set would
charge a model below the target, so it is left out of the mean (`FallbackCost.reachable_grid`, with the reason
stored beside the mean).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from cr2.evaluation.statistics import Interval, bootstrap_interval, bootstrap_intervals, resample_counts, resampled_means
from cr2.core.errors import InvalidValueError

if TYPE_CHECKING:
    import pandas as pd

_EPS = 1e-12  # the view's tolerance on "accuracy ≥ target"


def _points(accuracy: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(accuracy, dtype=np.float64).ravel()
    c = np.asarray(cost, dtype=np.float64).ravel()
    if a.shape != c.shape:
        raise InvalidValueError(f"accuracy {a.shape} and cost {c.shape} must have one value per operating point")
    keep = np.isfinite(a) & np.isfinite(c)
    return a[keep], c[keep]


def frontier(accuracy: np.ndarray, cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(accuracy, cost) of the monotone frontier, ascending cost: strictly increasing accuracy along it."""
    a, c = _points(accuracy, cost)
    order = np.lexsort((-a, c))  # ascending cost, then best accuracy first among equal costs
    a, c = a[order], c[order]
    best_before = np.maximum.accumulate(np.concatenate([[-np.inf], a[:-1]]))
    on = a > best_before  # beats every cheaper-or-equal point (ties in both collapse to one)
    return a[on], c[on]


def frontier_cost_at(accuracy: np.ndarray, cost: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """[t] cost on the interpolated monotone frontier at each target accuracy; NaN where not reached (one sweep:
    `frontier_cost_at_each` of a single row)."""
    a, c = _points(accuracy, cost)
    t = np.asarray(targets, dtype=np.float64)
    return frontier_cost_at_each(a[None, :], c[None, :], t.ravel())[0].reshape(t.shape)


def frontier_cost_at_each(accuracy: np.ndarray, cost: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """The cost on each row's interpolated monotone frontier at each target: accuracy, cost [B, k] (one sweep per row,
    e.g. per resample) → [B, t]; NaN where a row does not reach the target, and a non-finite point is off every
    frontier. The frontier is `frontier`'s (ascending cost, strictly rising accuracy); a target at or below the
    cheapest frontier point costs that point, one between two frontier points is linear between them."""
    a = np.asarray(accuracy, dtype=np.float64)
    c = np.asarray(cost, dtype=np.float64)
    if a.ndim != 2 or a.shape != c.shape:
        raise InvalidValueError(f"accuracy {a.shape} and cost {c.shape} must both be [B, k]")
    t = np.asarray(targets, dtype=np.float64)
    b, k = a.shape
    out = np.full((b, t.size), np.nan)
    if k == 0 or b == 0:
        return out
    finite = np.isfinite(a) & np.isfinite(c)
    a, c = np.where(finite, a, -np.inf), np.where(finite, c, np.inf)  # sorts last and beats nothing
    order = np.lexsort((-a, c), axis=-1)  # per row: ascending cost, then best accuracy first among equal costs
    a, c, finite = (np.take_along_axis(x, order, axis=1) for x in (a, c, finite))
    best_before = np.maximum.accumulate(np.concatenate([np.full((b, 1), -np.inf), a[:, :-1]], axis=1), axis=1)
    on = (a > best_before) & finite
    # along a row the frontier's accuracy rises, so the first frontier point with accuracy ≥ target is the first
    # on-point that reaches it: the running best accuracy over on-points only rises at them, so that point is where
    # it first reaches the target — counted per target on [B, k] instead of a [B, k, t] array
    best = np.maximum.accumulate(np.where(on, a, -np.inf), axis=1)
    j = np.empty((b, t.size), dtype=np.int64)
    for i, target in enumerate(t - _EPS):
        j[:, i] = (best < target).sum(axis=1)
    hit = j < k
    j = np.where(hit, j, 0)
    last_on = np.maximum.accumulate(np.where(on, np.arange(k)[None, :], -1), axis=1)  # [B, k]
    rows = np.arange(b)[:, None]
    prev = np.where(j > 0, last_on[rows, np.maximum(j - 1, 0)], -1)
    first = hit & (prev < 0)
    out[first] = np.broadcast_to(c[rows, j], out.shape)[first]
    mid = hit & (prev >= 0)
    bi, ti = np.nonzero(mid)
    a1, a2, c1, c2 = a[bi, prev[mid]], a[bi, j[mid]], c[bi, prev[mid]], c[bi, j[mid]]
    out[mid] = c1 + (t[ti] - a1) * (c2 - c1) / (a2 - a1)
    return out


def grid_cost_at(accuracy: np.ndarray, cost: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """[t] cheapest operating point's cost with accuracy ≥ target (no interpolation); NaN where not reached."""
    a, c = _points(accuracy, cost)
    t = np.asarray(targets, dtype=np.float64)
    if a.size == 0:
        return np.full(t.shape, np.nan)
    reach = a[None, :] >= t[:, None] - _EPS
    return np.where(reach.any(axis=1), np.where(reach, c[None, :], np.inf).min(axis=1), np.nan)


def saving_pct(cost: np.ndarray, reference_cost: np.ndarray) -> np.ndarray:
    """Saving of a method against the reference at the same target, in % (positive: the method is cheaper)."""
    return 100.0 * (1.0 - np.asarray(cost, dtype=np.float64) / np.asarray(reference_cost, dtype=np.float64))


#: the one grid of target accuracies every fixed-accuracy saving is read at, 0.50 … 0.99 in steps of 0.01 (SQL twin:
#: the table macro target_grid() of warehouse/macros.sql, which v_fixed_accuracy reads)
VIEW_TARGETS = np.arange(50, 100) / 100.0
#: the paper's fixed-accuracy targets (§VII, Fig. dumbbell_cost_saving; SQL twin: paper_targets())
PAPER_TARGETS = (0.79, 0.80, 0.81, 0.82)


@dataclass(frozen=True)
class MethodOutcomes:
    """Per-query outcomes of one method over its λ sweep on the evaluated test rows (the same rows for every method)."""

    correct: np.ndarray  # [n, k] bool, y of the chosen model at each of the k operating points
    cost: np.ndarray  # [n, k] float, realised normalised cost c of the chosen model
    rows: np.ndarray | None = None  # [n] bool, rows accuracy and cost are means over (solvable queries); None: all

    def __post_init__(self) -> None:
        if np.shape(self.correct) != np.shape(self.cost) or np.ndim(self.correct) != 2:
            raise InvalidValueError(f"correct {np.shape(self.correct)} and cost {np.shape(self.cost)} must both be [n, k]")
        if self.rows is not None and np.shape(self.rows) != (np.shape(self.correct)[0],):
            raise InvalidValueError(f"rows {np.shape(self.rows)} must be [n] with n = {np.shape(self.correct)[0]}")

    def points(self, idx: np.ndarray | None = None, counts: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(accuracy, cost) of each operating point on all rows ([k]) or on each resample ([B, k]).

        A resample indexes all n rows; with `rows`, the means are over the drawn rows among them."""
        if idx is None and counts is None:
            r = slice(None) if self.rows is None else np.asarray(self.rows, dtype=bool)
            return (np.asarray(self.correct, dtype=np.float64)[r].mean(axis=0),
                    np.asarray(self.cost, dtype=np.float64)[r].mean(axis=0))
        if counts is None:
            counts = resample_counts(idx, np.shape(self.correct)[0])
        return (resampled_means(self.correct, None, self.rows, counts=counts),
                resampled_means(self.cost, None, self.rows, counts=counts))


def target_grid(correct: np.ndarray, rows: np.ndarray | None = None, candidates: np.ndarray = VIEW_TARGETS
                ) -> np.ndarray:
    """The targets a mean saving averages over, fixed from the VALIDATION split before any test number exists: the
    candidates (VIEW_TARGETS) from the device model's accuracy to the best Always-model's, both on `correct`
    ([n, M] bool, the validation rows; model 0 the device) over `rows` (the solvable ones). Where that span holds no
    candidate (the device is the most accurate model), the one candidate at or just below the best accuracy."""
    y = np.asarray(correct, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] == 0 or y.shape[1] == 0:
        raise InvalidValueError(f"a target grid needs validation correctness [n, M] with n, M ≥ 1, got {y.shape}")
    if rows is not None:
        y = y[np.asarray(rows, dtype=bool)]
        if y.shape[0] == 0:
            raise InvalidValueError("a target grid needs at least one counted validation row")
    acc = y.mean(axis=0)
    c = np.asarray(candidates, dtype=np.float64)
    grid = c[(c >= acc[0] - _EPS) & (c <= acc.max() + _EPS)]
    if grid.size == 0:
        below = c[c <= acc.max() + _EPS]
        grid = below[-1:] if below.size else c[:1]
    return np.round(grid, 6)


def always_outcomes(correct: np.ndarray, cost: np.ndarray, rows: np.ndarray | None = None) -> MethodOutcomes:
    """Every Always-m as one method's operating points: correct, cost [n, M] of each model on each query."""
    return MethodOutcomes(np.asarray(correct, dtype=bool), np.asarray(cost, dtype=np.float64), rows=rows)


def _fallback_at(accuracy: np.ndarray, cost: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cost [B, t], reached [B, t]) from Always points accuracy, cost [B, M]: the cheapest model with accuracy ≥
    target (reached), else the most accurate one (the cheapest among equally accurate ones; not reached)."""
    reach = accuracy[:, :, None] >= targets[None, None, :] - _EPS  # [B, M, t]
    cheapest = np.where(reach, cost[:, :, None], np.inf).min(axis=1)  # [B, t]
    best = np.lexsort((cost, -accuracy), axis=-1)[:, 0]  # [B]: most accurate, then cheapest
    top = cost[np.arange(len(best)), best]
    reached = np.isfinite(cheapest)
    return np.where(reached, cheapest, top[:, None]), reached


@dataclass(frozen=True)
class TargetGrid:
    """The targets a mean saving averages over: the validation grid less the targets no Always-model reaches on the
    full test set (`FallbackCost.reachable_grid`), and which were left out and why."""

    targets: np.ndarray  # [g] the targets the mean reads
    dropped: tuple[float, ...]  # the validation grid's targets left out
    reason: str | None  # why (None: nothing left out)

    @property
    def n_targets(self) -> int:
        return int(np.size(self.targets))


@dataclass(frozen=True)
class FallbackCost:
    """What a deployer pays at each target instead of a side's own frontier: the cheapest Always-model that reaches
    it on the full test set [t] and on each resample [B, t], computed on the same drawn rows (so a comparison stays
    paired); where no Always-model reaches a target, the most accurate one's cost with reached False."""

    targets: np.ndarray  # [t]
    full: np.ndarray  # [t] cost: the cheapest Always-model reaching the target, else the most accurate one's
    resampled: np.ndarray  # [B, t]
    reached_full: np.ndarray  # [t] bool: some Always-model reaches the target on the full test set
    reached_resampled: np.ndarray  # [B, t] bool: … on the resample
    best_accuracy_full: float = float("nan")  # the most accurate Always-model's accuracy on the full test set

    @classmethod
    def of_always(cls, always: MethodOutcomes, targets: np.ndarray, counts: np.ndarray) -> "FallbackCost":
        t = np.asarray(targets, dtype=np.float64)
        (fa, fc), (ra, rc) = always.points(), always.points(counts=counts)
        (full, reached_full), (resampled, reached) = _fallback_at(fa[None, :], fc[None, :], t), _fallback_at(ra, rc, t)
        best = float(np.max(fa)) if np.size(fa) else float("nan")
        return cls(t, full[0], resampled, reached_full[0], reached, best)

    def charge(self, own_full: np.ndarray, own_resampled: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """What a side pays, full [t] and per resample [B, t], from its own frontier cost (NaN: missed): the lower of
        its own and the cheapest Always-model reaching the target; where no Always-model reaches it, its own if
        finite, else the most accurate Always-model's. Finite wherever the Always costs are."""
        def one(own: np.ndarray, fb: np.ndarray, reached: np.ndarray) -> np.ndarray:
            own = np.asarray(own, dtype=np.float64)
            mine = np.isfinite(own)
            return np.where(reached, np.where(mine, np.minimum(own, fb), fb), np.where(mine, own, fb))

        return one(own_full, self.full, self.reached_full), one(own_resampled, self.resampled, self.reached_resampled)

    def reachable_grid(self, grid: np.ndarray) -> TargetGrid:
        """The validation `grid` (⊂ targets) less the targets no Always-model reaches on the full test set, with the
        reason. Where that leaves none, the whole grid is kept (each side then pays the most accurate Always-model
        where it misses) and the reason says so, so the mean stays defined."""
        g = np.round(np.asarray(grid, dtype=np.float64), 6)
        ok = self.reached_full[grid_columns(self.targets, g)]
        if ok.all():
            return TargetGrid(g, (), None)
        dropped = tuple(float(x) for x in g[~ok])
        shown = ", ".join(f"{x:.2f}" for x in dropped)
        best = f"the most accurate reaches {self.best_accuracy_full:.4f}"
        if not ok.any():
            return TargetGrid(g, (), f"no Always-model reaches any grid target ({shown}) on the test set ({best}); "
                                     "the mean keeps them all, a miss charged the most accurate Always-model")
        return TargetGrid(g[ok], dropped, f"left out {shown}: no Always-model reaches "
                                          f"{'it' if len(dropped) == 1 else 'them'} on the test set ({best})")


def cost_samples(method: MethodOutcomes, targets: np.ndarray, counts: np.ndarray, fallback: FallbackCost | None = None,
                 *, points: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None
                 ) -> tuple[np.ndarray, np.ndarray]:
    """A method's frontier cost at each target on the full test set [t] and on each resample [B, t]; with a fallback,
    what the method is charged (`FallbackCost.charge`: the lower of its own and the cheapest Always-model reaching the
    target; without one, its own, NaN where missed). points: (method.points(), method.points(counts=counts)) when the caller
    computed them already (e.g. for many methods in one product)."""
    t = np.asarray(targets, dtype=np.float64)
    full, resampled = points if points is not None else (method.points(), method.points(counts=counts))
    est, samples = frontier_cost_at(*full, t), frontier_cost_at_each(*resampled, t)
    if fallback is None:
        return est, samples
    if not np.array_equal(fallback.targets, t):
        raise InvalidValueError("the fallback cost was computed at other targets")
    return fallback.charge(est, samples)


def stacked_points(methods: list[MethodOutcomes], counts: np.ndarray) -> list[tuple[tuple, tuple]]:
    """(points(), points(counts)) of each of `methods` (all over the same rows), from one product per statistic
    instead of one per method."""
    if not methods:
        return []
    rows = methods[0].rows
    if any((m.rows is None) != (rows is None) or (rows is not None and not np.array_equal(m.rows, rows)) for m in methods):
        raise InvalidValueError("stacked_points needs methods evaluated over the same rows")
    stack = MethodOutcomes(np.concatenate([m.correct for m in methods], axis=1),
                           np.concatenate([m.cost for m in methods], axis=1), rows=rows)
    (fa, fc), (ra, rc) = stack.points(), stack.points(counts=counts)
    edges = np.cumsum([0] + [np.shape(m.correct)[1] for m in methods])
    return [((fa[i:j], fc[i:j]), (ra[:, i:j], rc[:, i:j])) for i, j in zip(edges[:-1], edges[1:])]


def grid_columns(targets: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Positions of the grid's targets among `targets` (every grid target must be one of them)."""
    t, g = np.round(np.asarray(targets, dtype=np.float64), 6), np.round(np.asarray(grid, dtype=np.float64), 6)
    pos = np.searchsorted(t, g)
    if g.size == 0 or (pos >= t.size).any() or not np.array_equal(t[np.minimum(pos, t.size - 1)], g):
        raise InvalidValueError(f"the target grid {g.tolist()} must be a non-empty subset of the sorted targets")
    return pos


def saving_intervals(method: MethodOutcomes, reference: MethodOutcomes, targets: np.ndarray, counts: np.ndarray,
                     fallback: FallbackCost, grid: np.ndarray, level: float = 0.95) -> tuple[list[Interval], Interval]:
    """Paired-bootstrap intervals (with their p) of the saving vs the reference at each target and of its mean over
    the fixed `grid` (⊂ targets) less its targets no Always-model reaches on the test set
    (`FallbackCost.reachable_grid`). Each resample recomputes both frontiers on the same drawn rows (`counts`, the
    evaluation's shared index); each side is charged `FallbackCost.charge`, so every statistic exists on every
    resample and every interval rests on all B of them."""
    (est_m, s_m), (est_r, s_r) = (cost_samples(x, targets, counts, fallback) for x in (method, reference))
    est, samples = saving_pct(est_m, est_r), saving_pct(s_m, s_r)
    lower, upper, p = bootstrap_intervals(samples, est, level)
    per_target = [Interval(float(e), float(lo), float(hi), level, int(samples.shape[0]), float(pv))
                  for e, lo, hi, pv in zip(est, lower, upper, p)]
    cols = grid_columns(targets, fallback.reachable_grid(grid).targets)
    return per_target, bootstrap_interval(samples[:, cols].mean(axis=1), float(est[cols].mean()), level)



def frontier_segments(points: pd.DataFrame) -> list[tuple[str, float, float]]:
    """The pooled accuracy–cost frontier over several methods' operating points (columns method, accuracy, cost) as
    runs of one method: (method, cost from, cost to), ascending cost. A point is on the frontier where it is more
    accurate than every cheaper point (equal cost: the more accurate first); consecutive frontier points of one
    method form one run."""
    p = points.sort_values(["cost", "accuracy"], ascending=[True, False])
    best, rows = -np.inf, []
    for r in p.itertuples():
        if r.accuracy > best + 1e-12:
            rows.append((r.method, r.cost))
            best = r.accuracy
    segments: list[list] = []
    for method, cost in rows:
        if segments and segments[-1][0] == method:
            segments[-1][2] = cost
        else:
            segments.append([method, cost, cost])
    return [tuple(x) for x in segments]
