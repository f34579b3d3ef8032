"""Typed configuration of cr2, loaded from YAML (configs/default.yaml is the paper's Table I).

Every physical quantity carries its unit in the field name; dB and dBm values are converted to linear
units once, here, at load time. Unknown keys are errors that name the key path. A state distribution
(configs/states/NAME.yaml) and a hardware profile (configs/hardware/NAME.yaml) are referenced by name
or path and resolved at load, so the resolved config — and its hash — covers them.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from cr2 import catalogue
from cr2.catalogue import BenchmarkDef, OutputLengthDist
from cr2.errors import ConfigError, Cr2Error, InvalidValueError
from cr2.labeling.spec import LabelingSpec
from cr2.names import ModelId, SourceName, StateName
# configs/ and the repository root (cr2.shipped: the checkout's, or the installed wheel's packaged configs)
from cr2.shipped import CONFIG_DIR, REPO_ROOT, shipped_path  # noqa: F401  (REPO_ROOT: re-exported)

DEFAULT_CONFIG = CONFIG_DIR / "default.yaml"
# the λ every summary quotes (`cr2 run`'s table, `cr2 results`, the report, the Prefect artefacts); on the default grid
HEADLINE_LAMS: tuple[float, ...] = (0.5, 2.0, 8.0)


def db_to_linear(value_db: float) -> float:
    """Power ratio from decibels: 10^(x/10)."""
    return 10.0 ** (value_db / 10.0)


def dbm_to_w(value_dbm: float) -> float:
    """Watts from dBm: 10^((x − 30)/10)."""
    return 10.0 ** ((value_dbm - 30.0) / 10.0)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- state distributions (configs/states)
class DistanceSpec(_Strict):
    kind: Literal["uniform"] = "uniform"
    low_m: float = Field(gt=0, description="lower bound of the UE–edge distance, m")
    high_m: float = Field(gt=0, description="upper bound of the UE–edge distance, m")

    @model_validator(mode="after")
    def _ordered(self) -> "DistanceSpec":
        if self.high_m <= self.low_m:
            raise InvalidValueError(f"high_m ({self.high_m}) must exceed low_m ({self.low_m})")
        return self


class FadingSpec(_Strict):
    kind: Literal["rayleigh", "rician"] = "rayleigh"
    k_factor_db: float | None = Field(None, description="Rician K factor, dB (rician only)")
    _k_factor: float | None = PrivateAttr(None)

    @model_validator(mode="after")
    def _k(self) -> "FadingSpec":
        if self.kind == "rician" and self.k_factor_db is None:
            raise InvalidValueError("rician fading needs k_factor_db")
        if self.kind == "rayleigh" and self.k_factor_db is not None:
            raise InvalidValueError("k_factor_db is only meaningful for rician fading")
        self._k_factor = None if self.k_factor_db is None else db_to_linear(self.k_factor_db)
        return self

    @property
    def k_factor(self) -> float | None:
        """Rician K as a linear power ratio (converted once at load)."""
        return self._k_factor


class PathLossSpec(_Strict):
    k0_db: float = Field(description="reference gain K0 at d0, dB")
    exponent: float = Field(gt=0, description="path-loss exponent α_pl")
    d0_m: float = Field(gt=0, description="reference distance, m")
    _k0: float = PrivateAttr(0.0)

    def model_post_init(self, __context: Any) -> None:
        self._k0 = db_to_linear(self.k0_db)

    @property
    def k0(self) -> float:
        """K0 as a linear power gain (converted once at load)."""
        return self._k0


class StateDistribution(_Strict):
    """A named, versioned distribution of the channel state ξ (paper §IV-B)."""

    name: StateName
    version: int = Field(ge=1)
    description: str = ""
    distance: DistanceSpec
    fading: FadingSpec
    path_loss: PathLossSpec

    @property
    def dist_id(self) -> str:
        """Stable id of this distribution: name@version+content hash."""
        digest = hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True).encode()).hexdigest()[:8]
        return f"{self.name}@v{self.version}-{digest}"


# ---------------------------------------------------------------- hardware profiles (configs/hardware)
class PlatformProfile(_Strict):
    prefill_flops_per_s: float = Field(gt=0, description="effective prefill throughput, FLOP/s")
    memory_bandwidth_bytes_per_s: float = Field(gt=0, description="effective memory bandwidth for decode, B/s")
    bytes_per_param: float = Field(2.0, gt=0, description="weight precision, bytes per parameter (bf16 = 2)")


class HardwareProfile(_Strict):
    name: str
    description: str = ""
    platforms: dict[str, PlatformProfile]


# ---------------------------------------------------------------- main config sections
class ModelSpec(_Strict):
    id: ModelId
    hf_name: str
    params: float = Field(gt=0, description="parameter count N_m")
    active_params: float | None = Field(None, gt=0, description="parameters active per token (mixture of experts): "
                                        "the N_m of the compute and decode cost; None: params")
    platform: str
    role: Literal["device", "edge"]
    server_power_w: float | None = Field(None, gt=0, description="edge active power P_m^srv, W (edge models)")


class CommunicationSpec(_Strict):
    bits_per_input_token: float = Field(gt=0)
    bits_per_output_token: float = Field(gt=0)
    bandwidth_ul_hz: float = Field(gt=0)
    bandwidth_dl_hz: float = Field(gt=0)
    tx_power_ue_w: float = Field(gt=0, description="UE radiated uplink power p_u^ul, W")
    tx_power_bs_w: float = Field(gt=0, description="edge access point radiated power p_bs^dl, W")
    rtt_s: float = Field(ge=0, description="UE–edge round-trip overhead τ_rtt, s")
    carrier_frequency_hz: float = Field(gt=0)
    noise_psd_dbm_per_hz: float = Field(description="noise power spectral density N0, dBm/Hz")
    _noise_psd_w_per_hz: float = PrivateAttr(0.0)

    def model_post_init(self, __context: Any) -> None:
        self._noise_psd_w_per_hz = dbm_to_w(self.noise_psd_dbm_per_hz)

    @property
    def noise_psd_w_per_hz(self) -> float:
        """N0 in W/Hz (converted once at load)."""
        return self._noise_psd_w_per_hz


class PowerSpec(_Strict):
    ue_tx_w: float = Field(gt=0, description="UE power while transmitting P_u^tx, W")
    ue_rx_w: float = Field(gt=0, description="UE power while receiving P_u^rx, W")
    ue_idle_w: float = Field(ge=0, description="UE idle power P_u^idle, W")
    ue_active_w: float = Field(gt=0, description="UE local-inference power P_0^act, W")


class CostSpec(_Strict):
    omega_t: float = Field(ge=0, le=1)
    omega_e: float = Field(ge=0, le=1)
    normalisation: Literal["fixed", "reference"] = Field(
        "fixed", description="fixed: the paper's T0/E0; reference: mean latency/energy of m_ref on the train split"
    )
    t0_s: float = Field(gt=0, description="latency scale T0, s")
    e0_j: float = Field(gt=0, description="energy scale E0, J")
    default_output_tokens: dict[str, float] = Field(
        default_factory=dict, description="L_out per benchmark when no label run recorded output lengths, tokens "
        "(default: the catalogue's default_output_tokens, configs/benchmarks/<name>.yaml)"
    )

    @model_validator(mode="after")
    def _weights(self) -> "CostSpec":
        if not math.isclose(self.omega_t + self.omega_e, 1.0, abs_tol=1e-9):
            raise InvalidValueError(f"omega_t + omega_e must be 1 (got {self.omega_t} + {self.omega_e})")
        return self


class ChannelSpec(_Strict):
    distribution: StateDistribution
    draws_per_query: int = Field(1, ge=1, description="channel states sampled per query")
    seed: int = 0

    @field_validator("distribution", mode="before")
    @classmethod
    def _load_by_name(cls, value: Any) -> Any:
        if isinstance(value, (str, Path)):
            return _read_yaml(resolve_named(value, "states"))
        return value


class BenchmarkSpec(_Strict):
    """A benchmark selected for the run: its catalogue definition (configs/benchmarks/) plus this config's choices."""

    enabled: bool = True
    definition: BenchmarkDef = Field(description="the catalogue entry; in YAML a path to a definition file, "
                                                 "default configs/benchmarks/<name>.yaml")
    file: str | None = Field(None, description="Parquet file, relative to data_dir (None: the catalogue's)")
    subsets: list[str] | Literal["all"] | None = Field(
        None, description="subsets to keep: a list, 'all', or None for the catalogue's default")

    @property
    def data_file(self) -> str:
        return self.file if self.file is not None else self.definition.file

    @property
    def selected_subsets(self) -> list[str] | None:
        """Subsets to keep, None for all."""
        if self.subsets == "all":
            return None
        return self.subsets if self.subsets is not None else self.definition.subsets


