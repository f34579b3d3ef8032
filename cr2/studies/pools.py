"""Pools of a pool sweep: the selection rule, the platform rule and each pool's config overrides.

A pool sweep runs the whole pipeline on many device–edge pools drawn from one set of measured outputs
(configs/pools/mmlu-pro.yaml, docs/pools.md). The pools come from a rule written down before any pool was run:

  - every model with N ≤ device_max_params is the device model of one pool;
  - its three edge models are, for each target ratio r of size_ratios in order, the not-yet-chosen edge candidate
    (larger than the device, fits the largest edge platform) whose N is nearest to r · N_device on a log scale;
    ties: a chat/instruction-tuned model first, then the rule's model order;
  - m_ref (c_ref = 1) is the pool's largest edge model by N.
N is the parameters active per token (the N_m of cr2/system/cost.py; the total for a dense model). The platform of an
edge model is the smallest one whose memory holds its bf16 weights (total params × 2 bytes) × memory_headroom.

Pure: YAML in (through the pydantic spec), dicts and dataclasses out; the flow (flows/pools.py) runs each pool.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field, model_validator

from cr2.core.boundary import InputModel
from cr2.core.errors import ConfigError

if TYPE_CHECKING:  # annotations only: the module imports pandas where it uses it
    import pandas as pd

BF16_BYTES_PER_PARAM = 2.0


class _Strict(InputModel):
    """Unknown keys refused, numbers finite, bounds ordered (cr2.core.boundary.InputModel)."""


class PoolModel(_Strict):
    """One model of the measured outputs file that may enter a pool."""

    name: str = Field(description="model name in the outputs file")
    hf_name: str
    params: float = Field(gt=0, description="total parameters")
    active_params: float | None = Field(None, gt=0, description="parameters active per token (mixture of experts)")
    chat: bool = Field(description="instruction- or chat-tuned (the tie-break prefers it)")

    @property
    def n_active(self) -> float:
        """N of the cost model: active parameters per token."""
        return float(self.active_params or self.params)

    @property
    def pool_id(self) -> str:
        """The model's id in a pool config: the outputs-file name, lower-case, '_' → '.'."""
        return re.sub(r"[^a-z0-9._-]", "-", self.name.lower().replace("_", "."))


class EdgePlatform(_Strict):
    platform: str
    memory_bytes: float = Field(gt=0, description="GPU memory of the platform, bytes")
    server_power_w: float = Field(gt=0, description="P_srv: sum of the boards' power, W")


class PoolRule(_Strict):
    """configs/pools/<name>.yaml: the candidate models and the rule that turns them into pools."""

    device_max_params: float = Field(gt=0, description="a device model has N ≤ this, parameters")
    size_ratios: tuple[float, ...] = Field(min_length=1, description="target N_edge / N_device, one edge model each")
    memory_headroom: float = Field(ge=1.0, description="weights × this must fit the platform memory")
    device_platform: str
    hardware: str = Field(description="hardware profile (configs/hardware/) holding every platform named here")
    edge_platforms: tuple[EdgePlatform, ...] = Field(min_length=1)
    models: tuple[PoolModel, ...] = Field(min_length=2)

    @model_validator(mode="after")
    def _check(self) -> "PoolRule":
        names = [m.name for m in self.models]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"models named twice: {dup}")
        ids = [m.pool_id for m in self.models]
        if len(set(ids)) != len(ids):
            raise ValueError("two model names map to the same pool id; rename one")
        mem = [p.memory_bytes for p in self.edge_platforms]
        if mem != sorted(mem):
            raise ValueError("edge_platforms must be listed smallest memory first")
        return self


def load_pool_rule(path: str | Path) -> PoolRule:
    """The pool rule of a YAML file (a clear ConfigError on a missing file or a bad field)."""
    from cr2.core.boundary import load_yaml_file

    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"pool rule {p} not found (shipped: configs/pools/mmlu-pro.yaml)")
    try:
        return PoolRule.model_validate(load_yaml_file(p))
    except ValueError as e:
        raise ConfigError(f"{p}: {e}") from e


def edge_platform(model: PoolModel, rule: PoolRule) -> EdgePlatform | None:
    """The smallest edge platform whose memory holds the bf16 weights × headroom (None: none does)."""
    need = model.params * BF16_BYTES_PER_PARAM * rule.memory_headroom
    return next((p for p in rule.edge_platforms if p.memory_bytes >= need), None)


