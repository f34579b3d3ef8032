"""The method's settings: the λ grid, teacher, gate, routing, calibration, certification, fits and baselines."""
from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from cr2.core.boundary import shown
from cr2.core.errors import InvalidValueError
from cr2.config.base import Seed, StrictModel
from cr2.config.evaluation import MAX_RESPLITS


# the teacher and the gate train 20 epochs on cached embeddings (seconds each); 10,000 is hours of a fit that
# stopped improving long before, and the bound turns `epochs: 1.0e+18` into an error instead of a run that never ends
MAX_EPOCHS = 10_000
# the gate and the teacher are small MLPs over a 384-d embedding: 65,536 hidden units is ≈ 25 M parameters per
# layer, far beyond a device gate; a batch is at most the training split (≈ 17 k rows on the default pool), so a
# bound in the millions only refuses a value that means nothing; λ draws per batch feed one FiLM forward each
MAX_HIDDEN = 65_536
MAX_BATCH = 1_048_576
MAX_LAMBDAS_PER_BATCH = 1_024

# the λ every summary quotes (`cr2 run`'s table, `cr2 results`, the report, the Prefect artefacts); on the default grid
HEADLINE_LAMS: tuple[float, ...] = (0.5, 2.0, 8.0)


class LambdaGrid(StrictModel):
    min: float = Field(gt=0)
    max: float = Field(gt=0)
    # every λ is calibrated, evaluated and stored for every router: the work and the tables grow with n_log; the
    # paper's grid has 28 points, 1,000 is a sweep no figure can resolve
    n_log: int = Field(ge=2, le=1_000)
    extra: list[float] = Field(default_factory=list, description="λ values added to the log grid (the paper's); "
                                                                 "0 adds the accuracy-only end of the sweep")

    @field_validator("extra")
    @classmethod
    def _extra_range(cls, v: list[float]) -> list[float]:
        if any(not (x >= 0 and math.isfinite(x)) for x in v):
            raise InvalidValueError(f"every extra λ must be finite and ≥ 0; got {shown(v)}")
        return v

    def values(self) -> list[float]:
        """Sorted λ grid: n_log log-spaced points in [min, max] plus the extras, rounded to 6 significant digits."""
        import numpy as np

        pts = np.geomspace(self.min, self.max, self.n_log).tolist() + list(self.extra)
        return sorted({float(f"{p:.6g}") for p in pts})


class GridSpec(StrictModel):
    lam: LambdaGrid = Field(description="the one λ sweep of every method: CR² is calibrated on it (λ = 0: defer "
                                        "everything) and every baseline is evaluated on it")
    alpha: list[float] = Field(min_length=1)
    default_alpha: float = Field(gt=0, lt=1)

    @field_validator("alpha")
    @classmethod
    def _alpha_range(cls, v: list[float]) -> list[float]:
        for a in v:
            if not 0 < a < 1:
                raise InvalidValueError(f"every α must lie in (0, 1); got {a}")
        return sorted(v)