class TokenizerSpec(_Strict):
    kind: Literal["qwen", "path"] = "qwen"
    path: str | None = Field(None, description="a Hugging Face tokenizer folder; overrides the packaged Qwen vocabulary")


class SplitSpec(_Strict):
    train: float = Field(gt=0, lt=1)
    val: float = Field(gt=0, lt=1)
    test: float = Field(gt=0, lt=1)
    dev_fraction: float = Field(gt=0, lt=1, description="share of train held out as dev for checkpoint selection")
    seed: int = 0
    min_stratum: int = Field(20, ge=1, description="subsets smaller than this are stratified at benchmark level")

    @model_validator(mode="after")
    def _sum(self) -> "SplitSpec":
        if not math.isclose(self.train + self.val + self.test, 1.0, abs_tol=1e-9):
            raise InvalidValueError(f"train + val + test must be 1 (got {self.train + self.val + self.test})")
        return self


class LambdaGrid(_Strict):
    min: float = Field(gt=0)
    max: float = Field(gt=0)
    n_log: int = Field(ge=2)
    extra: list[float] = Field(default_factory=list, description="λ values added to the log grid (the paper's); "
                                                                 "0 adds the accuracy-only end of the sweep")

    @field_validator("extra")
    @classmethod
    def _extra_range(cls, v: list[float]) -> list[float]:
        if any(not (x >= 0 and math.isfinite(x)) for x in v):
            raise InvalidValueError(f"every extra λ must be finite and ≥ 0; got {v}")
        return v

    def values(self) -> list[float]:
        """Sorted λ grid: n_log log-spaced points in [min, max] plus the extras, rounded to 6 significant digits."""
        import numpy as np

        pts = np.geomspace(self.min, self.max, self.n_log).tolist() + list(self.extra)
        return sorted({float(f"{p:.6g}") for p in pts})


class GridSpec(_Strict):
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