@dataclass(frozen=True)
class Pool:
    """One pool: the device model, the edge models in ratio order, and m_ref."""

    device: PoolModel
    edges: tuple[PoolModel, ...]  # one per size ratio, in the rule's ratio order
    reference: PoolModel  # m_ref: the largest edge model by N

    @property
    def pool_id(self) -> str:
        return self.device.pool_id

    @property
    def models(self) -> tuple[PoolModel, ...]:
        """Pool order: the device first, then the edge models by N ascending (m_ref last)."""
        order = sorted(range(len(self.edges)), key=lambda i: (self.edges[i].n_active, i))
        return (self.device, *(self.edges[i] for i in order))


def _tie_order(rule: PoolRule) -> dict[str, int]:
    return {m.name: i for i, m in enumerate(rule.models)}


def select_pools(rule: PoolRule) -> list[Pool]:
    """Every pool of the rule (module docstring), in the rule's order of the device models."""
    order = _tie_order(rule)
    fits = [m for m in rule.models if edge_platform(m, rule) is not None]
    pools = []
    for dev in (m for m in rule.models if m.params <= rule.device_max_params):
        cands = [m for m in fits if m.n_active > dev.n_active and m.name != dev.name]
        chosen: list[PoolModel] = []
        for r in rule.size_ratios:
            left = [m for m in cands if m not in chosen]
            if not left:
                break
            target = np.log(r * dev.n_active)
            chosen.append(min(left, key=lambda m: (round(abs(np.log(m.n_active) - target), 12), not m.chat,
                                                   order[m.name])))
        if len(chosen) < len(rule.size_ratios):
            continue  # too few larger models for this device: no pool (the study lists it as skipped)
        ref = max(chosen, key=lambda m: (m.n_active, m.chat, -order[m.name]))
        pools.append(Pool(device=dev, edges=tuple(chosen), reference=ref))
    return pools


def pool_overrides(pool: Pool, rule: PoolRule) -> dict[str, Any]:
    """Config overrides that turn a measured config into this pool: models, m_ref, hardware, label mapping."""
    models = []
    for m in pool.models:
        spec: dict[str, Any] = {"id": m.pool_id, "hf_name": m.hf_name, "params": m.params}
        if m.active_params is not None:
            spec["active_params"] = m.active_params
        if m is pool.device:
            spec.update(platform=rule.device_platform, role="device")
        else:
            plat = edge_platform(m, rule)
            spec.update(platform=plat.platform, role="edge", server_power_w=plat.server_power_w)
        models.append(spec)
    return {"models": models, "reference_model": pool.reference.pool_id, "hardware": rule.hardware,
            "labels": {"measured": {"models": {m.pool_id: m.name for m in pool.models}}}}


def pool_table(pools: list[Pool], rule: PoolRule) -> list[dict[str, Any]]:
    """One row per pool: ids, names, N and platforms (what docs/pools.md lists)."""
    rows = []
    for p in pools:
        row: dict[str, Any] = {"pool": p.pool_id, "device": p.device.name, "device_params": p.device.params}
        for i, (r, e) in enumerate(zip(rule.size_ratios, p.edges), 1):
            row[f"edge{i}"] = e.name
            row[f"edge{i}_ratio"] = round(e.n_active / p.device.n_active, 2)
            row[f"edge{i}_platform"] = edge_platform(e, rule).platform
        row["reference"] = p.reference.name
        rows.append(row)
    return rows


# ---------------------------------------------------------------- one pool's comparisons (pure)
BEST_SINGLE = "best-single"  # the Always-m points of the pool as one frontier (the best single model per target)
ORACLE = "full-information"  # argmax_m y_m − λ·c_m with the real labels and costs (cr2.studies.diagnostics.oracle_sweep)


def references() -> tuple[str, str]:
    """What a pool's savings are measured against: the catalogue's reference router (KNN) and the best single model."""
    from cr2.routers import reference_router

    return reference_router(), BEST_SINGLE


