"""Run lm-eval over a shard's queries in chunks, against one loaded model, and hand each chunk's labels on.

Per chunk: the queries become lm-eval docs (cr2.labels.lmeval.docs), are written to a Parquet file, and
`lm_eval.simple_evaluate(model=<loaded LM>, tasks=[<cr2 task dict>], log_samples=True, bootstrap_iters=0)`
scores them; the logged samples become label rows (cr2.labels.lmeval.samples), which go to `sink` — the task
layer writes them durably (one warehouse transaction per chunk). The model is loaded once per shard and
passed to every call as an LM object, so a chunk costs only its inference.

`simple_evaluate` also collects an environment report (`pip list`, `nvidia-smi`, … ≈ 3 s) and runs
`git describe` in the working directory on every call; cr2 records its environment in label_runs instead
and skips both per chunk (see `_no_env_report`).

Besides the label rows, every chunk yields lm-eval's per-sample log in a JSON-able form (prompt, the
model's generation or per-choice log-likelihoods, the filtered answer, the score), which the task layer
keeps next to the warehouse as an audit trail of what the model actually said.
"""
from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import pandas as pd

from cr2.labels.lmeval.backends import load_lm, token_counter
from cr2.labels.lmeval.docs import build_docs
from cr2.labels.lmeval.runs import BenchmarkJob, ShardJob, chunks
from cr2.labels.lmeval.samples import sample_records, samples_to_rows
from cr2.config.lmeval import LabelingSpec, output_type
from cr2.labels.lmeval.taskdefs import label_filter, task_config, task_name

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkResult:
    """What one lm-eval call over a chunk of queries produced."""

    rows: pd.DataFrame  # label rows, one per query (cr2.labels.lmeval.samples.ROW_COLUMNS), in chunk order
    samples: list[dict[str, Any]]  # lm-eval's per-sample log, JSON-able (cr2.labels.lmeval.samples.sample_records)


ChunkSink = Callable[[BenchmarkJob, ChunkResult], None]


@dataclass(frozen=True)
class Progress:
    """Where one (model, benchmark, shard) run stands after a chunk."""

    model_id: str
    benchmark: str
    shard: int
    n_shards: int
    run_id: str
    done: int  # queries of the shard labelled so far (this run)
    total: int  # queries of the shard
    chunk_s: float  # wall time of the last chunk, s


_env_lock = threading.Lock()
_env_depth = 0
_env_saved: Any = None


_ENV_PATCHES: dict[str, Callable[..., Any]] = {
    "add_env_info": lambda results: None,  # pip list, nvidia-smi, torch's collect_env: ≈ 3 s per call
    "get_git_commit_hash": lambda: None,  # `git describe` in the CWD (the user's repository, not lm-eval's)
}


@contextlib.contextmanager
def _no_env_report() -> Iterator[None]:
    """Within the block, lm-eval's per-call environment report and git lookup are skipped (re-entrant, thread-safe)."""
    global _env_depth, _env_saved
    import lm_eval.evaluator as ev

    with _env_lock:
        if _env_depth == 0:
            _env_saved = {name: getattr(ev, name) for name in _ENV_PATCHES if hasattr(ev, name)}
            for name in _env_saved:
                setattr(ev, name, _ENV_PATCHES[name])
        _env_depth += 1
    try:
        yield
    finally:
        with _env_lock:
            _env_depth -= 1
            if _env_depth == 0 and _env_saved is not None:
                for name, fn in _env_saved.items():
                    setattr(ev, name, fn)
                _env_saved = None