class TeacherSpec(_Strict):
    hidden: int = Field(256, ge=1)
    w_cls: float = Field(1.0, ge=0)
    w_rank: float = Field(1.0, ge=0)
    lr: float = Field(3e-4, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    batch_size: int = Field(256, ge=1)
    epochs: int = Field(20, ge=1)
    grad_clip: float = Field(1.0, gt=0)
    seed: int = 0


class GateSpec(_Strict):
    hidden: int = Field(256, ge=1)
    dropout: float = Field(0.1, ge=0, lt=1)
    temperature_init: float = Field(0.1, gt=0)
    film_frequencies: list[float] = Field(default_factory=lambda: [0.5, 1.0, 2.0, 4.0])
    lr: float = Field(3e-4, gt=0)
    weight_decay: float = Field(0.01, ge=0)
    batch_size: int = Field(256, ge=1)
    epochs: int = Field(20, ge=1)
    grad_clip: float = Field(1.0, gt=0)
    huber_beta: float = Field(0.1, gt=0)
    lambdas_per_batch: int = Field(8, ge=1, description="J, log-uniform λ per mini-batch")
    lam_min: float = Field(0.1, gt=0)
    lam_max: float = Field(20.0, gt=0)
    w_sign: float = Field(1.0, ge=0)
    w_margin: float = Field(1.0, ge=0)
    w_mono: float = Field(1.0, ge=0)
    seed: int = 0


OutputTokenDist = OutputLengthDist  # the simulator's log-normal output length: one model, in cr2/catalogue.py


class SimulatorShape(_Strict):
    """Structural parameters of simulated-irt-v2, fitted on measured outputs (configs/labels/NAME.yaml)."""

    name: str
    description: str = ""
    latent_correlation: float = Field(gt=0, lt=1, description="r: correlation of two models' knowledge latents η")
    predictable_share: float = Field(ge=0, le=1, description="ρ: share of Var(δ) predictable from the query embedding")
    subset_share: float = Field(ge=0, le=1, description="w_s: share of the predictable part carried by the subset "
                                "effect (benchmarks with > 1 subset)")
    guess_floor: bool = Field(True, description="a multiple-choice item is right with probability 1/n_options "
                              "when the model does not know it")
    fitted_on: dict[str, Any] = Field(default_factory=dict, description="provenance of the fit: data, pool, "
                                      "procedure and the statistics it matched")


class SimulatorSpec(_Strict):
    accuracy_file: str = Field(description="per-(model, benchmark) target accuracy, %, relative to data_dir's parent")
    predictable_share: float = Field(ge=0, le=1, description="share of item-difficulty variance predictable from the query")
    difficulty_sd: float = Field(gt=0, description="sd of the shared item difficulty, logits")
    idiosyncratic_sd: float = Field(ge=0, description="sd of the per-(model, item) deviation, logits")
    output_tokens: dict[str, OutputTokenDist]
    seed: int = 0
    shape: SimulatorShape | None = Field(None, description="simulated-irt-v2's fitted shape: a name under "
                                         "configs/labels/ or a path (v1 reads the three fields above instead)")

    @field_validator("shape", mode="before")
    @classmethod
    def _load_shape(cls, value: Any) -> Any:
        if isinstance(value, (str, Path)):
            return _read_yaml(resolve_named(value, "labels"))
        return value


class MeasuredOrigin(_Strict):
    """Where measured labels come from, recorded in every `label_runs` row of the source."""

    repository: str
    commit: str
    files: str = Field(description="the files the outputs were extracted from")
    licence: str
    extraction_rule: str = Field(description="how an answer became correct / wrong")
    citation: str = ""


class MeasuredLabelsSpec(_Strict):
    """Measured correctness of published model outputs (data/measured/, cr2.measured), imported as labels.source.

    Any measured pool: an outputs Parquet with one row per (model, item) — columns `model`, `correct` (0/1 or
    bool; null counts as wrong), `generated_chars` and the join columns — matched to the ingested queries of
    `benchmark` through `join` (outputs column → column of the benchmark files). MMLU-Pro
    (configs/mmlu-pro-measured.yaml) and the ZeroEval ladders (configs/zeroeval-*.yaml) are two instances."""

    benchmark: str | list[str] = Field(description="catalogue benchmark(s) the outputs answer; exactly the enabled ones")
    outputs_file: str = Field(description="per-(model, item) outputs Parquet, relative to data_dir")
    join: dict[str, str] = Field(default_factory=lambda: {"question_id": "mmlu_pro_question_id"}, min_length=1,
                                 description="outputs column → benchmark-file column that identify an item "
                                 "(default: MMLU-Pro's question_id)")
    models: dict[str, str | dict[str, str]] = Field(
        min_length=1, description="pool model id → model name in the outputs file, or {benchmark: name} where a "
        "model's runs carry different names per benchmark")
    chars_per_token: float | dict[str, float] = Field(
        description="L_out,m(x) = generated_chars / chars_per_token, tokens; one factor or {benchmark: factor}")
    origin: MeasuredOrigin

    @property
    def benchmarks(self) -> list[str]:
        """The benchmarks the outputs answer, as a list."""
        return [self.benchmark] if isinstance(self.benchmark, str) else list(self.benchmark)

    @model_validator(mode="after")
    def _per_benchmark(self) -> "MeasuredLabelsSpec":
        names = set(self.benchmarks)
        if isinstance(self.chars_per_token, dict):
            if set(self.chars_per_token) != names or min(self.chars_per_token.values()) <= 0:
                raise InvalidValueError(f"labels.measured.chars_per_token: give one factor > 0 per benchmark "
                                        f"{sorted(names)} (got {self.chars_per_token})")
        for model, name in self.models.items():
            if isinstance(name, dict) and set(name) != names:
                raise InvalidValueError(f"labels.measured.models.{model}: name the model for every benchmark "
                                        f"{sorted(names)} (got {sorted(name)})")
        return self


class LabelSpec(_Strict):
    source: SourceName = Field(description="label source the pipeline trains and evaluates on")
    simulator: SimulatorSpec
    measured: MeasuredLabelsSpec | None = Field(None, description="import labels.source from measured outputs "
                                                "before training (None: simulated, or labels already in the warehouse)")


DEFAULT_MEASURED_NAMES = {
    "phi-3-mini": "Phi-3-mini-4k-instruct",
    "llama-3.1-8b-instruct": "Meta-Llama-3_1-8B-Instruct",
    "mixtral-8x7b-instruct": "Mixtral-8x7B-Instruct-v0.1",
    "llama-3.1-70b-instruct": "Meta-Llama-3_1-70B-Instruct",
}


class SimcheckSpec(_Strict):
    """`cr2 simcheck`: measured vs simulated labels on MMLU-Pro (docs/labels.md, "The sim-to-real check")."""

    pool_config: str = Field("mmlu-pro-measured", description="config (name under configs/ or path) whose pool, "
                             "hardware and cost sections define the measured pool and its costs")
    measured_names: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_MEASURED_NAMES),
                                           description="pool model id → model name in data/measured/mmlu_pro_outputs")
    n_questions: int | None = Field(2000, ge=200, description="stable subsample of MMLU-Pro questions for the "
                                    "embeddings, ρ and the routing check (None: all 12,032)")
    structure_seeds: int = Field(5, ge=2, description="simulator seeds for the label-structure statistics")
    routing_seeds: int = Field(2, ge=1, description="simulator seeds for the routing outcomes (each refits every router)")
    refit: bool = Field(True, description="fit the v2 shape afresh on these data and record it (source 'fit') "
                        "beside the configured shape the check simulates (≈ 1 min)")
    chars_per_token: float = Field(4.0, gt=0, description="measured answer length → L_out, characters per token")
    sources: list[str] = Field(default_factory=lambda: ["simulated-irt-v2", "simulated-irt-v1"],
                               description="simulated label sources compared with the measured labels")


