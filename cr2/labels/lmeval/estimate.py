"""How long a labeling run will take on this machine: measured rates on a sample, projected onto the warehouse.

For each pool model a random-weight model of its real shape is built (cr2/labels/lmeval/architectures.py) and a
small sample of every benchmark is labelled through the code path of `cr2 label` — `ChunkEvaluator`, i.e.
`lm_eval.simple_evaluate` with cr2's task definitions, loglikelihood for multiple choice and generation up to
the task's `max_gen_toks` for generative benchmarks, in chunks of `chunk_size`, with the spec's batch
settings. Nothing is written to the warehouse.

What is timed, and what is not:
- a **warm-up** call of one query per benchmark comes first, timed apart (`warmup_s`): lm-eval's first call
  builds its task manager and the device's kernels start up, costs a run pays once per model, not per query.
  Its generation is capped at one token (one prefill, no decode step), so it costs about one batch step,
  not a whole generation;
- the **batch-size probes** of `batch_size: auto` (once per length group for the model's lifetime,
  cr2/labels/lmeval/hf_batching.py) are timed apart and reported as a fixed cost, not spread over the queries;
- **compilation**: the static generation path compiles its decode step once per (batch, cache length) on CUDA
  (cr2/labels/lmeval/static_generation.py); the first calls of each shape are timed apart (`compile_s`), a
  once-per-model cost that the inductor cache under the home makes smaller on the next run;
- the rest — every lm-eval call over the sample — gives the benchmark's queries/s, and the projection of
  n queries is n / (queries/s).

Stored GPU rates (configs/labeling_gpu_rates.yaml) are measurements made elsewhere, each with where, when and
how it was made; `stored_projection` projects the selection with them, so `cr2 label --estimate` can say
what a GPU that is not at hand would take, and says which numbers are missing.

Random weights never stop early, so the generative rates are those of generations that all run to
`max_gen_toks`: the projection is a worst case for BBH and MBPP (a trained model usually stops sooner).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from cr2.config.lmeval import LabelingSpec
from cr2.core.errors import ConfigError
from cr2.config.shipped import CONFIG_DIR
from cr2.labels.lmeval.runs import chunks

GPU_RATES_FILE = CONFIG_DIR / "labeling_gpu_rates.yaml"


@dataclass(frozen=True)
class BenchmarkRate:
    """The measured labeling rate of one (model, benchmark) sample."""

    model_id: str
    benchmark: str
    sample_queries: int  # queries labelled in the timed calls
    chunks: int  # lm-eval calls they took
    seconds: float  # wall time of those calls, batch-size probes and compilation excluded, s
    window: tuple[float, float] = (0.0, 0.0)  # epoch seconds when the timed calls started and ended
    warmup_s: float = 0.0  # the benchmark's untimed first call (one query, generation capped at one token), s
    compile_s: float = 0.0  # compiling decode steps during the timed calls (excluded from `seconds`), s
    probe_s: float = 0.0  # batch-size probes during the timed calls (excluded from `seconds`), s
    output_tokens: int = 0  # generated tokens of the labelled answers (labels.output_tokens summed)
    generated_tokens: int = 0  # tokens the static path generated (each row to its own stop); 0 on lm-eval's path
    decode_steps: int = 0  # batched decode steps of the static path
    row_steps: int = 0  # rows × decode steps of the static path (busy and idle rows)
    step_tokens: int = 0  # of those, the row-steps that produced a request's token
    compile_windows: tuple[tuple[float, float], ...] = ()  # epoch seconds of each compilation (GPU idle then)

    @property
    def queries_per_s(self) -> float:
        return self.sample_queries / self.seconds if self.seconds > 0 else float("inf")

    @property
    def tokens_per_s(self) -> float:
        return self.output_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def busy_row_share(self) -> float | None:
        """The share of the static path's batch rows that produced a request's token per decode step: how full it
        kept its batches (None without steps)."""
        return self.step_tokens / self.row_steps if self.row_steps else None

    def projected_s(self, n_queries: int) -> float:
        """Seconds to label `n_queries` more queries of this benchmark at the measured rate."""
        return n_queries / self.queries_per_s if n_queries else 0.0


@dataclass(frozen=True)
class ModelRates:
    """What was measured for one pool model."""

    model_id: str
    shape: str  # where the architecture came from: the architectures file's hf_name or a model folder
    params: int  # parameters of the random-weight model
    device: str
    dtype: str
    build_s: float  # building the random-weight model and its lm-eval wrapper, s
    warmup_s: float  # the untimed first calls, s
    probe_s: float  # batch-size probes during the timed calls, s
    rates: tuple[BenchmarkRate, ...] = field(default_factory=tuple)
    generation: str = "lm-eval"  # the hf generation path measured: static | lm-eval

    @property
    def compile_s(self) -> float:
        return sum(r.compile_s for r in self.rates)


@dataclass(frozen=True)
class ModelShape:
    """How to build one pool model's random-weight stand-in: a transformers config and a tokenizer."""

    model_id: str
    source: str  # hf_name of its architectures entry, or the folder its config.json came from
    config: Any  # transformers PretrainedConfig
    tokenizer: str  # 'qwen3-bpe' or a tokenizer folder


