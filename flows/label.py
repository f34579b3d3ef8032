"""Label: real per-query correctness y_m(x) from lm-evaluation-harness, for any model pool.

For every model of the pool and every benchmark, lm-eval runs cr2's own task definitions over the
warehouse's queries (MMLU and GPQA as zero-shot multiple choice, BBH zero-shot with lm-eval's answer
extraction, MBPP 3-shot with the tests run in cr2's sandbox), logs every sample, and each sample becomes a
row of `labels` (source 'lm-eval', query_id, model_id, correct, output_tokens, run_id). Each
(model, benchmark, shard) is a run in `label_runs`, with its backend arguments, lm-eval version, task
config hash, times, status and done/total.

1. write what a killed run left staged,   2. export the queries to Parquet,
3. plan: one job per (model, shard), the queries each run still lacks,
4. fan out: one `label-shard` task per job on the configured task runner (threads, Dask, Ray),
5. write the staged chunks and close the runs.

Killed and started again, the flow continues where it stopped: run ids are deterministic and every chunk
is committed on its own. `run_labeling` is the plain-Python entry the CLI (`cr2 label`) calls.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd
from prefect import flow
from pydantic import ValidationError

from cr2.config import dataset_defs
from cr2.config import Config
from cr2.core.errors import ConfigError, did_you_mean
from cr2.labels.lmeval.runner import Progress
from cr2.labels.lmeval.runs import LabelingError, ShardJob
from cr2.config.lmeval import BACKENDS, LabelingSpec, TaskRunnerSpec, labeling_spec
from cr2.labels.lmeval.estimate import ModelRates, projection_table
from cr2_tasks.label import (
    add_progress_hook,
    estimate_model_rates,
    estimate_selection,
    export_queries,
    finish_label_runs,
    ingest_staged,
    label_shard,
    plan_label_runs,
    remove_progress_hook,
    staging_dir,
)
from cr2_warehouse.db import default_home

RUNNERS = ("threads", "dask", "ray")


def build_task_runner(runner: TaskRunnerSpec) -> Any:
    """The Prefect task runner of `runner.kind` (prefect-dask / prefect-ray are imported only when asked for)."""
    if runner.kind == "threads":
        from prefect.task_runners import ThreadPoolTaskRunner

        return ThreadPoolTaskRunner(max_workers=runner.max_workers)
    if runner.kind == "dask":
        try:
            from prefect_dask import DaskTaskRunner
        except ImportError:
            raise ConfigError(
                "labeling.task_runner.kind is 'dask' but prefect-dask is not installed; pip install -e '.[dask]'"
            ) from None
        if runner.dask_address:
            return DaskTaskRunner(address=runner.dask_address)
        n_workers = runner.dask_n_workers
        if n_workers is None:
            n_workers = 1
            if runner.gpus_per_worker:
                import torch

                n_workers = max(1, torch.cuda.device_count() // runner.gpus_per_worker)
        return DaskTaskRunner(
            cluster_class="distributed.LocalCluster",
            cluster_kwargs={"n_workers": n_workers, "threads_per_worker": runner.dask_threads_per_worker,
                            "processes": runner.dask_processes, "dashboard_address": None},
        )
    if runner.kind == "ray":
        try:
            from prefect_ray import RayTaskRunner
        except ImportError:
            raise ConfigError(
                "labeling.task_runner.kind is 'ray' but prefect-ray is not installed; pip install -e '.[ray]'"
            ) from None
        return RayTaskRunner(address=runner.ray_address) if runner.ray_address else RayTaskRunner()
    raise did_you_mean("task runner", runner.kind, list(RUNNERS))


def _submit(job: ShardJob, queries_path: str, spec: LabelingSpec, staging: str, home: str | None) -> Any:
    shard_task = label_shard.with_options(retries=spec.retries, retry_delay_seconds=spec.retry_delay_s)
    if spec.task_runner.kind == "ray" and spec.task_runner.gpus_per_worker:
        from prefect_ray.context import remote_options

        with remote_options(num_gpus=spec.task_runner.gpus_per_worker):
            return shard_task.submit(job, queries_path, spec, staging, home)
    return shard_task.submit(job, queries_path, spec, staging, home)


@flow(name="cr2-label", log_prints=True, validate_parameters=False)
def label_flow(
    config: Config,
    home: str,
    models: list[str],
    benchmarks: list[str],
    backend: str,
    limit: int | None,
    spec: LabelingSpec,
) -> list[dict[str, Any]]:
    """Label `models` × `benchmarks` into the warehouse at `home`; returns the label_runs rows it touched."""
    staging = str(staging_dir(spec, home))
    ingest_staged(home, staging)
    queries_path = export_queries(home, benchmarks, limit, staging)
    jobs = plan_label_runs(config, home, queries_path, models, benchmarks, backend, spec)
    write_through = home if spec.task_runner.kind == "threads" else None
    futures = {(j.model_id, j.shard): _submit(j, queries_path, spec, staging, write_through) for j in jobs if j.n_pending}
    failed: list[tuple[str, int]] = []
    errors: list[str] = []
    for key, future in futures.items():
        future.wait()
        if not future.state.is_completed():
            failed.append(key)
            errors.append(f"{key[0]} shard {key[1]}: {future.state.message}")
    ingest_staged(home, staging)
    runs = finish_label_runs(home, queries_path, jobs, failed)
    if failed:
        raise LabelingError(
            f"{len(failed)} labeling task(s) failed after {spec.retries} retries: {'; '.join(errors)}. "
            "Labels written so far are kept; run the same `cr2 label` command again to continue."
        )
    Path(queries_path).unlink(missing_ok=True)
    return runs.astype(object).where(runs.notna(), None).to_dict("records")


@dataclass(frozen=True)
class LabelingReport:
    """What a labeling call did."""

    runs: pd.DataFrame  # label_runs rows of the runs it touched
    wall_s: float  # wall time of the whole call, s

    @property
    def finished(self) -> bool:
        return bool((self.runs["status"] == "finished").all())


def _selection(config: Config, spec: LabelingSpec, overrides: dict[str, Any], models: Sequence[str] | None,
               benchmarks: Sequence[str] | None) -> tuple[LabelingSpec, list[str], list[str]]:
    """(the labeling settings with `overrides`, the models, the benchmarks) of a labeling request, each checked:
    a bad setting, an unknown model or benchmark is a ConfigError naming it."""
    try:
        spec = spec.with_overrides(**overrides)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid labeling settings: {problems}") from None
    model_ids = list(models) if models else config.model_ids
    for m in model_ids:
        if m not in config.model_ids:
            raise did_you_mean("model", m, config.model_ids)
    bench = list(benchmarks) if benchmarks else config.enabled_benchmarks
    for b in bench:
        if b not in config.benchmarks and b not in dataset_defs.available():
            raise did_you_mean("benchmark", b, sorted(set(config.benchmarks) | set(dataset_defs.available())))
    return spec, model_ids, bench


def run_labeling(
    config: Config,
    warehouse_home: str | Path | None = None,
    models: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    backend: str | None = None,
    limit: int | None = None,
    *,
    spec: LabelingSpec | None = None,
    shards: int | None = None,
    chunk_size: int | None = None,
    task_runner: str | None = None,
    progress: Callable[[Progress], None] | None = None,
) -> LabelingReport:
    """Label `models` (default: the pool) on `benchmarks` (default: the enabled ones) with `backend`.

    `spec` defaults to the config's `labeling` section (or LabelingSpec()); `backend`, `shards`,
    `chunk_size` and `task_runner` override it. `limit` labels the first N queries of each benchmark
    (round-robin over its subsets). `progress` is called after every chunk written in this process.
    Raises LabelingError if a (model, shard) task failed after its retries (what was written stays).
    """
    spec = spec or labeling_spec(config)
    if backend is not None and backend not in BACKENDS:
        raise did_you_mean("labeling backend", backend, list(BACKENDS))
    if task_runner is not None and task_runner not in RUNNERS:
        raise did_you_mean("task runner", task_runner, list(RUNNERS))
    overrides: dict[str, Any] = {"backend": backend, "shards": shards, "chunk_size": chunk_size}
    if task_runner is not None:
        overrides["task_runner"] = {**spec.task_runner.model_dump(), "kind": task_runner}
    spec, model_ids, bench = _selection(config, spec, overrides, models, benchmarks)
    if limit is not None and limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {limit})")
    home = Path(warehouse_home).expanduser().resolve() if warehouse_home is not None else default_home()
    flow_fn = label_flow.with_options(task_runner=build_task_runner(spec.task_runner),
                                      flow_run_name=f"label-{spec.backend}-{'-'.join(model_ids)}")
    t0 = time.monotonic()
    if progress is not None:
        add_progress_hook(progress)
    try:
        rows = flow_fn(config, str(home), model_ids, bench, spec.backend, limit, spec)
    finally:
        if progress is not None:
            remove_progress_hook(progress)
    return LabelingReport(runs=pd.DataFrame(rows), wall_s=time.monotonic() - t0)


# ---------------------------------------------------------------- cr2 label --estimate
@flow(name="cr2-label-estimate", log_prints=True, validate_parameters=False)
def label_estimate_flow(
    config: Config,
    home: str,
    models: list[str],
    benchmarks: list[str],
    backend: str,
    limit: int | None,
    spec: LabelingSpec,
    sample: int,
    architectures: str | None = None,
) -> tuple[list[ModelRates], pd.DataFrame]:
    """Time `sample` queries of every benchmark on a random-weight model of each pool model's shape; returns the
    measured rates and the (model, benchmark) counts of the selection (total, unlabelled)."""
    queries, counts = estimate_selection(config, home, models, benchmarks, backend, limit, spec)
    rates = [estimate_model_rates(config, home, m, queries, benchmarks, sample, spec, architectures) for m in models]
    return rates, counts


@dataclass(frozen=True)
class LabelingEstimate:
    """What `cr2 label --estimate` measured and projects."""

    models: list[ModelRates]
    table: pd.DataFrame  # per (model, benchmark): queries/s, projected seconds for the selection and the unlabelled
    wall_s: float  # wall time of the estimate itself, s
    counts: pd.DataFrame | None = None  # per (model, benchmark): queries of the selection (total, unlabelled)


def estimate_labeling(
    config: Config,
    warehouse_home: str | Path | None = None,
    models: Sequence[str] | None = None,
    benchmarks: Sequence[str] | None = None,
    backend: str | None = None,
    limit: int | None = None,
    *,
    spec: LabelingSpec | None = None,
    sample: int = 32,
    chunk_size: int | None = None,
    architectures: str | Path | None = None,
    measure: bool = True,
) -> LabelingEstimate:
    """How long `cr2 label` with the same arguments would take here (cr2/labels/lmeval/estimate.py); writes nothing.
    `measure=False` times nothing: only the selection's counts (for projections from stored GPU rates)."""
    spec = spec or labeling_spec(config)
    backend = backend or spec.backend
    if backend != "hf":
        raise ConfigError(
            f"--estimate measures the hf backend (random-weight models built in this process); backend '{backend}' "
            "is not measured: estimate with --backend hf, or label with --limit and read label_runs (docs/labeling.md §9)"
        )
    if sample < 1:
        raise ConfigError(f"--sample must be at least 1 (got {sample})")
    spec, model_ids, bench = _selection(config, spec, {"backend": backend, "chunk_size": chunk_size}, models,
                                        benchmarks)
    home = Path(warehouse_home).expanduser().resolve() if warehouse_home is not None else default_home()
    t0 = time.monotonic()
    if not measure:
        _, counts = estimate_selection.fn(config, str(home), model_ids, bench, backend, limit, spec)
        return LabelingEstimate([], projection_table([], counts), time.monotonic() - t0, counts)
    rates, counts = label_estimate_flow(config, str(home), model_ids, bench, backend, limit, spec, sample,
                                        str(architectures) if architectures is not None else None)
    return LabelingEstimate(rates, projection_table(rates, counts), time.monotonic() - t0, counts)