class EmbeddingSpec(_Strict):
    encoder: str = "all-MiniLM-L6-v2"
    backend: Literal["onnx", "torch", "onnx-int8"] = Field(
        "onnx", description="runtime of the same network: onnxruntime over a cached ONNX export (default, ≈ 1.9× "
        "faster on CPU) or torch; onnx-int8 (opt-in) runs a dynamically int8-quantised copy, a slightly different "
        "function (benchmarks/bench_device.py measures its effect on routing)")
    batch_size: int = Field(32, ge=1)
    max_seq_length: int = Field(256, ge=8, le=512)

    @property
    def store_name(self) -> str:
        """The encoder name the warehouse keeps embeddings under: onnx and torch compute the same function
        (≈ 2e-7 apart) and share it; onnx-int8 is a different function and gets its own, so they never mix."""
        return f"{self.encoder}+int8" if self.backend == "onnx-int8" else self.encoder


class RoutingSpec(_Strict):
    deferred_variant: Literal["edge-only", "inclusive", "fallback"] = "edge-only"
    on_demand_calibration: bool = False
    decision_cost: Literal["estimated", "realised"] = Field(
        "estimated", description="cost routers decide with: 'estimated' = ĉ with the pre-execution output length L̂_out "
                                 "(train mean per benchmark and model; the paper's protocol); 'realised' = the cost with "
                                 "the output length the model has not written yet (a named, non-causal variant)")


