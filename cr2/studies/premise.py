"""The premise map: when does CR² pay? One cell of a device-speed × channel grid, in arrays.

CR²'s two-stage rule rests on a premise — answering on the device is the cheap option — that depends on the
device's speed and on the channel. A premise-map cell re-prices every (query, state) under

- a device speed factor f: the device platform's effective prefill throughput F and decode memory bandwidth W
  both × f (β_pre and β_dec ÷ f, so the device model's inference time ÷ f; docs/cost-model.md), edge
  platforms unchanged;
- a channel: a named state distribution (configs/states/), its states drawn per query as the pipeline does,

recomputes ĉ (pre-execution, what routers decide with) and c (realised, what the chosen model costs) exactly
as `cr2 prepare` does, and evaluates on the test split, over the config's λ grid:

- CR² re-calibrated only: the base gate and teacher frozen, thresholds τ*(λ; α) on the cell's val by the config's
  calibration rule (config.calibration.rule; CRC by default);
- CR² retrained: the gate re-distilled on the cell's train costs from the same frozen teacher (the teacher
  predicts p_m(x) and never sees a cost), then calibrated the same way. `retrain_from` "scratch" (default):
  a fresh gate with the config's own schedule, what `cr2 train` would fit on that cell; "base": the base gate
  fine-tuned for `retrain_epochs` epochs (cheaper; checkpoint of lowest dev loss either way);
- every baseline: one-shot argmax p̂ − λ ĉ on the cell's ĉ. Routers whose p̂ does not depend on costs (KNN,
  EmbedLLM, LLMRank) keep the base fit; routers that take costs as inputs (MLP) are re-trained on the cell's
  costs the same way (refitted, or fine-tuned from their base fit); Always-m for every model;
- KNN certified (`knn@<rule>`, cr2.routers.certify): the margin of its p̂ calibrated on the cell's val at the same α and
  by the same rule as CR² (config.calibration.rule), so a cell also answers "at equal risk, is CR² cheaper than
  KNN?" — and, against one-shot KNN, what KNN's guarantee costs in that cell.

Outcomes are compared at fixed accuracy with paired-bootstrap intervals (cr2.evaluation.fixed_accuracy.saving_intervals,
the same resample indices for every method): test-query noise only; training and calibration held fixed.
Everything in this module is pure: arrays and fitted modules in, tidy rows out.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from cr2.evaluation.statistics import Interval, resample_counts, resample_indices
from cr2.config import Config, HardwareProfile, ModelSpec, StateDistribution
from cr2.core.data import RoutingSet
from cr2.core.errors import ConfigError, DataValidationError
from cr2.routers import reference_router
from cr2.studies.pools import BEST_SINGLE
from cr2.evaluation.fixed_accuracy import (PAPER_TARGETS, VIEW_TARGETS, FallbackCost, MethodOutcomes, saving_intervals,
                                          target_grid)

if TYPE_CHECKING:
    import pandas as pd

CR2_RECAL = "cr2-recal"  # CR² with the base gate, re-calibrated on the cell
CR2_RETRAIN = "cr2-retrain"  # CR² with the gate re-distilled on the cell's costs
SPLITS = ("train", "dev", "val", "test")

# the study's defaults (`cr2 study premise` without options): the grid of device speed factors and channels (named
# state distributions, configs/states/), the paired resamples per interval and how the retrained gate is fitted.
# Here, not in the flow, because a results page names the command that reproduces a study by its differences from
# these, and the page reads nothing from flows/.
DEFAULT_SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
DEFAULT_CHANNELS = ("default", "premise-far", "premise-cell-edge", "premise-beyond-edge")
DEFAULT_RESAMPLES = 1000
DEFAULT_RETRAIN_EPOCHS = 4  # retrain_from 'base' only
DEFAULT_RETRAIN_FROM = "scratch"


@dataclass(frozen=True)
class PremiseInputs:
    """What every cell shares: the cost-independent routing data of every (query, state) row, one row per query."""

    query_id: np.ndarray  # [n] str
    benchmark: np.ndarray  # [n] str
    split: np.ndarray  # [n] str, train | dev | val | test
    embedding: np.ndarray  # [n, d] float32, e(x)
    correct: np.ndarray  # [n, M] bool, y_m(x)
    prompt_tokens: np.ndarray  # [n] float, L_in(x)
    output_tokens: np.ndarray  # [n, M] float, realised L_out,m(x) (recorded, else the benchmark default)
    teacher_proba: np.ndarray  # [n, M] float, the frozen teacher's p_m(x)
    model_ids: tuple[str, ...]  # pool order
    p_hat_test: dict[str, np.ndarray] = field(default_factory=dict)  # router → [n_test, M] p̂ (cost-independent fits)
    p_hat_val: dict[str, np.ndarray] = field(default_factory=dict)  # router → [n_val, M] p̂, the same fits (certified)

    def __post_init__(self) -> None:
        n, m = len(self.query_id), len(self.model_ids)
        for name, shape in (("benchmark", (n,)), ("split", (n,)), ("prompt_tokens", (n,)), ("correct", (n, m)),
                            ("output_tokens", (n, m)), ("teacher_proba", (n, m))):
            if np.shape(getattr(self, name)) != shape:
                raise DataValidationError(f"PremiseInputs.{name} has shape {np.shape(getattr(self, name))}, expected {shape}")
        if self.embedding.ndim != 2 or self.embedding.shape[0] != n:
            raise DataValidationError(f"PremiseInputs.embedding has shape {self.embedding.shape}, expected ({n}, d)")
        for split, p_hat in (("test", self.p_hat_test), ("val", self.p_hat_val)):
            n_split = int((self.split == split).sum())
            for name, p in p_hat.items():
                if np.shape(p) != (n_split, m):
                    raise DataValidationError(f"{split} p̂ of '{name}' has shape {np.shape(p)}, expected "
                                              f"({n_split}, {m}) ({split} rows)")

    def __len__(self) -> int:
        return len(self.query_id)

    def arrays(self) -> dict[str, np.ndarray]:
        """The inputs as named arrays (for one .npz file; `from_arrays` reads them back)."""
        out = {k: getattr(self, k) for k in ("query_id", "benchmark", "split", "embedding", "correct", "prompt_tokens",
                                             "output_tokens", "teacher_proba")}
        out["model_ids"] = np.asarray(self.model_ids)
        out.update({f"p_hat:{k}": v for k, v in self.p_hat_test.items()})
        out.update({f"p_hat_val:{k}": v for k, v in self.p_hat_val.items()})
        return {k: (np.asarray(v).astype(str) if np.asarray(v).dtype == object else np.asarray(v)) for k, v in out.items()}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> "PremiseInputs":
        base = {k: arrays[k] for k in ("query_id", "benchmark", "split", "embedding", "correct", "prompt_tokens",
                                       "output_tokens", "teacher_proba")}
        # a file written before val p̂ was stored has no p_hat_val: entries (the certified layer is then skipped)
        return cls(**base, model_ids=tuple(str(m) for m in arrays["model_ids"]),
                   p_hat_test={k[len("p_hat:"):]: arrays[k] for k in arrays if k.startswith("p_hat:")},
                   p_hat_val={k[len("p_hat_val:"):]: arrays[k] for k in arrays if k.startswith("p_hat_val:")})


@dataclass(frozen=True)
class Cell:
    """One cell of the premise map: a device speed factor and a named channel-state distribution."""

    speed_factor: float  # × the device platform's prefill throughput and memory bandwidth
    channel: StateDistribution

    @property
    def label(self) -> str:
        return f"speed×{self.speed_factor:g} / {self.channel.name}"


# ---------------------------------------------------------------- costs of a cell
def scaled_device(models: Sequence[ModelSpec], hardware: HardwareProfile,
                  factor: float) -> tuple[list[ModelSpec], HardwareProfile]:
    """The pool and hardware profile with the device platform's F and W × factor (edge platforms unchanged).

    The device model gets its own copy of its platform, so an edge model on the same platform keeps its speed.
    """
    if not factor > 0:
        raise ConfigError(f"a device speed factor must be > 0, got {factor}")
    models = list(models)
    device = models[0]
    if device.role != "device":
        raise ConfigError(f"the pool's first model '{device.id}' must be the device model (role: device)")
    base = hardware.platforms[device.platform]
    name = f"{device.platform}@speed×{factor:g}"
    scaled = base.model_copy(update={"prefill_flops_per_s": base.prefill_flops_per_s * factor,
                                     "memory_bandwidth_bytes_per_s": base.memory_bandwidth_bytes_per_s * factor})
    hw = hardware.model_copy(update={"platforms": {**hardware.platforms, name: scaled}})
    return [device.model_copy(update={"platform": name}), *models[1:]], hw


def cell_costs(inputs: PremiseInputs, cell: Cell, config: Config) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(c [n, M] realised, ĉ [n, M] pre-execution, distance_m [n]) of every row in the cell, as `cr2 prepare` computes them.

    States: one per query from the cell's distribution with the config's channel seed (cr2.system.channel); c with the
    realised L_out, ĉ with L̂_out = the per-(benchmark, model) train mean, both normalised with the same T0/E0.
    """
    from cr2.system.channel import rates, sample_query_states
    from cr2.system.cost import compute_costs, estimated_output_tokens, output_token_estimates

    if config.channel.draws_per_query != 1:
        raise ConfigError("the premise map draws one state per query; set channel.draws_per_query: 1 "
                          f"(the config has {config.channel.draws_per_query})")
    models, hardware = scaled_device(config.models, config.hardware, cell.speed_factor)
    states = sample_query_states(cell.channel, inputs.query_id, 1, config.channel.seed)
    r_ul, r_dl = rates(states, config.communication)
    train_rows = inputs.split == "train"
    reference_mask = train_rows if config.cost.normalisation == "reference" else None
    br = compute_costs(inputs.prompt_tokens, inputs.output_tokens, r_ul, r_dl, models=models, hardware=hardware,
                       reference_mask=reference_mask, config=config)
    estimates = output_token_estimates(inputs.benchmark, inputs.output_tokens, train_rows, config.cost)
    fixed = config.cost.model_copy(update={"normalisation": "fixed", "t0_s": float(br.t0_s), "e0_j": float(br.e0_j)})
    est = compute_costs(inputs.prompt_tokens, estimated_output_tokens(inputs.benchmark, estimates, len(models)),
                        r_ul, r_dl, models=models, hardware=hardware, cost_spec=fixed, config=config)
    return br.cost_norm, est.cost_norm, states.distance_m


