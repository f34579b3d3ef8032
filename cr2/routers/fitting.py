"""Fits that do not depend on the machine: a fixed thread count per fit, independent fits in parallel processes.

A fit's numbers depend on torch's intra-op thread count (reductions split differently), so every fit — and the
inference that feeds one, e.g. the teacher's p on train for the gate — runs at `fit.torch_threads`, whatever the
number of cores. Independent fits (the baselines, the ablation gates) then run in `fit_workers` processes at
once: each process runs its fit at the same fixed thread count, so the parallel fits equal the serial ones
bit for bit. Processes are spawned (never forked: the caller may hold threads and open files), and a fit's
result travels back pickled.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. under taskset or a container's cpuset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


# Below this many training rows, independent fits stay in the caller's process: a spawned process first imports
# torch and cr2 (≈ 2 s of CPU on a 2-core machine), more than such fits take together (a 300-row slice's baselines
# fit in well under a second). Where a fit runs never changes its numbers (fixed threads per fit).
PARALLEL_MIN_ROWS = 2_000


def fit_workers(torch_threads: int, workers: int | None = None, rows: int | None = None) -> int:
    """How many fits run at once: `workers` when set, else the available cores ÷ `torch_threads` (at least 1) —
    and 1 (in this process) for fits on fewer than PARALLEL_MIN_ROWS training `rows`, when given."""
    if workers is not None:
        return max(1, int(workers))
    if rows is not None and rows < PARALLEL_MIN_ROWS:
        return 1
    return max(1, available_cores() // max(1, int(torch_threads)))


def run_fits(fit: Callable[..., Any], jobs: Sequence[tuple], workers: int) -> list[Any]:
    """[fit(*job) for job in jobs], in order; with workers > 1 and several jobs, in that many spawned processes.

    `fit` must be a module-level function and the jobs' arguments and results picklable."""
    if workers <= 1 or len(jobs) <= 1:
        return [fit(*job) for job in jobs]
    pool = FitPool(min(workers, len(jobs)))
    try:
        pending = [pool.submit(fit, job) for job in jobs]
        return [p.result() for p in pending]
    finally:
        pool.close()


class FitPool:
    """`workers` spawned processes that run fits submitted at any time, each result collected when needed.

    What lets fits that do not depend on each other start as soon as their inputs exist (e.g. while the caller
    goes on with other work). A fit returns its result pickled and writes nothing, so `close()` may stop
    fits still running without leaving anything half-written. A fit whose process dies, or whose arguments or
    result cannot travel, raises from .result() — never a silent wait. Processes start with the first submit."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, int(workers))
        self._pool: Any = None

    def submit(self, fit: Callable[..., Any], job: tuple) -> Any:
        """Start fit(*job) (queued while every process is busy); returns its Future, whose .result() gives the
        result (or raises the fit's error)."""
        if self._pool is None:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        return self._pool.submit(fit, *job)

    def close(self) -> None:
        """Stop every process, queued and running fits included."""
        if self._pool is not None:
            pool, self._pool = self._pool, None
            # the executor has no public way to stop a running fit before Python 3.14 (terminate_workers):
            # its processes are stopped directly, which is safe because a fit writes nothing
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
            pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- the fits that run as jobs (module level: picklable)
def fit_router(name: str, kwargs: dict, catalogues: Sequence[str], train: Any, dev: Any, out_dir: str
               ) -> tuple[Any, str, str, float]:
    """Fit catalogued router `name` (constructor `kwargs`) on train/dev and save it under `out_dir`; returns
    (router, fingerprint, path, fit seconds). `catalogues`: router catalogues besides the packaged one."""
    import time
    from pathlib import Path

    from cr2.routers import get_router, use_catalogues

    use_catalogues([Path(c) for c in catalogues])
    router = get_router(name, **kwargs)
    t0 = time.perf_counter()
    router.fit(train, dev)
    fit_s = time.perf_counter() - t0
    fp = router.fingerprint()
    path = Path(out_dir) / f"router-{name}-{fp}.npz"
    router.save(path)
    return router, fp, str(path), fit_s


def fit_gate_variant(params: dict, teacher_spec: Any, gate_spec: Any, train: Any, dev: Any, teacher: Any,
                     dropout_cache: Any = None) -> tuple[Any, float]:
    """A CR² router (`params`, specs) whose gate is distilled from the frozen `teacher`; returns (router, fit s).
    dropout_cache: the store the gate fits' shared dropout masks are kept in (cr2.method.gate.fit_gate)."""
    import time

    from cr2.routers.cr2_router import CR2Router

    router = CR2Router(teacher_spec, gate_spec, **params)
    t0 = time.perf_counter()
    router.fit(train, dev, teacher=teacher, dropout_cache=dropout_cache)
    return router, time.perf_counter() - t0
