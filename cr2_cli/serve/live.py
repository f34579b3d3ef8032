"""The live router of `cr2 serve`: a newer threshold table (a re-calibration after a channel change, a new run)
is picked up without a restart and without dropping a request.

A watcher polls the version file that every committed threshold write leaves beside the warehouse
(cr2_warehouse.repository.THRESHOLDS_VERSION_FILE: a stat and a few bytes, no database lock) every
`serving.reload_interval_s`. When it names another version, the new deployment is read and its router built in
a worker thread — sharing the encoder and tokenizer, so only the teacher, gate and table are loaded — and then
swapped in with one reference assignment. A request takes the reference once, when its decision starts, so a
request in flight finishes on the table it started with, and every answer says which version decided it
(`thresholds_version` in the body, the X-CR2-Thresholds-Version header). A deployment that fails to load is
logged once and the server keeps deciding with the table it has; so is a version file naming a version the warehouse
does not hold (it is not asked for again until the file names another one), and a version file that cannot be read
(not a regular file, too large: read bounded) is logged once per problem, not at every poll.

A certified router (`cr2 serve --router knn --rule crc-avoidable`) is not swapped: its table is read once, when the
server starts. The version file announces CR²'s tables only (a `cr2 recalibrate` re-calibrates CR²), and a certified
table changes only with a new `cr2 run`, which also refits the router it is bound to; restart the server to serve it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

log = logging.getLogger("cr2_cli.serve")


class LiveRouter:
    """Holds the router a server decides with; `current` is swapped atomically by `check`."""

    def __init__(self, router: Any, newest_version: Callable[[], int | None] | None = None,
                 load: Callable[[Any], Any] | None = None, metrics: Any = None):
        """`newest_version()`: the newest version on record (None: unknown); `load(current)`: the router of the
        newest deployment. Without them the router never changes (a stub router in tests, `reload_interval_s: 0`)."""
        self.current = router
        self.newest_version, self.load, self.metrics = newest_version, load, metrics
        self._failed: int | None = None  # a version that failed to load: not retried until another one appears
        self._absent: int | None = None  # a version the file names but the warehouse does not hold: not asked again
        self._set_gauge()

    @property
    def version(self) -> int | None:
        return getattr(self.current, "version", None)

    def attach_metrics(self, metrics: Any) -> None:
        """Report the version deciding now and every swap to `metrics` (the server's ServeMetrics)."""
        self.metrics = metrics
        self._set_gauge()

    def _set_gauge(self) -> None:
        if self.metrics is not None and self.version is not None:
            self.metrics.thresholds_version.set(self.version)

    def check(self) -> bool:
        """Swap to the newest deployment when the version file names another one; True when swapped."""
        if self.newest_version is None or self.load is None:
            return False
        newest = self.newest_version()
        if newest is None or newest == self.version or newest in (self._failed, self._absent):
            return False
        t0 = time.perf_counter()
        try:
            new = self.load(self.current)
        except Exception as exc:  # noqa: BLE001 - a bad deployment must not take the serving one down
            self._failed = newest
            if self.metrics is not None:
                self.metrics.reloads.labels(outcome="failed").inc()
            log.warning("thresholds version %s could not be loaded (%s: %s); still serving version %s", newest,
                        type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "", self.version)
            return False
        loaded = getattr(new, "version", None)
        if loaded != newest:  # the file names a version the warehouse does not hold (yet a newer one may be there)
            self._absent = newest
            if self.metrics is not None:
                self.metrics.reloads.labels(outcome="absent").inc()
            log.warning("the version file names thresholds version %s, which the warehouse does not hold (its newest "
                        "is %s); not asked for again until the file names another version", newest, loaded)
            if new is self.current or loaded == self.version:
                return False
        old, self.current, self._failed = self.version, new, None
        self._set_gauge()
        if self.metrics is not None:
            self.metrics.reloads.labels(outcome="swapped").inc()
        log.warning("thresholds version %s → %s, swapped in %.2f s without a restart", old, self.version,
                    time.perf_counter() - t0)
        return True

    async def watch(self, interval_s: float) -> None:
        """Poll every `interval_s` seconds until cancelled; loading runs in a worker thread, off the event loop."""
        from starlette.concurrency import run_in_threadpool

        last_problem = None
        while True:
            await asyncio.sleep(interval_s)
            try:
                await run_in_threadpool(self.check)
                last_problem = None
            except Exception as exc:  # noqa: BLE001 - reading the version file must never stop the watcher
                problem = f"{type(exc).__name__}: {exc}"
                if problem != last_problem:  # once per problem, not at every poll
                    log.warning("thresholds watcher: %s; still serving version %s", problem, self.version)
                    last_problem = problem


def warehouse_live_router(router: Any, config: Any, home: str, metrics: Any = None) -> LiveRouter:
    """The LiveRouter of a deployed warehouse: for CR², the version file at `home` and newer_online_router to load;
    a certified router keeps the table it started with (module docstring)."""
    from cr2.deploy.deployment import CR2
    from cr2_cli.online import newer_online_router
    from cr2_warehouse.repository import read_thresholds_version

    if getattr(router, "name", CR2) != CR2:
        return LiveRouter(router, metrics=metrics)
    return LiveRouter(router, newest_version=lambda: read_thresholds_version(home),
                      load=lambda current: newer_online_router(current, config, home), metrics=metrics)


__all__ = ["LiveRouter", "warehouse_live_router"]
