"""Micro-batching of concurrent requests: many callers, one `route_batch` call per batch, each caller its own result.

A server thread that routes one query at a time pays the encoder's fixed cost per query; requests that
arrive together can share one encoder call instead. `MicroBatcher` collects the requests submitted from any
number of threads: the first request of a batch waits at most `max_wait_s` for companions, a batch closes
early when it reaches `max_batch_size`, and one worker thread calls `route_batch(requests) -> results`
(same length, same order). Each caller gets back exactly the result at its own position — or, when
`route_batch` returns an exception instance at that position, that exception raised in the caller's
thread; when `route_batch` itself raises, every caller of the batch gets that exception.

Only the worker thread calls `route_batch`, so it needs no lock of its own. Plain Python (threading,
concurrent.futures): usable from sync code, and from async code through `submit_future` + asyncio.wrap_future.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from cr2.core.errors import Cr2Error, InvalidValueError

Req = TypeVar("Req")
Res = TypeVar("Res")


class BatcherClosedError(Cr2Error):
    """A request was submitted to a MicroBatcher that is closed."""


@dataclass
class BatcherStats:
    """Counters of a MicroBatcher (read them for monitoring; updated by the worker thread)."""

    batches: int = 0
    requests: int = 0
    largest_batch: int = 0
    failed_batches: int = 0
    sizes: dict[int, int] = field(default_factory=dict)  # batch size → how many batches had it

    @property
    def mean_batch(self) -> float:
        return self.requests / self.batches if self.batches else 0.0


class MicroBatcher(Generic[Req, Res]):
    """Thread-safe micro-batcher in front of a `route_batch(list[request]) -> list[result]` callable."""

    def __init__(self, route_batch: Callable[[list[Req]], Sequence[Res | BaseException]], max_batch_size: int = 32,
                 max_wait_s: float = 0.002, name: str = "cr2-microbatcher") -> None:
        if int(max_batch_size) < 1:
            raise InvalidValueError(f"max_batch_size must be ≥ 1, got {max_batch_size}")
        if not max_wait_s >= 0:
            raise InvalidValueError(f"max_wait_s must be ≥ 0, got {max_wait_s}")
        self._route_batch = route_batch
        self.max_batch_size = int(max_batch_size)
        self.max_wait_s = float(max_wait_s)
        self.stats = BatcherStats()
        self._queue: deque[tuple[Req, Future]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self._worker = threading.Thread(target=self._run, name=name, daemon=True)
        self._worker.start()

    # ------------------------------------------------------------ callers
    def submit_future(self, request: Req) -> Future:
        """Queue one request; return a Future that resolves to its result (or raises its exception)."""
        fut: Future = Future()
        with self._cond:
            if self._closed:
                raise BatcherClosedError("the micro-batcher is closed; no new requests are accepted")
            self._queue.append((request, fut))
            self._cond.notify()
        return fut

    def submit(self, request: Req, timeout_s: float | None = None) -> Res:
        """Queue one request and block until its result is ready; return it (or raise its exception)."""
        return self.submit_future(request).result(timeout=timeout_s)

    def pending(self) -> int:
        """Requests queued for the next batch (not yet taken by the worker)."""
        return len(self._queue)

    def close(self, timeout_s: float | None = 5.0) -> None:
        """Stop accepting requests, finish the queued ones, and stop the worker thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._worker.join(timeout=timeout_s)

    def __enter__(self) -> "MicroBatcher[Req, Res]":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ worker
    def _next_batch(self) -> list[tuple[Req, Future]]:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return []  # closed and drained
            deadline = time.monotonic() + self.max_wait_s
            while len(self._queue) < self.max_batch_size and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            n = min(len(self._queue), self.max_batch_size)
            return [self._queue.popleft() for _ in range(n)]

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if not batch:
                return
            live = [(req, fut) for req, fut in batch if fut.set_running_or_notify_cancel()]
            if not live:
                continue
            s = self.stats
            s.batches += 1
            s.requests += len(live)
            s.largest_batch = max(s.largest_batch, len(live))
            s.sizes[len(live)] = s.sizes.get(len(live), 0) + 1
            try:
                results = list(self._route_batch([req for req, _ in live]))
                if len(results) != len(live):
                    raise RuntimeError(f"route_batch returned {len(results)} results for {len(live)} requests")
            except BaseException as exc:  # every caller of the batch learns why
                s.failed_batches += 1
                for _, fut in live:
                    fut.set_exception(exc)
                continue
            for (_, fut), res in zip(live, results):
                if isinstance(res, BaseException):
                    fut.set_exception(res)
                else:
                    fut.set_result(res)


__all__ = ["BatcherClosedError", "BatcherStats", "MicroBatcher"]