def device_edge_ratio(cost: np.ndarray) -> float:
    """Mean device cost over mean cheapest-edge cost, E[c_0] / E[min_{m≥1} c_m] (< 1: the device is the cheap option)."""
    cost = np.asarray(cost, dtype=np.float64)
    return float(cost[:, 0].mean() / cost[:, 1:].min(axis=1).mean())


def routing_sets(inputs: PremiseInputs, cost: np.ndarray, cost_est: np.ndarray | None,
                 distance_m: np.ndarray) -> dict[str, RoutingSet]:
    """{split: RoutingSet} of the cell (cost_est None: routers decide with the realised cost, the named variant)."""
    full = RoutingSet(query_id=inputs.query_id, benchmark=inputs.benchmark, embedding=inputs.embedding,
                      correct=inputs.correct, cost=cost.astype(np.float32), model_ids=inputs.model_ids,
                      distance_m=distance_m, cost_est=None if cost_est is None else cost_est.astype(np.float32))
    return {s: full.subset(np.flatnonzero(inputs.split == s)) for s in SPLITS}


# ---------------------------------------------------------------- one cell
@dataclass
class Sweep:
    """One method's choices over the λ grid on the test split: [n_test, k] chosen model index."""

    chosen: np.ndarray  # [n_test, k] int
    risk: np.ndarray | None = None  # [k] test risk of the rule at α (calibrated methods only; solvable rows)
    risk_all: np.ndarray | None = None  # [k] over every test row
    tau: np.ndarray | None = None  # [k] τ(λ; α) per λ (certified routers)

    def outcomes(self, test: RoutingSet, keep: np.ndarray) -> MethodOutcomes:
        rows = np.flatnonzero(keep)
        ch = self.chosen[rows]
        r = rows[:, None]
        return MethodOutcomes(correct=np.asarray(test.correct, dtype=bool)[r, ch],
                              cost=np.asarray(test.cost, dtype=np.float64)[r, ch])


