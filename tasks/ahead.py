"""Fits started ahead: a stage's independent fits begin as soon as their inputs exist, while the flow goes on.

`cr2 run` is a chain of stages, but several fits do not depend on the stages before them: the baselines need only
the prepared rows, the ablation gates only those and the frozen teacher. Inside `fits_ahead(workers)` a flow may
start them early (cr2_tasks.baselines.start_baseline_fits; cr2_tasks.ablation.start_ablation_fits, registered with `when`
and run when the train stage `announce`s its teacher, before the gate's fit): each missing fit is submitted to one
cr2.routers.fitting.FitPool under its artefact key (cr2_tasks.common.Artefact.key), and the stage that needs it later
takes the running fit by that key (`collect`) instead of fitting it itself. Other independent jobs of a stage (the
certified routers' rows) go to the same processes (`fit_all`). A stage that would only wait takes back the jobs no
process has begun and runs them itself, so the flow's process and the pool's share the work to the end. A fit runs
at `fit.torch_threads` threads wherever it runs, so where and when changes no number. A stage run without a flow
around it fits inline as before. A fit nobody took is stopped when the block ends; fits write nothing, so nothing
is left half-written.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

_POOL: Any = None  # the FitPool of the enclosing fits_ahead block (None outside one)
_STARTED: dict[str, Any] = {}  # inputs key → the started fit's handle
_WAITING: dict[str, list[Callable[[Any], Any]]] = {}  # event → callbacks to run when a stage announces it


@contextlib.contextmanager
def fits_ahead(workers: int) -> Iterator[None]:
    """A block in which stages' fits may be started ahead, in `workers` processes; stops the leftovers at exit."""
    global _POOL
    from cr2.routers.fitting import FitPool

    if _POOL is not None:  # nested: the outer block owns the pool
        yield
        return
    _POOL = FitPool(workers)
    try:
        yield
    finally:
        pool, _POOL = _POOL, None
        _STARTED.clear()
        _WAITING.clear()
        pool.close()


def start(key: str, fit: Callable[..., Any], job: tuple) -> bool:
    """Start fit(*job) under `key` inside a fits_ahead block (once per key); False outside one."""
    if _POOL is None:
        return False
    if key not in _STARTED:
        _STARTED[key] = _POOL.submit(fit, job)
    return True


def take(key: str) -> Any | None:
    """The Future of the fit started under `key` (.result() waits for it), or None: fit it yourself."""
    return _STARTED.pop(key, None)


def when(event: str, callback: Callable[[Any], Any]) -> None:
    """Inside a fits_ahead block: call callback(value) when a stage announces `event` (e.g. "teacher": the fits that
    need only the frozen teacher start as soon as it exists, before the gate's fit)."""
    if _POOL is not None:
        _WAITING.setdefault(event, []).append(callback)


def pending(event: str) -> bool:
    """Whether callbacks wait for `event` (no stage has announced it yet)."""
    return bool(_WAITING.get(event))


def announce(event: str, value: Any) -> None:
    """A stage has `value` for `event`: run the callbacks registered for it (once; nothing outside a block)."""
    for callback in _WAITING.pop(event, []):
        callback(value)


def collect(fit: Callable[..., Any], jobs: dict[str, tuple], keys: dict[str, str], workers: int) -> dict[str, Any]:
    """{name: fit(*jobs[name])}: the fits started ahead under keys[name] are taken, the others are submitted (inside
    a block) or run here (cr2.routers.fitting.run_fits in `workers` processes); the same results either way."""
    names = list(jobs)
    started = [take(keys[name]) for name in names]
    return dict(zip(names, fit_all(fit, [jobs[name] for name in names], workers, started), strict=True))


def here(workers: int) -> bool:
    """Whether a stage's fits stay in its own process: one fit at a time (cr2_tasks.inputs.fit_workers: `fit.workers`
    = 1, or fits too small for a process's start to pay) — then nothing is started ahead or submitted to the pool."""
    return workers <= 1


def fit_all(fit: Callable[..., Any], jobs: Sequence[tuple], workers: int,
            started: Sequence[Any] | None = None) -> list[Any]:
    """[fit(*job) for job in jobs], in order: inside a block on its processes and this one (`started`: the handles
    of jobs started ahead, None for the others), else cr2.routers.fitting.run_fits in `workers` processes (outside
    a block nothing is started ahead; with one worker and nothing started ahead (`here`), in this process)."""
    if _POOL is None or (here(workers) and not any(h is not None for h in started or ())):
        from cr2.routers.fitting import run_fits

        return run_fits(fit, jobs, workers)
    handles = [_POOL.submit(fit, job) if handle is None else handle
               for job, handle in zip(jobs, started or [None] * len(jobs), strict=True)]
    return _finish(fit, jobs, handles)


def _finish(fit: Callable[..., Any], jobs: Sequence[tuple], handles: Sequence[Any]) -> list[Any]:
    """The results of submitted fits. The caller would only wait, so it takes back the fits no process has begun,
    from the last one down (the processes take them from the first up), and runs them itself; a fit gives the same
    result wherever it runs (fixed threads per fit)."""
    results: list[Any] = [None] * len(jobs)
    mine = [False] * len(jobs)
    for i in reversed(range(len(jobs))):
        if handles[i].cancel():  # not begun by any process: it never will be
            results[i], mine[i] = fit(*jobs[i]), True
    return [r if m else h.result() for r, m, h in zip(results, mine, handles)]


def active() -> bool:
    """Whether fits can be started ahead now (inside a fits_ahead block)."""
    return _POOL is not None