class TeacherSpec(StrictModel):
    hidden: int = Field(256, ge=1, le=MAX_HIDDEN)
    w_cls: float = Field(1.0, ge=0)
    w_rank: float = Field(1.0, ge=0)
    lr: float = Field(3e-4, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    batch_size: int = Field(256, ge=1, le=MAX_BATCH)
    epochs: int = Field(20, ge=1, le=MAX_EPOCHS)
    grad_clip: float = Field(1.0, gt=0)
    seed: Seed = 0


class GateSpec(StrictModel):
    hidden: int = Field(256, ge=1, le=MAX_HIDDEN)
    dropout: float = Field(0.1, ge=0, lt=1)
    temperature_init: float = Field(0.1, gt=0)
    film_frequencies: list[float] = Field(default_factory=lambda: [0.5, 1.0, 2.0, 4.0])
    lr: float = Field(3e-4, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    batch_size: int = Field(256, ge=1, le=MAX_BATCH)
    epochs: int = Field(20, ge=1, le=MAX_EPOCHS)
    grad_clip: float = Field(1.0, gt=0)
    huber_beta: float = Field(0.1, gt=0)
    lambdas_per_batch: int = Field(8, ge=1, le=MAX_LAMBDAS_PER_BATCH, description="J, log-uniform λ per mini-batch")
    lam_min: float = Field(0.1, gt=0)
    lam_max: float = Field(20.0, gt=0)
    w_sign: float = Field(1.0, ge=0)
    w_margin: float = Field(1.0, ge=0)
    w_mono: float = Field(1.0, ge=0)
    seed: Seed = 0



class RoutingSpec(StrictModel):
    deferred_variant: Literal["edge-only", "inclusive", "fallback"] = "edge-only"
    on_demand_calibration: bool = False
    decision_cost: Literal["estimated", "realised"] = Field(
        "estimated", description="cost routers decide with: 'estimated' = ĉ with the pre-execution output length L̂_out "
                                 "(train mean per benchmark and model; the paper's protocol); 'realised' = the cost with "
                                 "the output length the model has not written yet (a named, non-causal variant)")


class CalibrationSpec(StrictModel):
    """Which guarantee the threshold table carries (docs/guarantees.md): crc, ltt over the λ grid, Mondrian groups."""

    rule: str = Field("crc", description="a registered rule (cr2.crc.RULE_REGISTRY): crc: E[teacher disagreement] ≤ α "
                      "per λ (paper); ltt: with probability ≥ 1 − δ every λ at once; empirical: no +1 (ablation); "
                      "crc-oracle / ltt-oracle: the same on oracle disagreement with the real labels; crc-avoidable / "
                      "ltt-avoidable: on avoidable errors (device wrong, an edge model right)")
    delta: float | None = Field(None, gt=0, lt=1, description="ltt only: P(some λ's threshold has risk > α) ≤ δ")
    group: Literal["benchmark", "subset"] | None = Field(None, description="Mondrian: one threshold table per value of "
                                                         "this query attribute (risk bound within each group); null: pooled")
    small_group: Literal["error", "defer"] = Field("error", description="a group too small for some α: error, or "
                                                   "τ = +inf there (the group always defers at that α, listed)")
    target_delta: float = Field(0.1, gt=0, lt=1, description="target mode: P(the chosen (λ, α) misses the target) ≤ δ")
    target_select_fraction: float = Field(0.5, gt=0, lt=1, description="target mode: share of val that certifies the "
                                          "target; the rest calibrates the candidate thresholds")
    cost_max: float = Field(1.0, gt=0, description="target mode: a bound on every normalised cost c_m (Hoeffding–Bentkus "
                            "needs bounded costs; c_ref ≡ 1)")
    n_resplits: int = Field(500, ge=10, le=MAX_RESPLITS, description="re-splits of val + test for the guarantee "
                            "validity check")

    @model_validator(mode="after")
    def _delta_matches_rule(self) -> "CalibrationSpec":
        from cr2.crc import RULES, rule_spec

        if self.rule not in RULES:
            from cr2.core.errors import did_you_mean

            raise InvalidValueError(str(did_you_mean("calibration.rule", self.rule, list(RULES))))
        needs_delta = rule_spec(self.rule).needs_delta
        if needs_delta and self.delta is None:
            raise InvalidValueError(f"calibration.rule '{self.rule}' needs calibration.delta ∈ (0, 1), e.g. 0.1")
        if not needs_delta and self.delta is not None:
            raise InvalidValueError(f"calibration.delta applies to the ltt rules only (ltt, ltt-oracle, ltt-avoidable); rule is '{self.rule}' (remove delta)")
        return self


class CertifySpec(StrictModel):
    """Certified routing for every router (cr2.routers.certify): which rules and α each certified `<router>@<rule>` gets."""

    alphas: list[float] = Field(default_factory=lambda: [0.005, 0.01, 0.02, 0.05], min_length=1,
                                description="risk levels α every certified router is calibrated at (each in (0, 1))")
    rules: list[str] = Field(default_factory=lambda: ["crc", "crc-oracle", "crc-avoidable"], min_length=1,
                             description="calibrated rules (cr2.crc.RULE_REGISTRY): a certified router per rule")
    routers: list[str] | None = Field(None, description="routers to certify (catalogue names; 'cr2' certifies CR²'s "
                                      "gate score); null: every configured baseline that predicts p̂, and cr2")
    delta: float | None = Field(None, gt=0, lt=1, description="the ltt rules only: P(some λ's threshold has risk > α) ≤ δ")

    @field_validator("alphas")
    @classmethod
    def _alpha_range(cls, v: list[float]) -> list[float]:
        if any(not 0 < a < 1 for a in v) or len(set(v)) != len(v):
            raise InvalidValueError(f"certify.alphas must be distinct risk levels in (0, 1); got {shown(v)}")
        return v

    @model_validator(mode="after")
    def _rules(self) -> "CertifySpec":
        from cr2.crc import RULES, rule_spec

        for rule in self.rules:
            if rule not in RULES:
                from cr2.core.errors import did_you_mean

                raise InvalidValueError(str(did_you_mean("certify.rules entry", rule, list(RULES))))
        if len(set(self.rules)) != len(self.rules):
            raise InvalidValueError(f"certify.rules lists a rule twice: {self.rules}")
        needs_delta = [r for r in self.rules if rule_spec(r).needs_delta]
        if needs_delta and self.delta is None:
            raise InvalidValueError(f"certify.rules {needs_delta} need certify.delta ∈ (0, 1), e.g. 0.1")
        if not needs_delta and self.delta is not None:
            raise InvalidValueError("certify.delta applies to the ltt rules only; none is in certify.rules (remove delta)")
        return self


class FitSpec(StrictModel):
    """How models are fitted: a fixed thread count per fit, so the numbers do not depend on the machine."""

    torch_threads: int = Field(1, ge=1, le=256, description="torch intra-op threads of every fit (teacher, gate, "
                               "ablation gates, baselines, premise cells) and of the inference that feeds one: "
                               "the same value gives bit-identical fits on any number of cores (1: these fits are "
                               "small, a second thread barely speeds one up and stalls it on a busy machine; "
                               "independent fits use the other cores instead)")
    workers: int | None = Field(None, ge=1, le=256, description="independent fits (baselines, ablation gates) run in "
                                "this many processes at once (None: the cores available ÷ torch_threads, and one "
                                "after another in the process for fits on fewer than 2,000 training rows, where a "
                                "process's start costs more than it saves; 1: one after another, in the process)")


@functools.lru_cache(maxsize=1)
def catalogue_default_routers() -> tuple[str, ...]:
    """The routers the router catalogue (cr2/routers/catalogue.yaml) tags `default`, in catalogue order: what a config
    fits when it names none. Read from the file itself because the config layer sits below cr2.routers (.importlinter);
    tests/routers/test_catalogue_groups.py checks it equals cr2.routers.routers_tagged("default")."""
    from cr2.core.boundary import load_yaml_file

    raw = load_yaml_file(Path(__file__).parents[1] / "routers" / "catalogue.yaml") or {}
    return tuple(str(name) for name, spec in raw.items() if "default" in ((spec or {}).get("tags") or []))


class BaselinesSpec(StrictModel):
    """The paper's comparison routers (§VII-A), fitted on train (tuned on dev) and evaluated on test."""

    routers: list[str] = Field(default_factory=lambda: list(catalogue_default_routers()),
                               description="router names (cr2.routers registry); 'always' expands to every model "
                                           "(default: the catalogue's routers tagged `default`)")
    params: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                              description="constructor keyword arguments per router name")
    num_threads: int | None = Field(None, ge=1, description="torch threads for fitting the baselines (None: "
                                    "fit.torch_threads)")
    catalogues: list[Path] = Field(default_factory=list,
                                   description="extra router catalogue YAML files (docs/new_router.md), beside "
                                               "cr2/routers/catalogue.yaml")
