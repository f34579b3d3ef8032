"""Label tasks: export queries, plan runs, label one (model, shard), write label chunks, close runs.

Durability: a (model, shard) task stages every chunk of labels as a Parquet file (written atomically)
the moment lm-eval returns it, then — under the thread runner, where the task shares the flow's process —
writes it into the warehouse in one transaction (labels + the run's done count) and removes the file.
Under Dask or Ray the workers only stage (DuckDB admits one writing process) and the flow writes the
staged chunks after the fan-out; a flow that starts writes whatever a killed run left staged first.
Writing a chunk replaces any label of the same (source, query, model), so a chunk written twice
(killed between commit and file removal) leaves exactly one row per query.

No Prefect result caching here (NO_CACHE): resumption is the warehouse's job — a run id is
deterministic (cr2.labels.lmeval.runs), and a task labels only the queries its run has not written yet.
Retries sit on the (model, shard) task, the one that does I/O with a model.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pandas as pd
from prefect import task
from prefect.cache_policies import NO_CACHE

from cr2.config import Config
from cr2.core.errors import DataValidationError, did_you_mean
from cr2.labels.lmeval.backends import backend_plan, is_local, local_revision
from cr2.labels.lmeval.docs import mbpp_fewshot_docs
from cr2.labels.lmeval.estimate import ModelRates, build_lm, measure_rates, resolve_shape
from cr2.labels.lmeval.runner import ChunkResult, Progress, run_shard
from cr2.labels.lmeval.runs import BenchmarkJob, ShardJob, run_id, run_key, select_queries, shard_of
from cr2.config.lmeval import LabelingSpec
from cr2.labels.lmeval.taskdefs import task_config_hash
from cr2.core.files import atomic_write
from cr2.config.shipped import DATA_DIR
from cr2_tasks.store import tool_dir
from cr2_warehouse.db import Warehouse
from cr2_warehouse.labels import (LABEL_COLUMNS, done_query_ids, finish_label_run, label_runs, label_task_queries,
                              start_label_run, write_label_chunk)

QUERY_COLUMNS = ["query_id", "benchmark", "subset", "question", "choices", "target", "tests", "test_setup"]

# one writer per process: thread-runner tasks share the flow's DuckDB instance
_WRITE_LOCK = threading.RLock()


@contextlib.contextmanager
def _writer(home: str | Path) -> Iterator[Warehouse]:
    """The warehouse at `home`, opened under this process's write lock.

    Task bodies reach the lock only through this function: Dask and Ray pickle a task's function by value,
    with every global it names, and a lock cannot be pickled (a module-level function is pickled by name).
    """
    with _WRITE_LOCK, Warehouse(home) as wh:
        yield wh
_progress_hooks: list[Callable[[Progress], None]] = []


def add_progress_hook(hook: Callable[[Progress], None]) -> None:
    """Call `hook` after every chunk written by a task in this process (the CLI's progress lines)."""
    _progress_hooks.append(hook)


def remove_progress_hook(hook: Callable[[Progress], None]) -> None:
    if hook in _progress_hooks:
        _progress_hooks.remove(hook)


def _emit(event: Progress) -> None:
    print(f"{event.model_id} {event.benchmark} shard {event.shard + 1}/{event.n_shards}: "
          f"{event.done}/{event.total} labelled ({event.chunk_s:.1f} s/chunk)")
    for hook in list(_progress_hooks):
        hook(event)


def lm_eval_version() -> str:
    return metadata.version("lm_eval")


def staging_dir(spec: LabelingSpec, home: str | Path) -> Path:
    return Path(spec.staging_dir).expanduser().resolve() if spec.staging_dir else Path(home).resolve() / "labeling"


def compile_cache(home: str | Path | None, staging: str | Path | None = None) -> Path:
    """Where the hf backend's compiled decode steps are cached (torch inductor): <cache>/torch-compile under the
    home, or beside the staged chunks where a worker has no home; a re-label loads them instead of compiling."""
    if home is not None:
        return tool_dir(home, "torch-compile")
    return Path(staging) / "torch-compile"


def _run_folder(rid: str) -> str:
    return rid.replace(":", "_").replace("/", "-")


def _chunk_dir(staging: Path, rid: str) -> Path:
    return staging / "chunks" / _run_folder(rid)


def samples_dir(staging: str | Path, rid: str) -> Path:
    """Folder of a run's per-sample logs (one JSONL file per chunk)."""
    return Path(staging) / "samples" / _run_folder(rid)


def write_sample_log(staging: Path, rid: str, records: list[dict[str, Any]]) -> Path | None:
    """Write one chunk's sample records to <staging>/samples/<run>/<ids-hash>.jsonl atomically.

    The file is named after the chunk's query ids, so a chunk labelled again after a crash overwrites its
    own log instead of adding a second copy.
    """
    if not records:
        return None
    folder = samples_dir(staging, rid)
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256("\n".join(r["query_id"] for r in records).encode()).hexdigest()[:16]
    path = folder / f"samples-{digest}.jsonl"
    return atomic_write(path, "".join(json.dumps(rec, ensure_ascii=False, default=str) + "\n" for rec in records))


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


# ---------------------------------------------------------------- chunk files and chunk writes
def stage_chunk(staging: Path, source: str, model_id: str, rid: str, rows: pd.DataFrame) -> Path:
    """Write one chunk of label rows to <staging>/chunks/<run>/chunk-<n>.parquet atomically; returns the path."""
    folder = _chunk_dir(staging, rid)
    folder.mkdir(parents=True, exist_ok=True)
    frame = rows.assign(source=source, model_id=model_id, run_id=rid)
    path = folder / f"chunk-{_now():%Y%m%dT%H%M%S%f}-{uuid.uuid4().hex[:6]}.parquet"
    return atomic_write(path, lambda tmp: frame.to_parquet(tmp, index=False))


def staged_ids(staging: Path, rid: str) -> set[str]:
    """Query ids of a run that sit in staged chunk files (not yet written to the warehouse)."""
    folder = _chunk_dir(staging, rid)
    ids: set[str] = set()
    for p in sorted(folder.glob("chunk-*.parquet")):
        ids.update(pd.read_parquet(p, columns=["query_id"])["query_id"].tolist())
    return ids


def write_chunk(wh: Warehouse, rows: pd.DataFrame) -> int:
    """One transaction: replace the labels of the chunk's queries for its (source, model), update the run's done."""
    if rows.empty:
        return 0
    labels = rows[LABEL_COLUMNS].copy()
    labels["output_tokens"] = labels["output_tokens"].astype("Int64")
    with _WRITE_LOCK:
        write_label_chunk(wh, labels)
    return len(labels)


def _ingest_file(wh: Warehouse, path: Path) -> int:
    n = write_chunk(wh, pd.read_parquet(path))
    path.unlink(missing_ok=True)  # after the commit: a crash in between re-writes the same rows, harmlessly
    return n


@task(name="label-ingest-staged", cache_policy=NO_CACHE)
def ingest_staged(home: str, staging: str) -> int:
    """Write every staged chunk into the warehouse (one transaction each); returns the rows written."""
    files = sorted(Path(staging).glob("chunks/*/chunk-*.parquet"))
    if not files:
        return 0
    n = 0
    with _writer(home) as wh:
        for p in files:
            n += _ingest_file(wh, p)
    return n


# ---------------------------------------------------------------- export and plan
def _selection(wh: Warehouse, home: str, benchmarks: list[str], limit: int | None) -> pd.DataFrame:
    """The queries a labeling call covers: the first `limit` per benchmark, round-robin over subsets."""
    df = label_task_queries(wh, benchmarks)
    present = set(df["benchmark"].unique())
    missing = [b for b in benchmarks if b not in present]
    if missing:
        raise DataValidationError(
            f"the warehouse at {home} has no queries of {missing}; run `cr2 ingest` (or enable them in the config's benchmarks)"
        )
    for col in ("choices", "tests"):
        # NULL lists arrive as None, NaN or pd.NA depending on the DuckDB/pandas versions
        df[col] = [list(v) if isinstance(v, (list, tuple, np.ndarray)) else None for v in df[col]]
    return select_queries(df, limit)


@task(name="label-export-queries", cache_policy=NO_CACHE)
def export_queries(home: str, benchmarks: list[str], limit: int | None, staging: str) -> str:
    """Write the selected queries (first `limit` per benchmark, round-robin over subsets) to Parquet; returns its path."""
    with _writer(home) as wh:
        df = _selection(wh, home, benchmarks, limit)
    digest = hashlib.sha256("\n".join(df["query_id"]).encode()).hexdigest()[:12]
    out = Path(staging) / "queries"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"queries-{digest}.parquet"
    return str(atomic_write(path, lambda tmp: df.to_parquet(tmp, index=False)))


SHIPPED_MBPP = DATA_DIR / "benchmarks" / "mbpp.parquet"


def _mbpp_fewshot(config: Config, spec: LabelingSpec) -> list[dict[str, Any]]:
    """The MBPP few-shot examples (task ids 2–4 of MBPP's prompt split by default).

    They are part of the prompt, not of the labelled data: read from the configured MBPP file, or from the
    shipped one when the configured file is a slice without the prompt split.
    """
    from cr2.core.boundary import read_table_file

    ids = spec.template("mbpp").fewshot_task_ids
    if not ids:
        return []
    bench = config.benchmarks.get("mbpp")
    columns = ["query_id", "question", "target", "tests", "test_setup"]
    path = config.benchmark_file("mbpp") if bench is not None else SHIPPED_MBPP
    rows = read_table_file(path, columns=columns)  # the configured benchmark file: bounded like every table file
    have = set(rows["query_id"])
    lacking = any(f"mbpp/{t}" not in have for t in ids)
    if lacking and SHIPPED_MBPP.is_file() and path.resolve() != SHIPPED_MBPP.resolve():
        rows = read_table_file(SHIPPED_MBPP, columns=columns)
    return mbpp_fewshot_docs(rows, ids)


def _run_plans(
    config: Config, models: list[str], benchmarks: list[str], backend: str, spec: LabelingSpec, hashes: dict[str, str]
) -> dict[str, tuple[Any, str, dict[tuple[str, int], str]]]:
    """model id → (backend plan, revision, (benchmark, shard) → run id): the runs a labeling call would use."""
    pool = {m.id: m for m in config.models}
    for m in models:
        if m not in pool:
            raise did_you_mean("model", m, list(pool))
    version = lm_eval_version()
    out: dict[str, tuple[Any, str, dict[tuple[str, int], str]]] = {}
    for mid in models:
        model = pool[mid]
        pretrained = spec.model_paths.get(mid, model.hf_name)
        revision = local_revision(pretrained) if is_local(pretrained) else spec.revisions.get(mid, "main")
        plan = backend_plan(backend, spec, pretrained, revision, model.hf_name, mid)
        rids = {}
        for b in benchmarks:
            key = run_key(spec.source, mid, model.hf_name, revision, plan, hashes[b], version)
            for shard in range(spec.shards):
                rids[(b, shard)] = run_id(spec.source, mid, b, key, shard, spec.shards)
        out[mid] = (plan, revision, rids)
    return out


@task(name="label-plan", cache_policy=NO_CACHE)
def plan_label_runs(
    config: Config,
    home: str,
    queries_path: str,
    models: list[str],
    benchmarks: list[str],
    backend: str,
    spec: LabelingSpec,
) -> list[ShardJob]:
    """One ShardJob per (model, shard), with the queries each run still has to label; marks the runs 'running'."""
    queries = pd.read_parquet(queries_path, columns=["query_id", "benchmark"])
    queries["shard"] = shard_of(queries["query_id"], spec.shards)
    fewshot = {"mbpp": _mbpp_fewshot(config, spec)} if "mbpp" in benchmarks else {}
    hashes = {b: task_config_hash(b, spec.template(b), spec.sandbox, fewshot.get(b)) for b in benchmarks}
    version = lm_eval_version()
    jobs: list[ShardJob] = []
    with _writer(home) as wh:
        for mid, (plan, revision, rids) in _run_plans(config, models, benchmarks, backend, spec, hashes).items():
            for shard in range(spec.shards):
                bjobs = []
                for b in benchmarks:
                    rid = rids[(b, shard)]
                    ids = queries.loc[(queries["benchmark"] == b) & (queries["shard"] == shard), "query_id"].tolist()
                    done = done_query_ids(wh, rid)
                    pending = tuple(q for q in ids if q not in done)
                    bjobs.append(BenchmarkJob(b, rid, hashes[b], pending, len(ids)))
                    start_label_run(wh, rid, source=spec.source, model_id=mid, revision=revision, backend=backend,
                                    backend_args=plan.args_json(), lm_eval_version=version, task_config_hash=hashes[b],
                                    started_at=_now(), done=len(ids) - len(pending), total=len(ids))
                jobs.append(ShardJob(mid, plan, revision, shard, spec.shards, tuple(bjobs), fewshot))
    return jobs


# ---------------------------------------------------------------- the (model, shard) task
def _pin_dask_gpus(gpus_per_worker: int) -> None:
    """Under a local Dask cluster, give worker i the GPUs [i·g, (i+1)·g) (before CUDA is initialised)."""
    if gpus_per_worker <= 0:
        return
    try:
        from distributed import get_worker

        name = get_worker().name
    except (ImportError, ValueError):
        return
    if isinstance(name, int) and "CR2_PINNED_GPUS" not in os.environ:
        gpus = ",".join(str(name * gpus_per_worker + k) for k in range(gpus_per_worker))
        os.environ["CUDA_VISIBLE_DEVICES"] = os.environ["CR2_PINNED_GPUS"] = gpus


@dataclass(frozen=True)
class ShardReport:
    model_id: str
    shard: int
    labelled: dict[str, int]  # run_id → queries labelled by this task


@task(name="label-shard", cache_policy=NO_CACHE, retries=2, retry_delay_seconds=30)
def label_shard(job: ShardJob, queries_path: str, spec: LabelingSpec, staging: str, home: str | None) -> ShardReport:
    """Label one (model, shard): load the model once, run every benchmark's pending queries chunk by chunk.

    `home` set (thread runner): each chunk is also written to the warehouse at once. `home` None (Dask/Ray):
    chunks are only staged; the flow writes them.
    """
    if spec.task_runner.kind == "dask":
        _pin_dask_gpus(spec.task_runner.gpus_per_worker)
    staging_path = Path(staging)
    queries = pd.read_parquet(queries_path)
    queries = queries[queries["query_id"].isin({q for b in job.benchmarks for q in b.pending})]

    def already_done(bj: BenchmarkJob) -> set[str]:
        done = staged_ids(staging_path, bj.run_id)
        if home is not None:
            with _writer(home) as wh:
                done |= done_query_ids(wh, bj.run_id)
        return done

    def sink(bj: BenchmarkJob, result: ChunkResult) -> None:
        if spec.log_samples:
            write_sample_log(staging_path, bj.run_id, result.samples)
        path = stage_chunk(staging_path, spec.source, job.model_id, bj.run_id, result.rows)
        if home is not None:
            with _writer(home) as wh:
                _ingest_file(wh, path)

    labelled = run_shard(
        job, queries, spec, staging_path / "scratch", sink, already_done=already_done, progress=_emit,
        compile_cache_dir=compile_cache(home, staging_path),
    )
    return ShardReport(job.model_id, job.shard, labelled)


# ---------------------------------------------------------------- close the runs
@task(name="label-finish", cache_policy=NO_CACHE)
def finish_label_runs(home: str, queries_path: str, jobs: list[ShardJob], failed: list[tuple[str, int]]) -> pd.DataFrame:
    """Mark each run finished (its selected queries all labelled, task succeeded) or failed; returns the runs' rows.

    `done` is recounted over the run's queries in the selection (`queries_path`), so labels a run wrote for a
    larger `--limit` earlier do not count. The rows carry `benchmark` and `written`, the labels this call
    added (done now − done when planned).
    """
    failed_set = set(failed)
    selected = pd.read_parquet(queries_path, columns=["query_id", "benchmark"])
    rids: list[str] = []
    before: dict[str, int] = {}
    bench: dict[str, str] = {}
    now = _now()
    with _writer(home) as wh:
        for job in jobs:
            ok = (job.model_id, job.shard) not in failed_set
            shard = shard_of(selected["query_id"], job.n_shards) == job.shard
            for bj in job.benchmarks:
                rids.append(bj.run_id)
                before[bj.run_id] = bj.total - len(bj.pending)
                bench[bj.run_id] = bj.benchmark
                ids = selected.loc[shard & (selected["benchmark"] == bj.benchmark), ["query_id"]]
                finish_label_run(wh, bj.run_id, ids, now, ok)
        runs = label_runs(wh, rids)
    runs.insert(3, "benchmark", runs["run_id"].map(bench))
    runs["written"] = [int(d) - before[r] for r, d in zip(runs["run_id"], runs["done"])]
    return runs



# ---------------------------------------------------------------- sizing a run before it starts (cr2 label --estimate)
@task(name="label-estimate-selection", cache_policy=NO_CACHE)
def estimate_selection(
    config: Config, home: str, models: list[str], benchmarks: list[str], backend: str, limit: int | None,
    spec: LabelingSpec,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The queries a `cr2 label` call would cover and, per (model, benchmark), how many there are (`total`) and
    how many its runs have not labelled yet (`unlabelled`); reads the warehouse only."""
    fewshot = {"mbpp": _mbpp_fewshot(config, spec)} if "mbpp" in benchmarks else {}
    hashes = {b: task_config_hash(b, spec.template(b), spec.sandbox, fewshot.get(b)) for b in benchmarks}
    plans = _run_plans(config, models, benchmarks, backend, spec, hashes)
    with Warehouse(home, read_only=True) as wh:
        queries = _selection(wh, home, benchmarks, limit)
        shard = shard_of(queries["query_id"], spec.shards)
        rows = []
        for mid, (_, _, rids) in plans.items():
            for b in benchmarks:
                total = unlabelled = 0
                for s in range(spec.shards):
                    ids = queries.loc[(queries["benchmark"] == b) & (shard == s), "query_id"]
                    done = done_query_ids(wh, rids[(b, s)])
                    total += len(ids)
                    unlabelled += int((~ids.isin(done)).sum())
                rows.append({"model_id": mid, "benchmark": b, "total": total, "unlabelled": unlabelled})
    return queries, pd.DataFrame(rows, columns=["model_id", "benchmark", "total", "unlabelled"])


@task(name="label-estimate-model", cache_policy=NO_CACHE)
def estimate_model_rates(
    config: Config, home: str, model_id: str, queries: pd.DataFrame, benchmarks: list[str], sample: int,
    spec: LabelingSpec, architectures: str | None = None,
) -> ModelRates:
    """Build a random-weight model of `model_id`'s shape and time `sample` queries of every benchmark with it."""
    from cr2.labels.lmeval.architectures import load_architectures

    model = next(m for m in config.models if m.id == model_id)
    shape = resolve_shape(model_id, model.hf_name, spec.model_paths.get(model_id), load_architectures(architectures))
    device = spec.hf.device or _default_device()
    fewshot = {"mbpp": _mbpp_fewshot(config, spec)} if "mbpp" in benchmarks else {}
    picked = select_queries(queries, sample)
    samples = {b: picked[picked["benchmark"] == b] for b in benchmarks}
    t0 = time.perf_counter()
    lm, params = build_lm(shape, spec, device, tool_dir(home, "tokenizers"), compile_cache(home))
    build_s = time.perf_counter() - t0
    work = staging_dir(spec, home) / "scratch" / f"estimate-{uuid.uuid4().hex[:8]}"
    try:
        rates, warmup_s, probe_s = measure_rates(lm, model_id, spec, samples, work, fewshot)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    del lm
    _free_device_memory(device)
    return ModelRates(model_id, shape.source, int(params), device, spec.hf.dtype, build_s, warmup_s, probe_s,
                      tuple(rates), spec.hf.generation)


def _default_device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _free_device_memory(device: str) -> None:
    """Release the estimate model's GPU memory before the next model is built."""
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()
