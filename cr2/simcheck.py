"""The sim-to-real check: measured vs simulated correctness labels on the same questions (docs/labels.md).

Two families of statistics, each a list of tidy rows {statistic, model, other, lam, target, value}:

- label structure (`label_structure`): share of questions some model solves, each model's accuracy
  (overall and on the solvable ones), pairwise correlations of per-query correctness, and
  P(device right | edge model right / wrong);
- routing outcomes (`routing_outcomes`): each router's accuracy and cost per λ on the test split (its
  accuracy–cost frontier), the fixed-accuracy saving of each learned router vs KNN, and CR²'s test
  false-acceptance risk and local rate per λ at one α — with the library's routers, metrics and CRC.

Arrays in, rows out; the caller (tasks/simcheck.py) reads the measured data, embeds, simulates, and
writes the rows. `summarise` turns rows over simulator seeds into mean / sd / 5–95 % per statistic.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from cr2.data import RoutingSet
from cr2.errors import InvalidValueError
from cr2.fixed_accuracy import VIEW_TARGETS

LEARNED = ("knn", "mlp", "embedllm", "llmrank")


def _row(statistic: str, value: float, model: str = "", other: str = "", lam: float | None = None,
         target: float | None = None) -> dict:
    return {"statistic": statistic, "model": model, "other": other, "lam": lam, "target": target,
            "value": float(value)}


# ---------------------------------------------------------------- label structure
def label_structure(correct: np.ndarray, model_ids: Sequence[str], largest: str | None = None) -> list[dict]:
    """Structure statistics of correctness labels [n, M] (pool order, device first) as tidy rows.

    largest: the pool's largest (reference) model; adds p_device_given_largest_wrong (default: the last model).
    """
    y = np.asarray(correct, dtype=bool)
    n, m = y.shape
    if m != len(model_ids):
        raise InvalidValueError(f"correct has {m} columns, model_ids {len(model_ids)}")
    solvable = y.any(axis=1)
    rows = [_row("solvable_share", solvable.mean())]
    for j, mid in enumerate(model_ids):
        rows.append(_row("accuracy", y[:, j].mean(), mid))
        rows.append(_row("accuracy_on_solvable", y[solvable, j].mean() if solvable.any() else np.nan, mid))
    corr = np.corrcoef(y.T.astype(np.float64))
    for a in range(m):
        for b in range(a + 1, m):
            rows.append(_row("correlation", corr[a, b], model_ids[a], model_ids[b]))
    for j in range(1, m):
        right = y[:, j]
        rows.append(_row("p_device_given_right", y[right, 0].mean() if right.any() else np.nan, model_ids[0],
                         model_ids[j]))
        rows.append(_row("p_device_given_wrong", y[~right, 0].mean() if (~right).any() else np.nan, model_ids[0],
                         model_ids[j]))
    big = list(model_ids).index(largest) if largest is not None else m - 1
    wrong = ~y[:, big]
    rows.append(_row("p_device_given_largest_wrong", y[wrong, 0].mean() if wrong.any() else np.nan, model_ids[0],
                     model_ids[big]))
    return rows


# ---------------------------------------------------------------- routing outcomes
@dataclass(frozen=True)
class RoutingCheckSpec:
    """What the routing part of the check fits and sweeps."""

    routers: tuple[str, ...] = LEARNED  # learned one-shot baselines (cr2.routers registry)
    lams: tuple[float, ...] = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0, 12.0, 20.0)
    alpha: float = 0.01  # CR²'s risk level
    router_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    num_threads: int = 1
    exclude_unsolvable: bool = True  # as the pipeline's evaluation (paper §VII-A)


@dataclass(frozen=True)
class SplitSets:
    """The four sets the pipeline uses: fit on train (checkpoints on dev), calibrate on val, report on test."""

    train: RoutingSet
    dev: RoutingSet
    val: RoutingSet
    test: RoutingSet


def split_sets(data: RoutingSet, split: np.ndarray, dev: np.ndarray) -> SplitSets:
    """SplitSets from a RoutingSet, split [n] in {train, val, test} and the dev flag [n] (a part of train)."""
    split = np.asarray(split).astype(str)
    dev = np.asarray(dev, dtype=bool)
    return SplitSets(train=data.subset((split == "train") & ~dev), dev=data.subset((split == "train") & dev),
                     val=data.subset(split == "val"), test=data.subset(split == "test"))


def fixed_accuracy_savings(points: dict[str, list[tuple[float, float]]],
                           targets: Sequence[float] = tuple(VIEW_TARGETS)) -> list[dict]:
    """Saving vs KNN (%) of each router at each target it and KNN reach: 100·(1 − min cost / KNN's min cost).

    points: {router: [(accuracy, cost), …]}; the same rule as warehouse/views/v_fixed_accuracy.sql (best
    operating point with accuracy ≥ target, no interpolation).
    """
    def min_cost(pts: list[tuple[float, float]], t: float) -> float:
        ok = [c for a, c in pts if a >= t - 1e-12]
        return min(ok) if ok else np.nan

    rows = []
    for t in targets:
        knn = min_cost(points["knn"], t)
        if not np.isfinite(knn) or knn <= 0:
            continue
        for name, pts in points.items():
            c = min_cost(pts, t)
            if name != "knn" and np.isfinite(c):
                rows.append(_row("saving_vs_knn_pct", 100.0 * (1.0 - c / knn), name, target=float(t)))
    return rows


def routing_outcomes(sets: SplitSets, spec: RoutingCheckSpec, teacher_spec: Any, gate_spec: Any,
                     seed: int = 0) -> list[dict]:
    """Fit every router and CR² on sets.train/dev, calibrate CR² on val, sweep λ on test: tidy rows.

    Rows: accuracy / cost / local_rate per (router, λ) (accuracy and cost over the solvable test queries
    when spec.exclude_unsolvable), CR²'s risk (every test query) per λ at spec.alpha, and
    saving_vs_knn_pct per (learned router or cr2, target).
    """
    from cr2.metrics import accuracy, evaluable_mask, false_acceptance_risk, local_rate, mean_cost
    from cr2.routers import get_router, router_class
    from cr2.routers.base import one_shot_choice
    from cr2.routers.cr2_router import CR2Router
    from cr2.data import Decisions

    test = sets.test
    keep = evaluable_mask(test) if spec.exclude_unsolvable else np.ones(len(test), dtype=bool)
    kept = test.subset(keep)
    rows: list[dict] = []
    points: dict[str, list[tuple[float, float]]] = {}

    def record(name: str, lam: float, chosen: np.ndarray) -> None:
        dec = Decisions(chosen=chosen[keep], accepted_local=chosen[keep] == 0)
        acc, cost = accuracy(kept, dec), mean_cost(kept, dec)
        points.setdefault(name, []).append((acc, cost))
        rows.extend([_row("accuracy", acc, name, lam=lam), _row("cost", cost, name, lam=lam),
                     _row("local_rate", local_rate(dec), name, lam=lam)])

    for name in spec.routers:
        accepted = router_class(name)._param_names()
        params = {k: v for k, v in (("seed", seed), ("num_threads", spec.num_threads)) if k in accepted}
        router = get_router(name, **{**params, **spec.router_params.get(name, {})}).fit(sets.train, sets.dev)
        p_hat = router.predict_proba(test)
        for lam in spec.lams:
            record(name, float(lam), one_shot_choice(p_hat, test.cost, float(lam)))

    cr2 = CR2Router(teacher_spec, gate_spec, alpha=spec.alpha, num_threads=spec.num_threads).fit(sets.train, sets.dev)
    cal_lams = [lam for lam in spec.lams if lam > 0]
    cr2.calibrate(sets.val, cal_lams, [spec.alpha], dist_id="simcheck", label_source="simcheck")
    proba = cr2.teacher_.predict_proba(test.embedding)
    for lam in cal_lams:
        dec = cr2.route(test, lam)
        record("cr2", float(lam), dec.chosen)
        rows.append(_row("risk", false_acceptance_risk(proba, test, dec, lam), "cr2", lam=float(lam)))
    rows.extend(fixed_accuracy_savings(points))
    return rows


# ---------------------------------------------------------------- Monte-Carlo summary
def summarise(rows: Sequence[dict]) -> list[dict]:
    """Rows {source, seed, section, statistic, model, other, lam, target, value} → one row per statistic and
    source with n_seeds, mean, sd, q05, q95 over seeds."""
    import pandas as pd

    df = pd.DataFrame(list(rows))
    keys = ["source", "section", "statistic", "model", "other", "lam", "target"]
    df[["lam", "target"]] = df[["lam", "target"]].fillna(-1.0)
    out = (df.groupby(keys, dropna=False)["value"]
           .agg(n_seeds="count", mean="mean", sd="std",
                q05=lambda v: float(np.quantile(v, 0.05)), q95=lambda v: float(np.quantile(v, 0.95)))
           .reset_index())
    out[["lam", "target"]] = out[["lam", "target"]].where(out[["lam", "target"]] >= 0)
    return out.to_dict("records")