class CalibrationSpec(_Strict):
    """Which guarantee the threshold table carries (docs/guarantees.md): crc, ltt over the λ grid, Mondrian groups."""

    rule: str = Field("crc", description="a catalogued rule (cr2.crc.RULE_CATALOGUE): crc: E[teacher disagreement] ≤ α "
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
    n_resplits: int = Field(500, ge=10, description="re-splits of val + test for the guarantee validity check")

    @model_validator(mode="after")
    def _delta_matches_rule(self) -> "CalibrationSpec":
        from cr2.crc import RULES, rule_spec

        if self.rule not in RULES:
            from cr2.errors import did_you_mean

            raise InvalidValueError(str(did_you_mean("calibration.rule", self.rule, list(RULES))))
        needs_delta = rule_spec(self.rule).needs_delta
        if needs_delta and self.delta is None:
            raise InvalidValueError(f"calibration.rule '{self.rule}' needs calibration.delta ∈ (0, 1), e.g. 0.1")
        if not needs_delta and self.delta is not None:
            raise InvalidValueError(f"calibration.delta applies to the ltt rules only (ltt, ltt-oracle, ltt-avoidable); rule is '{self.rule}' (remove delta)")
        return self


class CertifySpec(_Strict):
    """Certified routing for every router (cr2.certify): which rules and α each certified `<router>@<rule>` gets."""

    alphas: list[float] = Field(default_factory=lambda: [0.005, 0.01, 0.02, 0.05], min_length=1,
                                description="risk levels α every certified router is calibrated at (each in (0, 1))")
    rules: list[str] = Field(default_factory=lambda: ["crc", "crc-oracle", "crc-avoidable"], min_length=1,
                             description="calibrated rules (cr2.crc.RULE_CATALOGUE): a certified router per rule")
    routers: list[str] | None = Field(None, description="routers to certify (catalogue names; 'cr2' certifies CR²'s "
                                      "gate score); null: every configured baseline that predicts p̂, and cr2")
    delta: float | None = Field(None, gt=0, lt=1, description="the ltt rules only: P(some λ's threshold has risk > α) ≤ δ")

    @field_validator("alphas")
    @classmethod
    def _alpha_range(cls, v: list[float]) -> list[float]:
        if any(not 0 < a < 1 for a in v) or len(set(v)) != len(v):
            raise InvalidValueError(f"certify.alphas must be distinct risk levels in (0, 1); got {v}")
        return v

    @model_validator(mode="after")
    def _rules(self) -> "CertifySpec":
        from cr2.crc import RULES, rule_spec

        for rule in self.rules:
            if rule not in RULES:
                from cr2.errors import did_you_mean

                raise InvalidValueError(str(did_you_mean("certify.rules entry", rule, list(RULES))))
        if len(set(self.rules)) != len(self.rules):
            raise InvalidValueError(f"certify.rules lists a rule twice: {self.rules}")
        needs_delta = [r for r in self.rules if rule_spec(r).needs_delta]
        if needs_delta and self.delta is None:
            raise InvalidValueError(f"certify.rules {needs_delta} need certify.delta ∈ (0, 1), e.g. 0.1")
        if not needs_delta and self.delta is not None:
            raise InvalidValueError("certify.delta applies to the ltt rules only; none is in certify.rules (remove delta)")
        return self


class FitSpec(_Strict):
    """How models are fitted: a fixed thread count per fit, so the numbers do not depend on the machine."""

    torch_threads: int = Field(1, ge=1, le=256, description="torch intra-op threads of every fit (teacher, gate, "
                               "ablation gates, baselines, premise cells) and of the inference that feeds one: "
                               "the same value gives bit-identical fits on any number of cores (1: these fits are "
                               "small, a second thread barely speeds one up and stalls it on a busy machine; "
                               "independent fits use the other cores instead)")
    workers: int | None = Field(None, ge=1, le=256, description="independent fits (baselines, ablation gates) run in "
                                "this many processes at once (None: the cores available ÷ torch_threads; 1: "
                                "one after another, in the process)")


class BaselinesSpec(_Strict):
    """The paper's comparison routers (§VII-A), fitted on train (tuned on dev) and evaluated on test."""

    routers: list[str] = Field(default_factory=lambda: ["always", "knn", "mlp", "embedllm", "llmrank", "llmrank-bench"],
                               description="router names (cr2.routers registry); 'always' expands to every model")
    params: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                              description="constructor keyword arguments per router name")
    num_threads: int | None = Field(None, ge=1, description="torch threads for fitting the baselines (None: "
                                    "fit.torch_threads)")
    catalogues: list[Path] = Field(default_factory=list,
                                   description="extra router catalogue YAML files (docs/new_router.md), beside "
                                               "cr2/routers/catalogue.yaml")


class BootstrapSpec(_Strict):
    """Paired bootstrap over the test queries (issue 25): one index array shared by every method."""

    n_resamples: int = Field(1000, ge=100, description="resamples of the test queries (≥ 1,000 for published intervals)")
    level: float = Field(0.95, gt=0, lt=1, description="nominal coverage of the percentile intervals")
    seed: int = Field(0, description="seed of the shared resample index")
    per_benchmark: bool = Field(True, description="intervals per benchmark too (besides 'all')")


class EvaluationSpec(_Strict):
    exclude_unsolvable: bool = Field(True, description="drop test queries no model solves from accuracy/cost/local "
                                                       "rate (paper §VII-A); the risk always uses every test query")
    n_resplits: int = Field(200, ge=0, description="random calibration/test re-splits for the risk-vs-α bands "
                            "(0: no Monte-Carlo bands, what `cr2 recalibrate` uses unless --bands)")
    fixed_rates: list[float] = Field(default_factory=lambda: [0.10, 0.20],
                                     description="fixed local rates f of the paper's ablation rows (accept the top f of "
                                                 "the calibration scores, no risk control)")
    bootstrap: BootstrapSpec = Field(default_factory=BootstrapSpec,
                                     description="paired bootstrap intervals of every operating point and saving")

    @field_validator("n_resplits")
    @classmethod
    def _zero_or_enough(cls, v: int) -> int:
        if 0 < v < 10:
            raise InvalidValueError(f"n_resplits={v}: use 0 (no bands) or at least 10 re-splits for a 5–95 % band")
        return v


