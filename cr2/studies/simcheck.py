"""The sim-to-real check: measured vs simulated correctness labels on the same questions (docs/labels.md).

Two families of statistics, each a list of tidy rows {statistic, model, other, lam, target, value}:

- label structure (`label_structure`): share of questions some model solves, each model's accuracy
  (overall and on the solvable ones), pairwise correlations of per-query correctness, and
  P(device right | edge model right / wrong);
- routing outcomes (`routing_outcomes`): each router's accuracy and cost per λ on the test split (its
  accuracy–cost frontier), the fixed-accuracy saving of each learned router vs KNN, and CR²'s test
  false-acceptance risk and local rate per λ at one α — with the library's routers, metrics and CRC.

`label_sweep` runs the check: the measured labels and every simulated source × seed through both families.
Arrays in, rows out; the callers (tasks/simcheck.py on the MMLU-Pro files, tasks/simcheck_measured.py on a
measured warehouse) read the data, embed, price and write the rows; the view v_simcheck summarises over seeds.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from cr2.core.data import RoutingSet
from cr2.core.errors import InvalidValueError
from cr2.evaluation.fixed_accuracy import VIEW_TARGETS
from cr2.routers import method_router, reference_router, routers_tagged

if TYPE_CHECKING:
    import pandas as pd

LEARNED = routers_tagged("paper", kinds=("baseline",))  # the paper's learned baselines (router catalogue)


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

    @classmethod
    def from_config(cls, config: Any) -> "RoutingCheckSpec":
        """The check as the pipeline evaluates: its default α, baseline parameters and solvable-rows rule."""
        return cls(alpha=config.grids.default_alpha, router_params=config.baselines.params,
                   exclude_unsolvable=config.evaluation.exclude_unsolvable)


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
    """Saving vs KNN (%) of each router at each target it and KNN reach, on the best grid point with accuracy ≥ target
    (cr2.evaluation.fixed_accuracy.grid_cost_at: the rule of v_fixed_accuracy's cost_grid, no interpolation).

    points: {router: [(accuracy, cost), …]}.
    """
    from cr2.evaluation.fixed_accuracy import grid_cost_at, saving_pct

    t = np.asarray(targets, dtype=np.float64)
    cost = {name: grid_cost_at(*np.asarray(pts, dtype=np.float64).reshape(-1, 2).T, t) for name, pts in points.items()}
    ref = reference_router()
    knn = cost[ref]
    rows = []
    for i, target in enumerate(t):
        if not np.isfinite(knn[i]) or knn[i] <= 0:
            continue
        for name, c in cost.items():
            if name != ref and np.isfinite(c[i]):
                rows.append(_row("saving_vs_knn_pct", float(saving_pct(c[i], knn[i])), name, target=float(target)))
    return rows


def routing_outcomes(sets: SplitSets, spec: RoutingCheckSpec, teacher_spec: Any, gate_spec: Any,
                     seed: int = 0) -> list[dict]:
    """Fit every router and CR² on sets.train/dev, calibrate CR² on val, sweep λ on test: tidy rows.

    Rows: accuracy / cost / local_rate per (router, λ) (accuracy and cost over the solvable test queries
    when spec.exclude_unsolvable), CR²'s risk (every test query) per λ at spec.alpha, and
    saving_vs_knn_pct per (learned router or cr2, target).
    """
    from cr2.evaluation.metrics import accuracy, evaluable_mask, false_acceptance_risk, local_rate, mean_cost
    from cr2.routers import get_router, router_class
    from cr2.routers.base import one_shot_choice
    from cr2.routers.cr2_router import CR2Router
    from cr2.core.data import Decisions

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
        record(method_router(), float(lam), dec.chosen)
        rows.append(_row("risk", false_acceptance_risk(proba, test, dec, lam), method_router(), lam=float(lam)))
    rows.extend(fixed_accuracy_savings(points))
    return rows


# ---------------------------------------------------------------- the sweep
def group_accuracy(correct: np.ndarray, groups: np.ndarray, model_ids: Sequence[str]) -> dict[tuple[str, str], float]:
    """{(model, group): accuracy} of labels [n, M]: the targets every simulated label set is matched to."""
    y = np.asarray(correct)
    return {(m, g): float(y[groups == g, j].mean()) for j, m in enumerate(model_ids) for g in np.unique(groups)}


def simulate_source(source: str, seed: int, sim: Any, ids: np.ndarray, groups: np.ndarray, texts: list[str],
                    embedding: np.ndarray, n_choices: np.ndarray, model_ids: list[str], params: list[float],
                    targets: dict) -> np.ndarray:
    """[n, M] simulated correctness of `source` (v1 or v2) at `seed`, matched to `targets` per (model, group);
    `sim` is the config's labels.simulator."""
    from cr2.core.errors import ConfigError, did_you_mean

    if source == "simulated-irt-v2":
        from cr2.labels.simulator_v2 import simulate_labels_v2

        if sim.shape is None:
            raise ConfigError("labels.simulator.shape is not set; name the fitted shape, e.g. "
                              "`shape: simulated-irt-v2` (configs/labels/simulated-irt-v2.yaml)")
        return simulate_labels_v2(ids, groups, groups, embedding, n_choices, model_ids, targets, sim, sim.shape,
                                  model_params=params, seed=seed, with_output_tokens=False).correct
    if source == "simulated-irt-v1":
        from cr2.config import OutputTokenDist
        from cr2.labels.simulator import simulate_labels

        lengths = {g: OutputTokenDist(median_tokens=1, sigma=0, max_tokens=1) for g in set(groups.tolist())}
        spec = sim.model_copy(update={"seed": seed, "output_tokens": lengths})
        return simulate_labels(ids, groups, groups, texts, model_ids, targets, spec, model_params=params).correct
    raise did_you_mean("simulated label source", source, ["simulated-irt-v2", "simulated-irt-v1"])


def label_sweep(measured: np.ndarray, groups: np.ndarray, model_ids: Sequence[str], largest: str,
                simulate: Callable[[str, int, dict], np.ndarray], sources: Sequence[str], structure_seeds: int,
                routing_seeds: int, sets: Callable[[np.ndarray], SplitSets] | None = None,
                routing: tuple[RoutingCheckSpec, Any, Any, int] | None = None,
                extra: Callable[[np.ndarray], list[tuple[str, list[dict]]]] | None = None,
                progress: Callable[[str], None] | None = None) -> list[dict]:
    """Rows {source, seed, section, statistic, model, other, lam, target, value} of the check: the measured labels
    [n, M] and, for every simulated source × seed < structure_seeds, labels from `simulate(source, seed, targets)`
    matched to the measured accuracy of every (model, group).

    Each label set gets its `structure` rows and, per label set, the (section, rows) of `extra(labels)`; with `sets`
    (labels → the train/dev/val/test SplitSets) and `routing` (spec, teacher spec, gate spec, seed), the measured
    labels and the simulated ones of seeds < routing_seeds also get `routing` rows (routing_outcomes).
    """
    out: list[dict] = []

    def add(source: str, seed: int | None, section: str, stats: list[dict]) -> None:
        out.extend({"source": source, "seed": seed, "section": section, **r} for r in stats)

    def describe(source: str, seed: int | None, y: np.ndarray) -> None:
        add(source, seed, "structure", label_structure(y, model_ids, largest))
        for section, stats in extra(y) if extra is not None else []:
            add(source, seed, section, stats)

    targets = group_accuracy(measured, groups, model_ids)
    describe("measured", None, measured)
    labels = {("measured", None): measured}
    for source in sources:
        for seed in range(structure_seeds):
            y = simulate(source, seed, targets)
            describe(source, seed, y)
            if seed < routing_seeds:
                labels[(source, seed)] = y
    if sets is not None and routing is not None:
        spec, teacher_spec, gate_spec, fit_seed = routing
        for (source, seed), y in labels.items():
            if progress is not None:
                progress(f"simcheck: routing on {source}{'' if seed is None else f' seed {seed}'}")
            add(source, seed, "routing", routing_outcomes(sets(y), spec, teacher_spec, gate_spec, seed=fit_seed))
    return out


def shape_record(simulated: Any, fresh_fit: Any = None, **more: Any) -> dict:
    """The run's `shape` record: the configured simulator shape the labels were drawn with and the fresh fit (if any)."""
    return {"simulated": None if simulated is None else simulated.model_dump(mode="json"),
            "fresh_fit": None if fresh_fit is None else {k: v for k, v in fresh_fit.__dict__.items() if k != "path"},
            **more}


# ---------------------------------------------------------------- reading a stored run (rows of v_simcheck)
def with_met(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of v_simcheck with `met`: |simulated mean over seeds − measured| ≤ the sim-to-real tolerance
    (docs/labels.md), NaN where no tolerance is set."""
    ok = (rows["mean"] - rows["measured"]).abs() <= rows["tolerance"] + 1e-12
    return rows.assign(met=ok.where(rows["tolerance"].notna()))


def sign_counts(rows: pd.DataFrame, source: str) -> tuple[int, int]:
    """(router, target) points whose simulated mean saving vs KNN has the measured sign, and all points."""
    s = rows[(rows["source"] == source) & (rows["statistic"] == "saving_vs_knn_pct")]
    return int((np.sign(s["mean"]) == np.sign(s["measured"])).sum()), len(s)


def router_savings(rows: pd.DataFrame, source: str) -> pd.DataFrame:
    """Per router: targets compared, targets with the measured sign, mean measured and mean simulated saving (%)."""
    s = rows[(rows["source"] == source) & (rows["statistic"] == "saving_vs_knn_pct")].copy()
    s["same"] = np.sign(s["mean"]) == np.sign(s["measured"])
    return s.groupby("model").agg(n=("same", "size"), same=("same", "sum"), measured=("measured", "mean"),
                                  simulated=("mean", "mean"))