def resolve_shape(model_id: str, hf_name: str, weights: str | None, architectures: dict[str, Any]) -> ModelShape:
    """The shape of a pool model: its weights folder's config.json if it has one, else its entry in the architectures file."""
    from cr2.labels.lmeval.architectures import folder_config

    for candidate in (weights, hf_name):
        if candidate and Path(candidate).expanduser().is_dir():
            folder = str(Path(candidate).expanduser().resolve())
            return ModelShape(model_id, folder, folder_config(folder), folder)
    arch = architectures.get(hf_name)
    if arch is None:
        raise ConfigError(
            f"no architecture for model '{model_id}' (hf_name '{hf_name}'): add the numbers of its config.json to "
            f"configs/architectures.yaml, or give a folder with its config.json and tokenizer "
            f"(--model-path {model_id}=FOLDER); known: {', '.join(sorted(architectures)) or 'none'}"
        )
    return ModelShape(model_id, hf_name, arch.hf_config(), arch.tokenizer)


def build_lm(shape: ModelShape, spec: LabelingSpec, device: str, cache_dir: Path,
             compile_cache_dir: Path | None = None) -> tuple[Any, int]:
    """lm-eval's hf model over a random-weight model of `shape` on `device`; returns (lm, parameter count)."""
    from cr2.labels.lmeval.architectures import load_tokenizer, random_model
    from cr2.labels.lmeval.backends import hf_lm_from_model

    if spec.hf.num_threads and device.startswith("cpu"):
        import torch

        torch.set_num_threads(int(spec.hf.num_threads))
    tokenizer = load_tokenizer(shape.tokenizer, cache_dir)
    model = random_model(shape.config, spec.hf.dtype, device, seed=spec.seed)
    params = sum(p.numel() for p in model.parameters())
    return hf_lm_from_model(model, tokenizer, spec, compile_cache_dir), params


def _probe_s(lm: Any) -> float:
    return float(getattr(lm, "probe_s", 0.0))


def _stats(lm: Any) -> Any:
    return getattr(lm, "generation_stats", None)


@contextlib.contextmanager
def one_step_generation(lm: Any) -> Iterator[None]:
    """Within the block, every generation of `lm` stops after its first token (cr2's hf model; others unchanged)."""
    if not hasattr(lm, "gen_toks_cap"):
        yield
        return
    saved, lm.gen_toks_cap = lm.gen_toks_cap, 1
    try:
        yield
    finally:
        lm.gen_toks_cap = saved