class ServingSpec(_Strict):
    """`cr2 serve`: where the routed models answer (OpenAI-compatible endpoints) and the server's defaults."""

    endpoints: dict[str, str] = Field(default_factory=dict, description="model id → OpenAI-compatible base URL "
                                      "(…/v1) of the server that runs it; needed by /v1/chat/completions")
    served_names: dict[str, str] = Field(default_factory=dict, description="model id → model name the endpoint "
                                         "expects (default: the model's hf_name)")
    api_key_env: str | None = Field(None, description="environment variable holding the endpoints' API key")
    timeout_s: float = Field(120.0, gt=0, allow_inf_nan=False, description="upstream request timeout (read, write, "
                             "pool), s")
    connect_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False, description="upstream connect timeout, s")
    default_lam: float = Field(1.0, gt=0, allow_inf_nan=False, description="λ when a chat request names none")
    token_env: str = Field("CR2_SERVE_TOKEN", description="environment variable holding the bearer token clients "
                           "must send (Authorization: Bearer …); required when bound beyond loopback")
    allowed_hosts: list[str] = Field(default_factory=list, description="Host names accepted besides the loopback names "
                                     "and the bound address ('*': any; DNS-rebinding guard)")
    allowed_origins: list[str] = Field(default_factory=list, description="browser origins (scheme://host[:port]) "
                                       "allowed to call the API besides the server's own")
    max_body_bytes: int = Field(1 << 20, ge=1024, description="largest request body, bytes (larger: 413)")
    max_prompt_chars: int = Field(32_768, ge=1, description="longest routed query text, characters (longer: 413)")
    max_concurrency: int = Field(8, ge=1, description="requests decided or forwarded at once; more wait")
    queue_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False, description="how long a request waits for a "
                                   "free slot before 503 Retry-After")
    header_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False, description="how long a client may take to send "
                                    "a request's headers before the connection is closed (slow-header clients)")
    body_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False, description="how long a client may take to send a "
                                  "request body, s, extended by min_body_rate_bps (slow-body clients are disconnected)")
    min_body_rate_bps: float = Field(1024.0, gt=0, allow_inf_nan=False, description="each byte of a request body "
                                     "received buys 1 / min_body_rate_bps s more of body_timeout_s, bytes/s")
    max_response_bytes: int = Field(64 << 20, ge=1024, description="largest upstream answer passed on, bytes (after "
                                    "decompression; larger: 502)")
    # micro-batching of concurrent /route requests into length-bucketed encoder calls (cr2_cli/serve/batching.py)
    batch_max_size: int = Field(1, ge=1, le=1024, description="most /route requests per micro-batch (1: no batching)")
    batch_max_wait_ms: float = Field(2.0, ge=0, le=1000, description="longest a request waits for companions, ms")
    batch_call_overhead_tokens: float = Field(16.0, ge=0, allow_inf_nan=False, description="an encoder call's fixed "
                                              "cost in padded tokens: a batch is split into length buckets where "
                                              "another call costs less than the padding it saves")
    reload_interval_s: float = Field(1.0, ge=0, allow_inf_nan=False, description="how often a running server looks "
                                     "for a newer threshold table (a re-calibration) and swaps to it without a "
                                     "restart, s (0: never)")
    embedding_cache_size: int = Field(4096, ge=0, description="query embeddings kept in the LRU cache (0: no cache)")
    torch_threads: int = Field(1, ge=1, le=256, description="torch intra-op threads of the serving process (the "
                               "per-request teacher and gate see one row: more threads only spin; the ONNX encoder "
                               "keeps the threads it was loaded with)")

    @field_validator("endpoints")
    @classmethod
    def _endpoint_urls(cls, endpoints: dict[str, str]) -> dict[str, str]:
        """http(s) base URLs without credentials: a `user:pass@` part would make the HTTP client send Basic auth
        instead of the configured bearer key (api_key_env), silently; credentials belong in api_key_env."""
        from urllib.parse import urlsplit

        for model_id, url in endpoints.items():
            try:
                parts = urlsplit(url)
                parts.port  # noqa: B018  (raises ValueError on a non-numeric port)
            except ValueError as exc:
                raise ValueError(f"serving.endpoints.{model_id} is not a URL ({exc})") from None
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ValueError(f"serving.endpoints.{model_id} must be an http:// or https:// URL with a host")
            if parts.username is not None or parts.password is not None:
                raise ValueError(f"serving.endpoints.{model_id} holds credentials (user:password@); remove them and "
                                 "put the endpoints' key in the variable named by serving.api_key_env")
        return endpoints