def comparison_rows(outcomes: dict[str, Any], methods: list[str], targets: np.ndarray, counts: np.ndarray,
                    fallback: Any, grid: np.ndarray, level: float = 0.95) -> list[dict[str, Any]]:
    """Each method's fixed-accuracy saving (%) vs KNN and vs the best single model at every target, and its mean
    over the validation grid (metric mean_saving_pct), with paired-bootstrap intervals and p (one shared `counts`;
    each side is charged `fallback.charge`: the lower of its frontier cost and the cheapest Always-model reaching the
    target, so every interval rests on every resample).
    n: resamples of a per-target interval, targets of a mean (the grid less those no Always-model reaches on test); n_resamples: the resamples of every interval.

    outcomes: name → cr2.evaluation.fixed_accuracy.MethodOutcomes, holding 'knn', BEST_SINGLE and every name of `methods`.
    """
    from cr2.evaluation.families import annotate
    from cr2.evaluation.fixed_accuracy import saving_intervals

    t = np.asarray(targets, dtype=np.float64)
    rows: list[dict[str, Any]] = []
    for ref in references():
        if ref not in outcomes:
            raise ConfigError(f"the pool comparison needs '{ref}' among the evaluated methods {sorted(outcomes)}")
        for m in methods:
            if m == ref:
                continue
            per_target, mean = saving_intervals(outcomes[m], outcomes[ref], t, counts, fallback, grid, level)
            base = {"subject": m, "other": ref}
            rows += [{**base, "metric": "saving_pct", "target": round(float(tt), 6), "estimate": iv.estimate,
                      "lower": iv.lower, "upper": iv.upper, "n": iv.n_resamples, "n_resamples": iv.n_resamples,
                      "p_value": iv.p_value} for tt, iv in zip(t, per_target)]
            rows.append({**base, "metric": "mean_saving_pct", "target": None, "estimate": mean.estimate,
                         "lower": mean.lower, "upper": mean.upper, "n": fallback.reachable_grid(grid).n_targets,
                         "n_resamples": mean.n_resamples, "p_value": mean.p_value})
    return annotate(rows, pool_family, level)


def pool_family(row: dict[str, Any]) -> str | None:
    """The family of a pool's comparison row (cr2.evaluation.families, the one family rule): within the pool, every
    learned method's saving vs one reference, the means one family and the per-target savings another; the
    full-information reference is context, no test."""
    return None if row["subject"] == ORACLE else f"{row['metric']}-vs-{row['other']}"


# ---------------------------------------------------------------- label diagnostics of every pool (pure)
def pool_label_table(correct: np.ndarray, names: list[str], pools: list[Pool]) -> list[dict[str, Any]]:
    """One row per pool from the measured correctness of every model (scripts/pool_label_diagnostics.py):
    accuracy of each model in pool order, φ of device and m_ref, the mean φ over the pool's pairs, P(device right |
    m_ref wrong), P(m_ref right | device wrong) and the share some pool model solves, over the questions every pool
    model answered.

    correct: [n, K] float (1 right, 0 wrong, NaN no output); names: the K model names of its columns."""
    from cr2.studies.diagnostics import label_rows

    col = {n: i for i, n in enumerate(names)}
    rows = []
    for pool in pools:
        missing = [m.name for m in pool.models if m.name not in col]
        if missing:
            raise ConfigError(f"pool {pool.pool_id}: no measured outputs for {missing}")
        y = correct[:, [col[m.name] for m in pool.models]]
        y = y[np.isfinite(y).all(axis=1)].astype(bool)
        ids = [m.pool_id for m in pool.models]
        ref = [m.name for m in pool.models].index(pool.reference.name)
        r = {(x["metric"], x["subject"], x["other"]): x["estimate"] for x in label_rows(y, ids, 0, ref)}
        rows.append({"pool": pool.pool_id, "n": int(len(y)), "models": [m.name for m in pool.models],
                     "edges": sorted(e.name for e in pool.edges), "reference": pool.reference.name,
                     "accuracy": [float(r[("accuracy", i, None)]) for i in ids],
                     "phi_device_ref": float(r[("phi", ids[0], ids[ref])]),
                     "phi_mean": float(np.mean([v for (m, _, _), v in r.items() if m == "phi"])),
                     "p_device_right_given_ref_wrong":
                         float(r[("p_device_right_given_largest_wrong", ids[0], ids[ref])]),
                     "p_ref_right_given_device_wrong":
                         float(r[("p_largest_right_given_device_wrong", ids[ref], ids[0])]),
                     "solvable": float(r[("solvable_rate", "any", None)])})
    return rows