def measure_rates(
    lm: Any,
    model_id: str,
    spec: LabelingSpec,
    samples: dict[str, pd.DataFrame],
    workdir: Path,
    fewshot: dict[str, list[dict[str, Any]]] | None = None,
    on_chunk: Callable[[str, Any], None] | None = None,
) -> tuple[list[BenchmarkRate], float, float]:
    """Label each benchmark's sample (query rows, as `cr2 label` reads them) in chunks; returns
    (rates, warm-up s, probe s). Per benchmark its first query is labelled once first, untimed, with generation
    capped at one token (warm-up); `on_chunk(benchmark, ChunkResult)` sees every timed chunk's labels."""
    from cr2.labels.lmeval.runner import ChunkEvaluator

    fewshot = fewshot or {}
    evaluator = ChunkEvaluator(lm, spec, Path(workdir))
    rates: list[BenchmarkRate] = []
    warmup_total = probe_total = 0.0
    for benchmark, queries in samples.items():
        if not len(queries):
            continue
        t0 = time.perf_counter()
        with one_step_generation(lm):
            evaluator.evaluate(benchmark, queries.head(1), fewshot.get(benchmark))
        warmup_s = time.perf_counter() - t0
        warmup_total += warmup_s
        by_id = queries.set_index("query_id", drop=False)
        ids = by_id.index.tolist()
        parts = chunks(ids, spec.chunk_size)
        probe_before = _probe_s(lm)
        before = _stats(lm)
        output_tokens = 0
        started = time.time()
        t0 = time.perf_counter()
        for part in parts:
            result = evaluator.evaluate(benchmark, by_id.loc[part], fewshot.get(benchmark))
            output_tokens += int(pd.to_numeric(result.rows.get("output_tokens"), errors="coerce").fillna(0).sum()) \
                if "output_tokens" in result.rows else 0
            if on_chunk is not None:
                on_chunk(benchmark, result)
        wall_s = time.perf_counter() - t0
        ended = time.time()
        probe = _probe_s(lm) - probe_before
        probe_total += probe
        after = _stats(lm)
        gen = {"compile_s": 0.0, "generated_tokens": 0, "decode_steps": 0, "row_steps": 0, "step_tokens": 0,
               "windows": ()}
        if before is not None and after is not None:
            gen = {"compile_s": after.compile_s - before.compile_s,
                   "generated_tokens": after.generated_tokens - before.generated_tokens,
                   "decode_steps": after.decode_steps - before.decode_steps,
                   "row_steps": after.row_steps - before.row_steps,
                   "step_tokens": after.step_tokens - before.step_tokens,
                   "windows": tuple(after.compile_windows[len(before.compile_windows):])}
        rates.append(BenchmarkRate(
            model_id, benchmark, len(ids), len(parts), max(wall_s - probe - gen["compile_s"], 1e-9), (started, ended),
            warmup_s=warmup_s, compile_s=gen["compile_s"], probe_s=probe, output_tokens=output_tokens,
            generated_tokens=gen["generated_tokens"], decode_steps=gen["decode_steps"], row_steps=gen["row_steps"],
            step_tokens=gen["step_tokens"],
            compile_windows=gen["windows"]))
    return rates, warmup_total, probe_total


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


# ---------------------------------------------------------------- stored GPU measurements
@dataclass(frozen=True)
class StoredRates:
    """One stored measurement of labeling rates on a GPU (configs/labeling_gpu_rates.yaml)."""

    id: str
    device: str
    generation: str  # the code path measured: lm-eval | static | a path outside cr2, named
    source: str  # who measured it, where, when, with which command
    rates: dict[str, dict[str, float]]  # model id → benchmark → queries/s
    settings: dict[str, Any] = field(default_factory=dict)
    notes: str = ""


def load_stored_rates(path: str | Path | None = None) -> list[StoredRates]:
    """The stored GPU measurements (configs/labeling_gpu_rates.yaml, or `path`)."""
    file = Path(path) if path is not None else GPU_RATES_FILE
    from cr2.core.boundary import load_yaml_file
    from cr2.core.errors import InvalidValueError

    if not file.exists():
        raise ConfigError(f"stored GPU rates {file} not found")
    try:
        data = load_yaml_file(file) or {}  # bounded: a regular file within the YAML budgets, no key twice
    except InvalidValueError as exc:
        raise ConfigError(str(exc)) from None
    out = []
    for i, entry in enumerate(data.get("measurements") or []):
        try:
            rates = {str(m): {str(b): float(v) for b, v in (bs or {}).items()} for m, bs in (entry["rates"] or {}).items()}
            out.append(StoredRates(str(entry["id"]), str(entry["device"]), str(entry["generation"]),
                                   " ".join(str(entry["source"]).split()), rates, dict(entry.get("settings") or {}),
                                   " ".join(str(entry.get("notes") or "").split())))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"{file}: measurement {i}: {exc!r} (needs id, device, generation, source, rates)") from None
    return out


def stored_projection(stored: StoredRates, counts: pd.DataFrame) -> pd.DataFrame:
    """Per (model, benchmark) of `counts` (model_id, benchmark, total, unlabelled): the stored queries/s and the
    projected seconds for the selection; NaN where the measurement has no rate."""
    rows = []
    for r in counts.itertuples(index=False):
        qps = stored.rates.get(r.model_id, {}).get(r.benchmark)
        rows.append({"model_id": r.model_id, "benchmark": r.benchmark, "total_queries": int(r.total),
                     "queries_per_s": qps if qps is not None else float("nan"),
                     "projected_total_s": int(r.total) / qps if qps else (0.0 if not r.total else float("nan"))})
    return pd.DataFrame(rows, columns=["model_id", "benchmark", "total_queries", "queries_per_s", "projected_total_s"])