class Config(_Strict):
    seed: int = 0
    data_dir: str = Field("data", description="folder of the shipped data, relative to the repo root (an installed "
                                               "wheel: the current folder, else its packaged data)")
    models: list[ModelSpec] = Field(min_length=2)
    reference_model: str | None = Field(None, description="m_ref; default: the model with the most parameters")
    communication: CommunicationSpec
    power: PowerSpec
    cost: CostSpec
    channel: ChannelSpec
    hardware: HardwareProfile
    benchmarks: dict[str, BenchmarkSpec]
    tokenizer: TokenizerSpec = TokenizerSpec()
    splits: SplitSpec
    grids: GridSpec
    embedding: EmbeddingSpec = EmbeddingSpec()
    teacher: TeacherSpec = TeacherSpec()
    gate: GateSpec = GateSpec()
    labels: LabelSpec
    routing: RoutingSpec = RoutingSpec()
    calibration: CalibrationSpec = CalibrationSpec()
    baselines: BaselinesSpec = BaselinesSpec()
    certify: CertifySpec = CertifySpec()
    fit: FitSpec = FitSpec()
    evaluation: EvaluationSpec = EvaluationSpec()
    serving: ServingSpec = ServingSpec()
    simcheck: SimcheckSpec = SimcheckSpec()
    labeling: LabelingSpec | None = Field(None, description="lm-evaluation-harness labeling (docs/labeling.md); "
                                          "None: the defaults of cr2.labeling.spec")

    @field_validator("hardware", mode="before")
    @classmethod
    def _load_hw(cls, value: Any) -> Any:
        if isinstance(value, (str, Path)):
            return _read_yaml(resolve_named(value, "hardware"))
        if isinstance(value, (list, tuple)):  # several catalogue profiles: a pool mixing platforms
            return merge_hardware_profiles(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _catalogue(cls, data: Any) -> Any:
        """Resolve each benchmark's catalogue definition and take its defaults (L_out, simulated lengths)."""
        if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), dict):
            return data
        data = dict(data)
        benchmarks: dict[str, Any] = {}
        for name, entry in data["benchmarks"].items():
            entry = dict(entry or {})
            ref = entry.get("definition")
            if not isinstance(ref, (BenchmarkDef, dict)):
                try:
                    entry["definition"] = catalogue.resolve(str(name), ref)
                except Cr2Error as exc:  # unknown name or a bad definition file
                    raise InvalidValueError(str(exc)) from None
            benchmarks[name] = entry
        data["benchmarks"] = benchmarks
        defs = {n: (e["definition"] if isinstance(e["definition"], BenchmarkDef)
                    else BenchmarkDef.model_validate(e["definition"])) for n, e in benchmarks.items()}
        if isinstance(data.get("cost"), dict):
            given = dict(data["cost"].get("default_output_tokens") or {})
            data["cost"] = {**data["cost"], "default_output_tokens": {
                **{n: d.default_output_tokens for n, d in defs.items()}, **given}}
        labels = data.get("labels")
        if isinstance(labels, dict) and isinstance(labels.get("simulator"), dict):
            sim = labels["simulator"]
            given = dict(sim.get("output_tokens") or {})
            lengths = {n: d.simulated.output_tokens.model_dump() for n, d in defs.items() if d.simulated is not None}
            data["labels"] = {**labels, "simulator": {**sim, "output_tokens": {**lengths, **given}}}
        return data

    @model_validator(mode="after")
    def _pool(self) -> "Config":
        ids = [m.id for m in self.models]
        if len(set(ids)) != len(ids):
            raise InvalidValueError(f"model ids must be unique: {ids}")
        devices = [m.id for m in self.models if m.role == "device"]
        if len(devices) != 1 or self.models[0].role != "device":
            raise InvalidValueError(f"the pool needs exactly one device model, listed first (got device models {devices})")
        for m in self.models:
            if m.platform not in self.hardware.platforms:
                raise InvalidValueError(
                    f"model '{m.id}' runs on platform '{m.platform}', which hardware profile "
                    f"'{self.hardware.name}' does not define (has: {', '.join(self.hardware.platforms)}); "
                    f"list the profile that defines it, `hardware: [{self.hardware.name.replace('+', ', ')}, …]` "
                    f"merges profiles (catalogue under configs/hardware/: {_names('hardware')})"
                )
            if m.role == "edge" and m.server_power_w is None:
                raise InvalidValueError(f"edge model '{m.id}' needs server_power_w")
        measured = self.labels.measured
        if measured is not None:
            if sorted(measured.models) != sorted(ids):
                raise InvalidValueError(f"labels.measured.models must name every pool model once (pool: {ids}, "
                                 f"measured: {sorted(measured.models)})")
            if sorted(self.enabled_benchmarks) != sorted(measured.benchmarks):
                raise InvalidValueError(f"measured labels cover benchmark(s) {measured.benchmarks} only; enable exactly "
                                        f"those (enabled: {self.enabled_benchmarks})")
            from cr2.names import is_simulated

            if is_simulated(self.labels.source):
                raise InvalidValueError(f"labels.source '{self.labels.source}' names simulated labels; measured labels need "
                                 "their own source name (e.g. measured-mmlu-pro-v1)")
        if self.reference_model is not None and self.reference_model not in ids:
            raise InvalidValueError(f"reference_model '{self.reference_model}' is not in the pool {ids}")
        for b in self.enabled_benchmarks:
            if b not in self.cost.default_output_tokens:
                raise InvalidValueError(f"cost.default_output_tokens has no entry for benchmark '{b}'")
        return self

    # ------------------------------------------------------------ derived views
    @property
    def model_ids(self) -> list[str]:
        return [m.id for m in self.models]

    @property
    def device_model(self) -> ModelSpec:
        return self.models[0]

    @property
    def edge_models(self) -> list[ModelSpec]:
        return self.models[1:]

    @property
    def ref_model_id(self) -> str:
        if self.reference_model is not None:
            return self.reference_model
        return max(self.models, key=lambda m: m.params).id

    @property
    def enabled_benchmarks(self) -> list[str]:
        return [b for b, spec in self.benchmarks.items() if spec.enabled]

    @property
    def data_path(self) -> Path:
        return shipped_path(self.data_dir)

    def benchmark_def(self, name: str) -> BenchmarkDef:
        """The catalogue entry of a benchmark of this config (or the catalogue's, for one it does not list)."""
        spec = self.benchmarks.get(name)
        return spec.definition if spec is not None else catalogue.get_benchmark(name)

    def benchmark_file(self, name: str) -> Path:
        """The benchmark's Parquet file (data_dir-relative names resolved)."""
        return self.data_path / self.benchmarks[name].data_file

    def section_hash(self, *sections: str) -> str:
        """Hash of the named config sections (all when none given): part of every cache key."""
        dump = self.model_dump(mode="json")
        part = {s: dump[s] for s in sections} if sections else dump
        return hashlib.sha256(json.dumps(part, sort_keys=True).encode()).hexdigest()[:16]

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


# ---------------------------------------------------------------- loading
def resolve_named(ref: str | Path, kind: str) -> Path:
    """A name ('far-rician') or a path to a YAML file under configs/<kind>/ → the file's path."""
    p = Path(ref)
    if p.suffix in (".yaml", ".yml"):
        if p.is_file():
            return p
        candidate = CONFIG_DIR / kind / p.name
        if not p.is_absolute() and shipped_path(p).is_file():
            return shipped_path(p)
        if candidate.is_file():
            return candidate
        raise ConfigError(f"{kind} file '{ref}' not found; pass a path to a YAML file or one of: {_names(kind)}")
    candidate = CONFIG_DIR / kind / f"{ref}.yaml"
    if candidate.is_file():
        return candidate
    raise ConfigError(f"unknown {kind} '{ref}'; available: {_names(kind)} (or pass a path to a YAML file)")


