"""Fits started ahead: a stage's independent fits begin as soon as their inputs exist, while the flow goes on.

`cr2 run` is a chain of stages, but several fits do not depend on the stages before them: the baselines need only
the prepared rows, the ablation gates only those and the teacher. Inside `fits_ahead(config)` a flow may start
them early (tasks.baselines.start_baseline_fits, tasks.ablation.start_ablation_fits): each missing fit is
submitted to one cr2.routers.fitting.FitPool of `fit.workers` processes under its inputs key (tasks/inputs.inputs_key), and the
stage that needs it later takes the running fit by that key (`take`) instead of fitting it itself. A fit
runs at `fit.torch_threads` threads in its own process, so where it runs and when changes no number. A stage
run without a flow around it (or whose fit was not started) fits inline as before. A fit nobody took is
stopped when the block ends; fits write nothing, so nothing is left half-written.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator

_POOL: Any = None  # the FitPool of the enclosing fits_ahead block (None outside one)
_STARTED: dict[str, Any] = {}  # inputs key → the started fit's handle


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


def collect(fit: Callable[..., Any], jobs: dict[str, tuple], keys: dict[str, str], workers: int) -> dict[str, Any]:
    """{name: fit(*jobs[name])}: the fits started ahead under keys[name] are taken, the others run here
    (cr2.routers.fitting.run_fits in `workers` processes); the same results either way."""
    from cr2.routers.fitting import run_fits

    started = {name: take(keys[name]) for name in jobs}
    inline = [name for name in jobs if started[name] is None]
    results = dict(zip(inline, run_fits(fit, [jobs[name] for name in inline], workers), strict=True))
    results.update({name: handle.result() for name, handle in started.items() if handle is not None})
    return results


def active() -> bool:
    """Whether fits can be started ahead now (inside a fits_ahead block)."""
    return _POOL is not None