def realised_risk(accepted: np.ndarray, labels: np.ndarray, keep: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(risk [k] over the solvable rows `keep`, risk_all [k] over every row) of local acceptances [n, k] on test.

    labels [n, k]: the calibration rule's risk label r_i(λ) on test (cr2.routers.certify.calibration_risks).
    """
    # the controlled risk (paper §VI-F): R(λ) = mean_i 1[accepted_i(λ)] · r_i(λ)
    bad = np.asarray(accepted, dtype=bool) & np.asarray(labels, dtype=bool)
    risk = bad[keep].mean(axis=0) if keep.any() else np.full(bad.shape[1], np.nan)
    return np.asarray(risk, dtype=np.float64), bad.mean(axis=0).astype(np.float64)


def cr2_sweep(router: Any, val: RoutingSet, test: RoutingSet, proba_test: np.ndarray, lams: Sequence[float],
              alpha: float, keep: np.ndarray, dist_id: str, label_source: str, rule: str = "crc",
              delta: float | None = None) -> Sweep:
    """CR² calibrated by `rule` on `val` at α for every λ, routed on test (Algorithm 1), with its test risk per λ."""
    from cr2.routers.certify import calibration_risks

    router.calibrate(val, lams, [alpha], dist_id=dist_id, label_source=label_source, rule=rule, delta=delta)
    chosen, accepted = [], []
    for lam in lams:
        dec = router.decide(test.embedding, test.decision_cost, lam, alpha, proba=proba_test)
        chosen.append(dec.chosen)
        accepted.append(np.asarray(dec.extra.get("gate_accept", dec.chosen == 0), dtype=bool))
    # the rule's risk label on test under the frozen teacher (crc: 1[m_full* ≠ m0], teacher disagreement)
    labels = calibration_risks(rule, test, lams, proba_test)
    risk, risk_all = realised_risk(np.stack(accepted, axis=1), labels, keep)
    return Sweep(np.stack(chosen, axis=1), risk, risk_all)


def certified_sweep(p_hat_val: np.ndarray, p_hat_test: np.ndarray, val: RoutingSet, test: RoutingSet,
                    teacher_proba_val: np.ndarray, teacher_proba_test: np.ndarray, lams: Sequence[float],
                    alpha: float, rule: str, keep: np.ndarray, *, delta: float | None, dist_id: str,
                    label_source: str) -> Sweep:
    """A router certified by `rule` at α (cr2.routers.certify) over the λ grid: its p̂ margin calibrated on `val`, routed on
    test, with τ(λ; α) and its test risk per λ.

    p_hat_val [n_val, M], p_hat_test [n_test, M]: the router's p̂ (cost-independent: the cell's ĉ enters through
    the margin); teacher_proba_*: the frozen teacher's p on each split, which the teacher-disagreement rules label
    risks with (the same teacher as CR²'s, so both risks mean the same thing).
    """
    from cr2.routers.certify import calibrate_certified, calibration_risks, certified_decisions, margin_score
    from cr2.core.hashing import content_fingerprint

    lam_arr = np.asarray(lams, dtype=np.float64)
    s_val = margin_score(p_hat_val, val.decision_cost, lam_arr)
    s_test = margin_score(p_hat_test, test.decision_cost, lam_arr)
    table = calibrate_certified(s_val, calibration_risks(rule, val, lam_arr, teacher_proba_val), lam_arr, [alpha],
                                fingerprint=content_fingerprint("premise-certified", arrays={"p_hat_val": p_hat_val}),
                                dist_id=dist_id, label_source=label_source, rule=rule, delta=delta)
    tau = np.array([table.taus[table.lam_index(float(lam)), 0] for lam in lam_arr], dtype=np.float64)
    chosen, accepted = [], []
    for j, lam in enumerate(lam_arr):
        dec = certified_decisions(s_test[:, j], float(tau[j]), p_hat_test, test.decision_cost, float(lam))
        chosen.append(dec.chosen)
        accepted.append(np.asarray(dec.extra["gate_accept"], dtype=bool))
    risk, risk_all = realised_risk(np.stack(accepted, axis=1), calibration_risks(rule, test, lam_arr, teacher_proba_test),
                               keep)
    return Sweep(np.stack(chosen, axis=1), risk, risk_all, tau)


def one_shot_sweep(p_hat: np.ndarray, cost_est: np.ndarray, lams: Sequence[float]) -> Sweep:
    """A one-shot baseline over the λ grid: argmax p̂ − λ ĉ on the cell's ĉ."""
    from cr2.routers.base import one_shot_choice

    return Sweep(np.stack([one_shot_choice(p_hat, cost_est, float(lam)) for lam in lams], axis=1))


def certified_knn_name(rule: str, inputs: PremiseInputs) -> str | None:
    """The certified KNN of a cell, `knn@<rule>`, or None when it cannot be built: the rule is not calibrated from
    risks, or KNN's p̂ is not cost-independent on both val and test (refitted per cell, or inputs stored without
    val p̂)."""
    from cr2.routers.certify import certified_name
    from cr2.crc import rule_spec

    ref = reference_router()
    if not rule_spec(rule).calibrated or ref not in inputs.p_hat_val or ref not in inputs.p_hat_test:
        return None
    return certified_name(ref, rule)


@dataclass
class CellResult:
    """What one cell produces: a summary row and tidy comparison rows."""

    summary: dict[str, Any]
    rows: list[dict[str, Any]]


def _interval_row(method: str, reference: str, metric: str, target: float | None, iv: Interval) -> dict[str, Any]:
    return {"method": method, "reference": reference, "metric": metric, "target": target, "estimate": iv.estimate,
            "lower": iv.lower, "upper": iv.upper, "n_resamples": iv.n_resamples, "p_value": iv.p_value}


def compare(outcomes: dict[str, MethodOutcomes], pairs: Sequence[tuple[str, str]], targets: Sequence[float],
            counts: np.ndarray, grid: np.ndarray) -> list[dict[str, Any]]:
    """Fixed-accuracy saving (%) of each (method, reference) pair at every target and over the validation `grid`,
    with intervals and p from the same resamples (each side charged the lower of its frontier cost and the cheapest
    Always-model of BEST_SINGLE reaching the target; the grid less the targets none reaches on test)."""
    t = np.asarray(targets, dtype=np.float64)
    fallback = FallbackCost.of_always(outcomes[BEST_SINGLE], t, counts)
    rows = []
    for method, reference in pairs:
        per_target, mean = saving_intervals(outcomes[method], outcomes[reference], t, counts, fallback, grid)
        rows += [_interval_row(method, reference, "saving_pct", float(t), iv) for t, iv in zip(targets, per_target)]
        rows.append(_interval_row(method, reference, "mean_saving_pct", None, mean))
    return rows


def local_rate_at_targets(out: MethodOutcomes, chosen: np.ndarray, targets: Sequence[float]) -> list[float]:
    """Local rate of the cheapest operating point reaching each target accuracy (NaN where none does)."""
    acc, cost = out.points()
    local = (chosen == 0).mean(axis=0)
    res = []
    for t in targets:
        ok = acc >= t - 1e-12
        res.append(float(local[ok][np.argmin(cost[ok])]) if ok.any() else float("nan"))
    return res


def run_cell(inputs: PremiseInputs, cell: Cell, config: Config, teacher: Any, base_gate: Any,
             cost_aware: dict[str, Callable[[RoutingSet, RoutingSet], Any]], *, n_resamples: int, seed: int,
             retrain_epochs: int, retrain_from: str = "scratch", num_threads: int = 1,
             retrained_gate: Any = None) -> CellResult:
    """Evaluate every method in one cell (see the module docstring); returns its summary and tidy interval rows.

    cost_aware: router name → fit(train, dev) returning that router re-trained on the cell's costs.
    retrained_gate: a gate already distilled on this cell's costs (the base cell's own gate); None: re-distil one
    (retrain_from "scratch": a fresh gate, the config's schedule; "base": the base gate, `retrain_epochs` epochs).
    """
    if retrain_from not in ("scratch", "base"):
        raise ConfigError(f"retrain_from must be 'scratch' or 'base', got {retrain_from!r}")
    from cr2.method.gate import fit_gate
    from cr2.evaluation.metrics import evaluable_mask
    from cr2.routers.cr2_router import CR2Router

    t0 = time.perf_counter()
    cost, cost_est, distance_m = cell_costs(inputs, cell, config)
    estimated = config.routing.decision_cost == "estimated"
    sets = routing_sets(inputs, cost, cost_est if estimated else None, distance_m)
    train, dev, val, test = (sets[s] for s in SPLITS)
    if min(len(train), len(dev), len(val), len(test)) == 0:
        raise DataValidationError(f"cell {cell.label}: a split is empty (train {len(train)}, dev {len(dev)}, "
                                  f"val {len(val)}, test {len(test)}); the premise map needs all four")
    keep = evaluable_mask(test) if config.evaluation.exclude_unsolvable else np.ones(len(test), dtype=bool)
    lams = [float(v) for v in config.grids.lam.values()]
    alpha = float(config.grids.default_alpha)
    proba = {s: inputs.teacher_proba[inputs.split == s] for s in SPLITS}
    rule, delta = config.calibration.rule, config.calibration.delta  # CR²'s rule, and the certified KNN's
    params = {"alpha": alpha, "variant": config.routing.deferred_variant, "num_threads": num_threads,
              "teacher_spec": config.teacher, "gate_spec": config.gate}
    sweeps: dict[str, Sweep] = {}
    common = {"dist_id": cell.channel.dist_id, "label_source": config.labels.source, "rule": rule, "delta": delta}
    sweeps[CR2_RECAL] = cr2_sweep(CR2Router.from_fitted(teacher, base_gate, inputs.model_ids, **params), val, test,
                                  proba["test"], lams, alpha, keep, **common)
    t_gate = time.perf_counter()
    gate = retrained_gate
    if gate is None:
        if retrain_from == "scratch":
            gate = fit_gate(train, dev, proba["train"], proba["dev"], config.gate, num_threads=num_threads)
        else:
            spec = config.gate.model_copy(update={"epochs": int(retrain_epochs)})
            gate = fit_gate(train, dev, proba["train"], proba["dev"], spec, num_threads=num_threads, init=base_gate)
    gate_s = time.perf_counter() - t_gate
    sweeps[CR2_RETRAIN] = cr2_sweep(CR2Router.from_fitted(teacher, gate, inputs.model_ids, **params), val, test,
                                    proba["test"], lams, alpha, keep, **common)
    for name, p_hat in inputs.p_hat_test.items():
        sweeps[name] = one_shot_sweep(p_hat, test.decision_cost, lams)
    refit_s = {}
    for name, refit in cost_aware.items():
        t1 = time.perf_counter()
        router = refit(train, dev)
        refit_s[name] = time.perf_counter() - t1
        sweeps[name] = one_shot_sweep(np.asarray(router.predict_proba(test), dtype=np.float64), test.decision_cost, lams)
    outcomes = {k: s.outcomes(test, keep) for k, s in sweeps.items()}
    for j, model_id in enumerate(inputs.model_ids):
        outcomes[f"always-{model_id}"] = Sweep(np.full((len(test), 1), j)).outcomes(test, keep)
    outcomes[BEST_SINGLE] = MethodOutcomes(
        correct=np.concatenate([outcomes[f"always-{m}"].correct for m in inputs.model_ids], axis=1),
        cost=np.concatenate([outcomes[f"always-{m}"].cost for m in inputs.model_ids], axis=1))
    ref = reference_router()
    if ref not in outcomes:
        raise ConfigError(f"the premise map compares against the reference router; add '{ref}' to baselines.routers")
    certified = certified_knn_name(rule, inputs)
    if certified is not None:  # after every other method, so their rows keep their order
        sweeps[certified] = certified_sweep(inputs.p_hat_val[ref], inputs.p_hat_test[ref], val, test, proba["val"],
                                            proba["test"], lams, alpha, rule, keep, delta=delta,
                                            dist_id=common["dist_id"], label_source=common["label_source"])
        outcomes[certified] = sweeps[certified].outcomes(test, keep)
    idx = resample_indices(int(keep.sum()), n_resamples, np.random.default_rng(seed))
    targets = sorted(set(map(float, VIEW_TARGETS)) | set(PAPER_TARGETS))
    val_keep = evaluable_mask(val) if config.evaluation.exclude_unsolvable else None
    grid = (np.asarray(config.evaluation.target_grid) if config.evaluation.target_grid is not None
            else target_grid(val.correct, val_keep))
    pairs = [(m, ref) for m in outcomes if m != ref and not m.startswith("always-")]
    pairs += [(CR2_RECAL, BEST_SINGLE), (CR2_RETRAIN, BEST_SINGLE), (CR2_RECAL, CR2_RETRAIN)]
    if certified is not None:  # CR² against KNN certified at the same α and rule: the equal-risk question
        pairs += [(CR2_RETRAIN, certified), (CR2_RECAL, certified)]
    rows = compare(outcomes, pairs, targets, resample_counts(idx, int(keep.sum())), grid)
    for method in (CR2_RECAL, CR2_RETRAIN, *([certified] if certified is not None else [])):
        sw = sweeps[method]
        # at λ = 0 CR² defers everything (risk 0 by construction), so its risk is read over λ > 0; a certified
        # router's score is defined at every λ, its risk over the whole grid
        pos = np.asarray(lams) > 0 if method in (CR2_RECAL, CR2_RETRAIN) else np.ones(len(lams), dtype=bool)
        # the test risk at α over those λ: its worst λ and its mean (solvable rows; risk_all: every row)
        rows.append({"method": method, "reference": None, "metric": "risk_max", "target": None,
                     "estimate": float(np.nanmax(sw.risk[pos])), "lower": None, "upper": None, "n_resamples": 0})
        rows.append({"method": method, "reference": None, "metric": "risk_all_max", "target": None,
                     "estimate": float(np.nanmax(sw.risk_all[pos])), "lower": None, "upper": None, "n_resamples": 0})
        rows.append({"method": method, "reference": None, "metric": "risk_mean", "target": None,
                     "estimate": float(np.nanmean(sw.risk[pos])), "lower": None, "upper": None, "n_resamples": 0})
        for t, rate in zip(PAPER_TARGETS, local_rate_at_targets(outcomes[method], sw.chosen[keep], PAPER_TARGETS)):
            rows.append({"method": method, "reference": None, "metric": "local_rate", "target": float(t), "estimate": rate,
                         "lower": None, "upper": None, "n_resamples": 0})
        rows.append({"method": method, "reference": None, "metric": "local_rate_max", "target": None,
                     "estimate": float((sw.chosen[keep] == 0).mean(axis=0).max()), "lower": None, "upper": None,
                     "n_resamples": 0})
    summary = {"speed_factor": float(cell.speed_factor), "channel": cell.channel.name, "dist_id": cell.channel.dist_id,
               "mean_distance_m": float(distance_m.mean()),
               "cost_ratio_est": device_edge_ratio(cost_est), "cost_ratio_realised": device_edge_ratio(cost),
               "device_dearer_share_est": float(np.mean(cost_est[:, 0] > cost_est[:, 1:].min(axis=1))),
               "n_test": int(len(test)), "n_evaluable": int(keep.sum()), "n_resamples": int(n_resamples),
               "alpha": alpha, "gate_retrained": retrained_gate is None, "gate_fit_s": round(gate_s, 2),
               "retrain_from": retrain_from, "retrain_epochs": int(retrain_epochs),
               "refit_s": {k: round(v, 2) for k, v in refit_s.items()}, "cell_s": round(time.perf_counter() - t0, 2)}
    return CellResult(summary=summary, rows=rows)


@dataclass(frozen=True)
class SpeedTrend:
    """Spearman's ρ of device speed with a saving over one study's cells, its permutation p and its Holm p over the
    studies read together."""

    rho: float
    p_value: float
    n: int
    method: str  # "exact" | "permutation" | "–" (fewer than three cells: no test)
    p_holm: float


def speed_trends(studies: Sequence[tuple[np.ndarray, np.ndarray]], seed: int, n_permutations: int) -> list[SpeedTrend]:
    """Per study (speed factors [n], savings [n] over its cells): the two-sided Spearman permutation test of a
    monotone trend (cr2.evaluation.statistics.spearman_permutation_test, a seeded stream per study), and Holm over
    the studies, which are read together. A study with fewer than three cells with a saving has no test (NaN)."""
    from cr2.evaluation.statistics import holm_adjust, spearman_permutation_test

    found = []
    for speed, saving in studies:
        ok = np.isfinite(np.asarray(speed, float)) & np.isfinite(np.asarray(saving, float))
        if ok.sum() < 3:
            found.append((float("nan"), float("nan"), int(ok.sum()), "–"))
            continue
        t = spearman_permutation_test(np.asarray(speed, float)[ok], np.asarray(saving, float)[ok],
                                      np.random.default_rng(seed), n_permutations)
        found.append((t.rho, t.p_value, t.n, t.method))
    holm = holm_adjust(np.array([f[1] for f in found], dtype=float)) if found else []
    return [SpeedTrend(rho, p, n, method, float(q)) for (rho, p, n, method), q in zip(found, holm)]


# ---------------------------------------------------------------- a stored study read back (rows of v_premise)
# the page's comparisons per cell: (method, reference, sign, what); sign −1 turns re-calibration's saving over
# retraining into its loss (positive = re-calibration alone dearer)
COMPARISONS = ((CR2_RETRAIN, reference_router(), 1.0, "CR² retrained vs KNN"),
               (CR2_RETRAIN, BEST_SINGLE, 1.0, "CR² retrained vs best single"),
               (CR2_RECAL, CR2_RETRAIN, -1.0, "loss of re-calibration only vs retraining"))


def _stored_p(r) -> float:
    """The p stored beside an interval (from its own bootstrap resamples; two-sided, so the sign of a comparison
    does not change it); a study stored before schema 8 has none: it must be run again."""
    import pandas as pd

    p = getattr(r, "p_value", None)
    if p is None or pd.isna(p):
        raise ValueError("a premise study stored without bootstrap p-values (schema < 8): run `cr2 study premise` "
                         "again")
    return float(p)


def _stored_holm(r) -> float:
    """The Holm p v_premise gives the interval over its family (the study's cells × the comparison, the means over the
    grid one family and the paper targets another; docs/guarantees.md, "One family rule")."""
    import pandas as pd

    p = getattr(r, "p_holm", None)
    return float("nan") if p is None or pd.isna(p) else float(p)


def premise_cells(v: pd.DataFrame) -> pd.DataFrame:
    """One row per cell: coordinates, ĉ ratio, and per comparison the mean saving over targets with its interval
    (sign: positive = CR² cheaper; the re-calibration loss signed so that positive = re-calibration alone dearer),
    the interval's p, and the worst-λ / mean risk of both CR² variants (rows of v_premise of one study in; one row
    per cell out, in order of the device / edge cost ratio)."""
    import pandas as pd

    rows = []
    for (f, ch), g in v.groupby(["speed_factor", "channel"], sort=False):
        first = g.iloc[0]
        row = {"speed_factor": float(f), "channel": ch, "mean_distance_m": float(first.mean_distance_m),
               "cost_ratio": float(first.cost_ratio_est), "n_evaluable": int(first.n_evaluable),
               "n_resamples": int(first.n_resamples), "alpha": float(first.alpha)}
        for method, ref, sign, _ in COMPARISONS:
            m = g[(g["method"] == method) & (g["reference"] == ref) & g["mean_over_targets"]]
            tag = f"{method}|{ref}"
            if m.empty or not np.isfinite(m.iloc[0].saving_pct):
                row.update({tag: np.nan, tag + "|lo": np.nan, tag + "|hi": np.nan, tag + "|p": np.nan})
                continue
            r = m.iloc[0]
            lo, hi = sorted((sign * r.saving_lower_pct, sign * r.saving_upper_pct))
            row.update({tag: sign * r.saving_pct + 0.0, tag + "|lo": lo + 0.0, tag + "|hi": hi + 0.0,
                        tag + "|p": _stored_p(r), tag + "|holm": _stored_holm(r)})
            for t in PAPER_TARGETS:
                tt = g[(g["method"] == method) & (g["reference"] == ref) & np.isclose(g["target"], t)]
                ok = not tt.empty and np.isfinite(tt.iloc[0].saving_pct) and np.isfinite(tt.iloc[0].saving_lower_pct)
                est, tlo, thi = ((sign * tt.iloc[0].saving_pct, *sorted((sign * tt.iloc[0].saving_lower_pct,
                                                                         sign * tt.iloc[0].saving_upper_pct)))
                                 if ok else (np.nan, np.nan, np.nan))
                row.update({f"{tag}@{t:.2f}": est, f"{tag}@{t:.2f}|lo": tlo, f"{tag}@{t:.2f}|hi": thi,
                            f"{tag}@{t:.2f}|p": _stored_p(tt.iloc[0]) if ok else np.nan,
                            f"{tag}@{t:.2f}|holm": _stored_holm(tt.iloc[0]) if ok else np.nan})
        for method in ("cr2-retrain", "cr2-recal"):
            r = g[(g["method"] == method) & g["mean_over_targets"]]
            row[f"{method}|risk_max"] = float(r.iloc[0].risk_max) if len(r) and pd.notna(r.iloc[0].risk_max) else np.nan
            row[f"{method}|risk_mean"] = float(r.iloc[0].risk_mean) if len(r) and pd.notna(r.iloc[0].risk_mean) else np.nan
        rows.append(row)
    out = pd.DataFrame(rows)  # each |holm: v_premise's, over the study's cells (one family per comparison × kind)
    return out.sort_values(["cost_ratio", "speed_factor", "channel"]).reset_index(drop=True)