class ChunkEvaluator:
    """Scores chunks of queries of any benchmark with one loaded lm-eval model."""

    def __init__(self, lm: Any, spec: LabelingSpec, workdir: Path):
        import datasets

        # every chunk is a tiny Parquet "dataset": its per-load progress bars say nothing (process-wide switch)
        datasets.disable_progress_bars()
        self.lm = lm
        self.spec = spec
        self.workdir = Path(workdir)
        self.count_tokens = token_counter(lm)
        self._task_manager = None
        self._bbh_descriptions: dict[str, str] | None = None

    def _tm(self):
        if self._task_manager is None:
            from lm_eval.tasks import TaskManager

            self._task_manager = TaskManager(include_defaults=False)
        return self._task_manager

    def descriptions(self, benchmark: str) -> dict[str, str] | None:
        if benchmark != "bbh" or self.spec.template("bbh").description is not None:
            return None
        if self._bbh_descriptions is None:
            from cr2.labels.lmeval.bbh import descriptions

            self._bbh_descriptions = descriptions()
        return self._bbh_descriptions

    def evaluate(self, benchmark: str, queries: pd.DataFrame, fewshot: list[dict[str, Any]] | None = None) -> ChunkResult:
        """Label rows and the sample log of `queries` (all of one benchmark) — one lm-eval call."""
        import lm_eval

        template = self.spec.template(benchmark)
        docs = build_docs(benchmark, queries, template, self.descriptions(benchmark))
        scratch = self.workdir / f"chunk-{uuid.uuid4().hex[:12]}"
        scratch.mkdir(parents=True)
        try:
            docs_path = scratch / "docs.parquet"
            docs.to_parquet(docs_path, index=False)
            cfg = task_config(benchmark, template, docs_path, scratch / "datasets-cache", self.spec.sandbox, fewshot)
            with _no_env_report():
                result = lm_eval.simple_evaluate(
                    model=self.lm, tasks=[cfg], task_manager=self._tm(), log_samples=True, bootstrap_iters=0,
                    confirm_run_unsafe_code=(benchmark == "mbpp"), random_seed=self.spec.seed,
                    numpy_random_seed=self.spec.seed, torch_random_seed=self.spec.seed,
                    fewshot_random_seed=self.spec.seed,
                )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        samples = (result or {}).get("samples", {}).get(task_name(benchmark), [])
        filter_name = label_filter(benchmark, template)
        generative = output_type(benchmark) == "generate_until"
        rows = samples_to_rows(
            samples, metric=template.metric, filter_name=filter_name, generative=generative,
            expected_ids=docs["query_id"].tolist(), count_tokens=self.count_tokens,
        )
        records = sample_records(samples, metric=template.metric, filter_name=filter_name, generative=generative)
        return ChunkResult(rows, records)


def run_shard(
    job: ShardJob,
    queries: pd.DataFrame,
    spec: LabelingSpec,
    workdir: Path,
    sink: ChunkSink,
    *,
    already_done: Callable[[BenchmarkJob], set[str]] | None = None,
    progress: Callable[[Progress], None] | None = None,
    lm: Any = None,
    device: str | None = None,
    compile_cache_dir: Path | None = None,
) -> dict[str, int]:
    """Label every pending query of `job`, chunk by chunk; returns run_id → queries labelled now.

    `queries` holds the warehouse rows (indexed or not by query_id); `already_done(bj)` names queries of a
    run that were written since the job was planned (a retried task skips them); `lm` reuses a loaded model;
    `compile_cache_dir` keeps the hf backend's compiled decode steps for the next run.
    """
    by_id = queries.set_index("query_id", drop=False) if "query_id" in queries.columns else queries
    todo_jobs = []
    for bj in job.benchmarks:
        done = already_done(bj) if already_done is not None else set()
        todo = [q for q in bj.pending if q not in done]
        # queries labelled before planning are not in `pending`; count each labelled query once
        todo_jobs.append((bj, todo, bj.total - len(todo)))
    labelled: dict[str, int] = {bj.run_id: 0 for bj in job.benchmarks}
    if not any(todo for _, todo, _ in todo_jobs):
        return labelled
    if lm is None:
        lm = load_lm(job.backend, device, compile_cache_dir)
    evaluator = ChunkEvaluator(lm, spec, workdir)
    for bj, todo, done in todo_jobs:
        for ids in chunks(todo, spec.chunk_size):
            t0 = time.monotonic()
            result = evaluator.evaluate(bj.benchmark, by_id.loc[ids], job.fewshot.get(bj.benchmark))
            sink(bj, result)
            done += len(result.rows)
            labelled[bj.run_id] += len(result.rows)
            event = Progress(job.model_id, bj.benchmark, job.shard, job.n_shards, bj.run_id, done, bj.total,
                             time.monotonic() - t0)
            log.info("%s %s shard %d/%d: %d/%d labelled", job.model_id, bj.benchmark, job.shard, job.n_shards, done, bj.total)
            if progress is not None:
                progress(event)
    return labelled
