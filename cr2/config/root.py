"""The whole configuration: every section, cross-checked, hashed per section for cache keys."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, field_validator, model_validator

from cr2.config import dataset_defs
from cr2.config.dataset_defs import DatasetDef
from cr2.core.errors import Cr2Error, InvalidValueError
from cr2.config.lmeval import LabelingSpec
from cr2.config.shipped import shipped_path
from cr2.config.base import Seed, StrictModel
from cr2.config.files import names_in, read_yaml, resolve_named
from cr2.config.system import (
    ChannelSpec, CommunicationSpec, CostSpec, HardwareProfile, ModelSpec, PowerSpec, merge_hardware_profiles)
from cr2.config.inputs import BenchmarkSpec, EmbeddingSpec, SplitSpec, TokenizerSpec
from cr2.config.method import (
    BaselinesSpec, CalibrationSpec, CertifySpec, FitSpec, GateSpec, GridSpec, RoutingSpec, TeacherSpec)
from cr2.config.label_sources import LabelSpec, SimcheckSpec
from cr2.config.evaluation import EvaluationSpec
from cr2.config.serving import ServingSpec


class Config(StrictModel):
    seed: Seed = 0
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
                                          "None: the defaults of cr2.config.lmeval")

    @field_validator("hardware", mode="before")
    @classmethod
    def _load_hw(cls, value: Any) -> Any:
        if isinstance(value, (str, Path)):
            return read_yaml(resolve_named(value, "hardware"))
        if isinstance(value, (list, tuple)):  # several hardware profiles: a pool mixing platforms
            return merge_hardware_profiles(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _dataset_defs(cls, data: Any) -> Any:
        """Resolve each benchmark's dataset definition and take its defaults (L_out, simulated lengths)."""
        if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), dict):
            return data
        data = dict(data)
        benchmarks: dict[str, Any] = {}
        for name, entry in data["benchmarks"].items():
            entry = dict(entry or {})
            ref = entry.get("definition")
            if not isinstance(ref, (DatasetDef, dict)):
                try:
                    entry["definition"] = dataset_defs.resolve(str(name), ref)
                except Cr2Error as exc:  # unknown name or a bad definition file
                    raise InvalidValueError(str(exc)) from None
            benchmarks[name] = entry
        data["benchmarks"] = benchmarks
        defs = {n: (e["definition"] if isinstance(e["definition"], DatasetDef)
                    else DatasetDef.model_validate(e["definition"])) for n, e in benchmarks.items()}
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
                    f"merges profiles (shipped under configs/hardware/: {names_in('hardware')})"
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
            from cr2.config.names import is_simulated

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

    def benchmark_def(self, name: str) -> DatasetDef:
        """The dataset definition of a benchmark of this config (or the shipped one, for one it does not list)."""
        spec = self.benchmarks.get(name)
        return spec.definition if spec is not None else dataset_defs.get_dataset(name)

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
