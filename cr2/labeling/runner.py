"""Run lm-eval over a shard's queries in chunks, against one loaded model, and hand each chunk's labels on.

Per chunk: the queries become lm-eval docs (cr2.labeling.docs), are written to a Parquet file, and
`lm_eval.simple_evaluate(model=<loaded LM>, tasks=[<cr2 task dict>], log_samples=True, bootstrap_iters=0)`
scores them; the logged samples become label rows (cr2.labeling.samples), which go to `sink` — the task
layer writes them durably (one warehouse transaction per chunk). The model is loaded once per shard and
passed to every call as an LM object, so a chunk costs only its inference.

`simple_evaluate` also collects an environment report (`pip list`, `nvidia-smi`, … ≈ 3 s) on every call;
cr2 records its environment in label_runs instead and skips that report per chunk (see `_no_env_report`).
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

from cr2.labeling.backends import load_lm, token_counter
from cr2.labeling.docs import build_docs
from cr2.labeling.runs import BenchmarkJob, ShardJob, chunks
from cr2.labeling.samples import samples_to_rows
from cr2.labeling.spec import OUTPUT_TYPES, LabelingSpec
from cr2.labeling.taskdefs import label_filter, task_config, task_name

log = logging.getLogger(__name__)

ChunkSink = Callable[[BenchmarkJob, pd.DataFrame], None]


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


@contextlib.contextmanager
def _no_env_report() -> Iterator[None]:
    """Within the block, lm-eval's per-call environment report is skipped (re-entrant, thread-safe)."""
    global _env_depth, _env_saved
    import lm_eval.evaluator as ev

    with _env_lock:
        if _env_depth == 0 and hasattr(ev, "add_env_info"):
            _env_saved = ev.add_env_info
            ev.add_env_info = lambda results: None
        _env_depth += 1
    try:
        yield
    finally:
        with _env_lock:
            _env_depth -= 1
            if _env_depth == 0 and _env_saved is not None:
                ev.add_env_info = _env_saved
                _env_saved = None


class ChunkEvaluator:
    """Scores chunks of queries of any benchmark with one loaded lm-eval model."""

    def __init__(self, lm: Any, spec: LabelingSpec, workdir: Path):
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
            from cr2.labeling.bbh import descriptions

            self._bbh_descriptions = descriptions()
        return self._bbh_descriptions

    def evaluate(self, benchmark: str, queries: pd.DataFrame, fewshot: list[dict[str, Any]] | None = None) -> pd.DataFrame:
        """Label rows of `queries` (all of one benchmark) — one lm-eval call."""
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
        return samples_to_rows(
            samples, metric=template.metric, filter_name=label_filter(benchmark, template),
            generative=OUTPUT_TYPES[benchmark] == "generate_until", expected_ids=docs["query_id"].tolist(),
            count_tokens=self.count_tokens,
        )


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
) -> dict[str, int]:
    """Label every pending query of `job`, chunk by chunk; returns run_id → queries labelled now.

    `queries` holds the warehouse rows (indexed or not by query_id); `already_done(bj)` names queries of a
    run that were written since the job was planned (a retried task skips them); `lm` reuses a loaded model.
    """
    by_id = queries.set_index("query_id", drop=False) if "query_id" in queries.columns else queries
    todo_jobs = []
    for bj in job.benchmarks:
        done = already_done(bj) if already_done is not None else set()
        todo_jobs.append((bj, [q for q in bj.pending if q not in done], bj.total - len(bj.pending) + len(done)))
    labelled: dict[str, int] = {bj.run_id: 0 for bj in job.benchmarks}
    if not any(todo for _, todo, _ in todo_jobs):
        return labelled
    if lm is None:
        lm = load_lm(job.backend, device)
    evaluator = ChunkEvaluator(lm, spec, workdir)
    for bj, todo, done in todo_jobs:
        for ids in chunks(todo, spec.chunk_size):
            t0 = time.monotonic()
            rows = evaluator.evaluate(bj.benchmark, by_id.loc[ids], job.fewshot.get(bj.benchmark))
            sink(bj, rows)
            done += len(rows)
            labelled[bj.run_id] += len(rows)
            event = Progress(job.model_id, bj.benchmark, job.shard, job.n_shards, bj.run_id, done, bj.total,
                             time.monotonic() - t0)
            log.info("%s %s shard %d/%d: %d/%d labelled", job.model_id, bj.benchmark, job.shard, job.n_shards, done, bj.total)
            if progress is not None:
                progress(event)
    return labelled