def merge_hardware_profiles(refs: list[Any]) -> dict[str, Any]:
    """One hardware profile from several (names under configs/hardware/, paths or mappings), platforms merged in
    order; a platform two profiles define differently is an error naming both (so no figure silently wins)."""
    if not refs:
        raise ConfigError("hardware: an empty list; name at least one profile (catalogue: " + _names("hardware") + ")")
    names, descriptions, platforms, owner = [], [], {}, {}
    for ref in refs:
        data = _read_yaml(resolve_named(ref, "hardware")) if isinstance(ref, (str, Path)) else dict(ref)
        profile = HardwareProfile.model_validate(data)
        names.append(profile.name)
        if profile.description:
            descriptions.append(f"{profile.name}: {profile.description}")
        for pname, spec in profile.platforms.items():
            if pname in platforms and platforms[pname] != spec:
                raise ConfigError(f"hardware: platform '{pname}' differs between profiles '{owner[pname]}' "
                                  f"({platforms[pname].model_dump()}) and '{profile.name}' ({spec.model_dump()}); "
                                  "rename one of them or drop one profile")
            platforms.setdefault(pname, spec)
            owner.setdefault(pname, profile.name)
    return {"name": "+".join(names), "description": "; ".join(descriptions),
            "platforms": {k: v.model_dump() for k, v in platforms.items()}}


def _names(kind: str) -> str:
    return ", ".join(sorted(p.stem for p in (CONFIG_DIR / kind).glob("*.yaml"))) or "(none)"


def _read_yaml(path: Path) -> dict[str, Any]:
    """A config file's top-level mapping, read within cr2.boundary's byte / alias-expansion / depth budgets."""
    from cr2.boundary import load_yaml, read_yaml_bytes
    from cr2.errors import InvalidValueError

    try:
        data = load_yaml(read_yaml_bytes(path), str(path))
    except InvalidValueError as exc:
        raise ConfigError(str(exc)) from None
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{path}: malformed YAML{where}: {problem}; fix the syntax and try again") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level, got {type(data).__name__}")
    return data


def _format_validation(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: invalid configuration ({exc.error_count()} problem{'s' if exc.error_count() > 1 else ''})"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"  {loc}: unknown key; remove it or check its spelling (see configs/default.yaml)")
        elif err["type"] == "missing":
            lines.append(f"  {loc}: required key is missing")
        else:
            got = err.get("input")
            got_s = "" if isinstance(got, (dict, list)) else f" (got {got!r})"
            lines.append(f"  {loc}: {err['msg']}{got_s}")
    return "\n".join(lines)


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Load and validate a cr2 config (None → configs/default.yaml; a name or a configs/ path not in the current folder
    → the shipped file, resolve_config_path); raises ConfigError naming file and key."""
    cfg_path = Path(path) if path is not None else DEFAULT_CONFIG
    if not cfg_path.is_file():
        try:
            cfg_path = resolve_config_path(cfg_path)
        except ConfigError:
            pass  # reading it below names the missing file
    data = _resolve_extends(cfg_path, _read_yaml(cfg_path), seen=(cfg_path.resolve(),))
    if overrides:
        data = _deep_merge(data, overrides)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation(cfg_path, exc)) from None
    except ConfigError as exc:  # a referenced states/hardware file failed to load
        raise ConfigError(f"{cfg_path}: {exc}") from None


def _resolve_extends(path: Path, data: dict[str, Any], seen: tuple[Path, ...]) -> dict[str, Any]:
    """`extends: default` (a name under configs/ or a path) merges this file's keys over the base file's."""
    base_ref = data.pop("extends", None)
    if base_ref is None:
        return data
    base = Path(str(base_ref))
    if base.suffix not in (".yaml", ".yml"):
        base = CONFIG_DIR / f"{base_ref}.yaml"
    elif not base.is_absolute():
        base = path.parent / base
    if not base.is_file():
        raise ConfigError(f"{path}: extends: '{base_ref}' not found (a name under configs/, e.g. 'default', or a YAML path)")
    if base.resolve() in seen:
        raise ConfigError(f"{path}: extends: '{base_ref}' forms a cycle")
    merged = _resolve_extends(base, _read_yaml(base), seen + (base.resolve(),))
    return _deep_merge(merged, data)


def load_state_distribution(ref: str | Path) -> StateDistribution:
    """Load a named or file state distribution (configs/states/NAME.yaml)."""
    path = resolve_named(ref, "states")
    try:
        return StateDistribution.model_validate(_read_yaml(path))
    except ValidationError as exc:
        raise ConfigError(_format_validation(path, exc)) from None


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def resolve_config_path(ref: str | Path) -> Path:
    """A config named by its file name under configs/ ('mmlu-pro-measured') or by a path → the file's path."""
    p = Path(str(ref))
    if p.suffix not in (".yaml", ".yml"):
        p = CONFIG_DIR / f"{ref}.yaml"
    elif not p.is_absolute() and not p.is_file():
        p = shipped_path(p)
    if not p.is_file():
        names = ", ".join(sorted(q.stem for q in CONFIG_DIR.glob("*.yaml"))) or "(none)"
        raise ConfigError(f"config '{ref}' not found; pass a YAML path or one of: {names}")
    return p
