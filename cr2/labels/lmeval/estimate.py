"""How long a labeling run will take on this machine: measured rates on a sample, projected onto the warehouse.

For each pool model a random-weight model of its real shape is built (cr2/labels/lmeval/architectures.py) and a
small sample of every benchmark is labelled through the code path of `cr2 label` — `ChunkEvaluator`, i.e.
`lm_eval.simple_evaluate` with cr2's task definitions, loglikelihood for multiple choice and generation up to
the task's `max_gen_toks` for generative benchmarks, in chunks of `chunk_size`, with the spec's batch
settings. Nothing is written to the warehouse.

What is timed, and what is not:
- a **warm-up** call of one query per benchmark comes first and is not timed: lm-eval's first call builds
  its task manager and the device's kernels start up, costs a run pays once per model, not per query;
- the **batch-size probes** of `batch_size: auto` (once per length group for the model's lifetime,
  cr2/labels/lmeval/hf_batching.py) are timed apart and reported as a fixed cost, not spread over the queries;
- the rest — every lm-eval call over the sample — gives the benchmark's queries/s, and the projection of
  n queries is n / (queries/s).

Random weights never stop early, so the generative rates are those of generations that all run to
`max_gen_toks`: the projection is a worst case for BBH and MBPP (a trained model usually stops sooner).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from cr2.core.errors import ConfigError
from cr2.labels.lmeval.runs import chunks
from cr2.config.labeling import LabelingSpec


@dataclass(frozen=True)
class BenchmarkRate:
    """The measured labeling rate of one (model, benchmark) sample."""

    model_id: str
    benchmark: str
    sample_queries: int  # queries labelled in the timed calls
    chunks: int  # lm-eval calls they took
    seconds: float  # wall time of those calls, batch-size probes excluded, s
    window: tuple[float, float] = (0.0, 0.0)  # epoch seconds when the timed calls started and ended

    @property
    def queries_per_s(self) -> float:
        return self.sample_queries / self.seconds if self.seconds > 0 else float("inf")

    def projected_s(self, n_queries: int) -> float:
        """Seconds to label `n_queries` more queries of this benchmark at the measured rate."""
        return n_queries / self.queries_per_s if n_queries else 0.0


@dataclass(frozen=True)
class ModelRates:
    """What was measured for one pool model."""

    model_id: str
    shape: str  # where the architecture came from: the catalogue's hf_name or a model folder
    params: int  # parameters of the random-weight model
    device: str
    dtype: str
    build_s: float  # building the random-weight model and its lm-eval wrapper, s
    warmup_s: float  # the untimed first calls, s
    probe_s: float  # batch-size probes during the timed calls, s
    rates: tuple[BenchmarkRate, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class ModelShape:
    """How to build one pool model's random-weight stand-in: a transformers config and a tokenizer."""

    model_id: str
    source: str  # hf_name of the catalogue entry, or the folder its config.json came from
    config: Any  # transformers PretrainedConfig
    tokenizer: str  # 'qwen3-bpe' or a tokenizer folder


def resolve_shape(model_id: str, hf_name: str, weights: str | None, catalogue: dict[str, Any]) -> ModelShape:
    """The shape of a pool model: its weights folder's config.json if it has one, else its catalogue entry."""
    from cr2.labels.lmeval.architectures import folder_config

    for candidate in (weights, hf_name):
        if candidate and Path(candidate).expanduser().is_dir():
            folder = str(Path(candidate).expanduser().resolve())
            return ModelShape(model_id, folder, folder_config(folder), folder)
    arch = catalogue.get(hf_name)
    if arch is None:
        raise ConfigError(
            f"no architecture for model '{model_id}' (hf_name '{hf_name}'): add the numbers of its config.json to "
            f"configs/architectures.yaml, or give a folder with its config.json and tokenizer "
            f"(--model-path {model_id}=FOLDER); known: {', '.join(sorted(catalogue)) or 'none'}"
        )
    return ModelShape(model_id, hf_name, arch.hf_config(), arch.tokenizer)


