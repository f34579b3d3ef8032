"""Where correctness labels come from (the config's `labels:` section): the label source, the simulator, measured
label files, the sim-to-real check. Producing labels with lm-eval is configured in cr2/config/lmeval.py."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, field_validator, model_validator

from cr2.core.errors import InvalidValueError
from cr2.config.names import SourceName
from cr2.config.dataset_defs import OutputLengthDist
from cr2.config.base import Seed, StrictModel
from cr2.config.files import read_yaml, resolve_named


OutputTokenDist = OutputLengthDist  # the simulator's log-normal output length: one model, in cr2/config/dataset_defs.py


class SimulatorShape(StrictModel):
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


class SimulatorSpec(StrictModel):
    accuracy_file: str = Field(description="per-(model, benchmark) target accuracy, %, relative to data_dir's parent")
    predictable_share: float = Field(ge=0, le=1, description="share of item-difficulty variance predictable from the query")
    difficulty_sd: float = Field(gt=0, description="sd of the shared item difficulty, logits")
    idiosyncratic_sd: float = Field(ge=0, description="sd of the per-(model, item) deviation, logits")
    output_tokens: dict[str, OutputTokenDist]
    seed: Seed = 0
    shape: SimulatorShape | None = Field(None, description="simulated-irt-v2's fitted shape: a name under "
                                         "configs/labels/ or a path (v1 reads the three fields above instead)")

    @field_validator("shape", mode="before")
    @classmethod
    def _load_shape(cls, value: Any) -> Any:
        if isinstance(value, (str, Path)):
            return read_yaml(resolve_named(value, "labels"))
        return value


class MeasuredOrigin(StrictModel):
    """Where measured labels come from, recorded in every `label_runs` row of the source."""

    repository: str
    commit: str
    files: str = Field(description="the files the outputs were extracted from")
    licence: str
    extraction_rule: str = Field(description="how an answer became correct / wrong")
    citation: str = ""


class MeasuredLabelsSpec(StrictModel):
    """Measured correctness of published model outputs (data/measured/, cr2.labels.measured), imported as labels.source.

    Any measured pool: an outputs Parquet with one row per (model, item) — columns `model`, `correct` (0/1 or
    bool; null counts as wrong), `generated_chars` and the join columns — matched to the ingested queries of
    `benchmark` through `join` (outputs column → column of the benchmark files). MMLU-Pro
    (configs/mmlu-pro-measured.yaml) and the ZeroEval ladders (configs/zeroeval-*.yaml) are two instances."""

    benchmark: str | list[str] = Field(description="benchmark(s) the outputs answer (configs/datasets/); exactly the "
                                                 "enabled ones")
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


class LabelSpec(StrictModel):
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


class SimcheckSpec(StrictModel):
    """`cr2 simcheck`: measured vs simulated labels on MMLU-Pro (docs/labels.md, "The sim-to-real check")."""

    pool_config: str = Field("mmlu-pro-measured", description="config (name under configs/ or path) whose pool, "
                             "hardware and cost sections define the measured pool and its costs")
    measured_names: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_MEASURED_NAMES),
                                           description="pool model id → model name in data/measured/mmlu_pro_outputs.parquet")
    n_questions: int | None = Field(2000, ge=200, description="stable subsample of MMLU-Pro questions for the "
                                    "embeddings, ρ and the routing check (None: all 12,032)")
    structure_seeds: int = Field(5, ge=2, description="simulator seeds for the label-structure statistics")
    routing_seeds: int = Field(2, ge=1, description="simulator seeds for the routing outcomes (each refits every router)")
    refit: bool = Field(True, description="fit the v2 shape afresh on these data and record it (source 'fit') "
                        "beside the configured shape the check simulates (≈ 1 min)")
    chars_per_token: float = Field(4.0, gt=0, description="measured answer length → L_out, characters per token")
    sources: list[str] = Field(default_factory=lambda: ["simulated-irt-v2", "simulated-irt-v1"],
                               description="simulated label sources compared with the measured labels")