# ---------------------------------------------------------------- across pools (a description, no verdict)
def signed_rank_tests(knn: "pd.DataFrame") -> "pd.DataFrame":
    """Across pools: Wilcoxon signed-rank test of CR²'s mean saving vs KNN against each baseline's (KNN: 0), one row
    per baseline (baseline, pools, median, w_plus, w_minus, p, method, error), a test that cannot be run saying why in
    `error`. A description, never a verdict: the pools share questions, split, resample index and edge models, so
    they are not independent units and the p is optimistic (the CLI and the results page print why beside it).
    Empty with fewer than 2 pools with a CR² saving. knn: pool_savings rows against KNN (pool, method,
    mean_saving_pct)."""
    import pandas as pd

    from cr2.core.errors import InvalidValueError
    from cr2.evaluation.statistics import signed_rank_test
    from cr2.routers import method_router, reference_router, routers_tagged

    ours, ref = method_router(), reference_router()
    wide = knn.pivot(index="pool", columns="method", values="mean_saving_pct")
    if ours not in wide or len(wide) < 2:
        return pd.DataFrame()
    rows = []
    # every baseline compared with KNN (router catalogue: tag `compared`, CR² itself aside)
    baselines = routers_tagged("compared", kinds=("baseline", "baseline-variant"))
    for b in [ref] + [m for m in baselines if m in wide]:
        other = pd.Series(0.0, index=wide.index) if b == ref else wide[b]
        both = wide[ours].notna() & other.notna()
        row = {"baseline": b, "pools": int(both.sum()), "median": np.nan, "w_plus": np.nan, "w_minus": np.nan,
               "p": np.nan, "method": None, "error": None}
        try:
            t = signed_rank_test(wide.loc[both, ours].to_numpy(), other[both].to_numpy())
            row |= {"median": t.median_diff, "w_plus": t.w_plus, "w_minus": t.w_minus, "p": t.p_value, "method": t.method}
        except InvalidValueError as e:
            row["error"] = str(e)
        rows.append(row)
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class AcrossPools:
    """One equal-risk comparison over the pools of a sweep: a description, never a verdict (the pools are dependent
    units), and the count of each pool's own stored word (Holm within the pool)."""

    side_a: str
    side_b: str
    pools: int
    median: float  # of the pools' mean savings, %
    min_resamples: int | None  # the fewest resamples a pool's interval rests on (None: not stored)
    p_value: float | None  # signed-rank p of the savings against 0 (optimistic); None: every saving is 0
    cheaper: int
    dearer: int
    no_difference: int
    no_word: int  # pools stored without a word (before schema 9)


def across_pool_comparisons(rows: "pd.DataFrame") -> list[AcrossPools]:
    """Per (subject, other) of the pools' equal-risk rows (pool_results `equal-risk:<question>`: estimate,
    n_resamples, verdict), in first-seen order: AcrossPools."""
    import pandas as pd

    from cr2.core.errors import InvalidValueError
    from cr2.evaluation.statistics import signed_rank_test

    out = []
    for (a, b), g in rows.groupby(["subject", "other"], sort=False):
        try:
            p = signed_rank_test(g["estimate"].to_numpy(dtype=float)).p_value
        except InvalidValueError:
            p = None
        n_res = [int(x) for x in g["n_resamples"] if not pd.isna(x)]
        stored = g["verdict"] if "verdict" in g.columns else pd.Series([None] * len(g), dtype=object)
        out.append(AcrossPools(str(a), str(b), len(g), float(g["estimate"].median()), min(n_res) if n_res else None, p,
                               int((stored == "cheaper").sum()), int((stored == "dearer").sum()),
                               int((stored == "no difference detected").sum()), int(stored.isna().sum())))
    return out


def across_pool_questions(rows: "pd.DataFrame") -> list[tuple[str, str, list[AcrossPools]]]:
    """The pools' equal-risk rows (pool_equal_risk) per (question, rule) of a question still asked
    (cr2.evaluation.equal_risk.QUESTIONS), in first-seen order: (question, rule, across_pool_comparisons)."""
    from cr2.evaluation.equal_risk import QUESTIONS, side_rule

    # a question a pool stored that is no longer asked (the deploy rule's former ordered pairs) is not read as one
    rows = rows[rows["question"].isin(QUESTIONS)]
    rows = rows.assign(rule=rows["subject"].map(side_rule))
    return [(str(question), str(rule), across_pool_comparisons(q))
            for (question, rule), q in rows.groupby(["question", "rule"], sort=False)]