def build_lm(shape: ModelShape, spec: LabelingSpec, device: str, cache_dir: Path) -> tuple[Any, int]:
    """lm-eval's hf model over a random-weight model of `shape` on `device`; returns (lm, parameter count)."""
    from cr2.labels.lmeval.architectures import load_tokenizer, random_model
    from cr2.labels.lmeval.backends import hf_lm_from_model

    if spec.hf.num_threads and device.startswith("cpu"):
        import torch

        torch.set_num_threads(int(spec.hf.num_threads))
    tokenizer = load_tokenizer(shape.tokenizer, cache_dir)
    model = random_model(shape.config, spec.hf.dtype, device, seed=spec.seed)
    params = sum(p.numel() for p in model.parameters())
    return hf_lm_from_model(model, tokenizer, spec), params


def _probe_s(lm: Any) -> float:
    return float(getattr(lm, "probe_s", 0.0))


def measure_rates(
    lm: Any,
    model_id: str,
    spec: LabelingSpec,
    samples: dict[str, pd.DataFrame],
    workdir: Path,
    fewshot: dict[str, list[dict[str, Any]]] | None = None,
) -> tuple[list[BenchmarkRate], float, float]:
    """Label each benchmark's sample (query rows, as `cr2 label` reads them) in chunks; returns
    (rates, warm-up s, probe s). The first query of every sample is labelled once untimed first (warm-up)."""
    from cr2.labels.lmeval.runner import ChunkEvaluator

    fewshot = fewshot or {}
    evaluator = ChunkEvaluator(lm, spec, Path(workdir))
    t0 = time.perf_counter()
    for benchmark, queries in samples.items():
        if len(queries):
            evaluator.evaluate(benchmark, queries.head(1), fewshot.get(benchmark))
    warmup_s = time.perf_counter() - t0
    rates: list[BenchmarkRate] = []
    probe_total = 0.0
    for benchmark, queries in samples.items():
        by_id = queries.set_index("query_id", drop=False)
        ids = by_id.index.tolist()
        parts = chunks(ids, spec.chunk_size)
        probe_before = _probe_s(lm)
        started = time.time()
        t0 = time.perf_counter()
        for part in parts:
            evaluator.evaluate(benchmark, by_id.loc[part], fewshot.get(benchmark))
        wall_s = time.perf_counter() - t0
        probe = _probe_s(lm) - probe_before
        probe_total += probe
        rates.append(BenchmarkRate(model_id, benchmark, len(ids), len(parts), max(wall_s - probe, 1e-9),
                                   (started, time.time())))
    return rates, warmup_s, probe_total


def projection_table(models: list[ModelRates], counts: pd.DataFrame) -> pd.DataFrame:
    """One row per (model, benchmark): measured queries/s and the projected seconds for the whole selection
    (`total`) and for the queries the run has not labelled yet (`unlabelled`); `counts` has columns
    model_id, benchmark, total, unlabelled."""
    rows = []
    for m in models:
        for r in m.rates:
            hit = counts[(counts["model_id"] == m.model_id) & (counts["benchmark"] == r.benchmark)]
            total = int(hit["total"].sum())
            todo = int(hit["unlabelled"].sum())
            rows.append({"model_id": m.model_id, "benchmark": r.benchmark, "sample_queries": r.sample_queries,
                         "sample_s": r.seconds, "queries_per_s": r.queries_per_s, "total_queries": total,
                         "unlabelled_queries": todo, "projected_total_s": r.projected_s(total),
                         "projected_unlabelled_s": r.projected_s(todo)})
    return pd.DataFrame(rows, columns=["model_id", "benchmark", "sample_queries", "sample_s", "queries_per_s",
                                       "total_queries", "unlabelled_queries", "projected_total_s",
                                       "projected_unlabelled_s"])
