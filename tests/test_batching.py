"""cr2.deploy.batching.MicroBatcher: concurrent callers share route_batch calls and each gets its own result."""
from __future__ import annotations

import threading
import time

import pytest

from cr2.deploy.batching import BatcherClosedError, MicroBatcher


def test_each_caller_gets_its_own_result_under_concurrency():
    calls = []

    def route_batch(reqs):
        calls.append(list(reqs))
        time.sleep(0.005)  # a slow "encoder": requests pile up behind it
        return [r * 10 for r in reqs]

    results, errors = {}, []
    with MicroBatcher(route_batch, max_batch_size=8, max_wait_s=0.01) as b:
        def client(i):
            try:
                results[i] = b.submit(i, timeout_s=10)
            except Exception as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=client, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    assert results == {i: i * 10 for i in range(64)}
    assert sorted(r for batch in calls for r in batch) == list(range(64))  # every request routed exactly once
    assert max(len(c) for c in calls) <= 8
    assert len(calls) < 64, "concurrent requests were batched together"
    assert b.stats.requests == 64 and b.stats.batches == len(calls)


def test_a_per_request_exception_goes_to_that_caller_only():
    def route_batch(reqs):
        return [ValueError(f"bad {r}") if r < 0 else r for r in reqs]

    with MicroBatcher(route_batch, max_batch_size=4, max_wait_s=0.05) as b:
        good, bad = b.submit_future(3), b.submit_future(-1)
        assert good.result(timeout=5) == 3
        with pytest.raises(ValueError, match="bad -1"):
            bad.result(timeout=5)


def test_a_failing_batch_fails_every_caller_in_it_and_the_batcher_keeps_working():
    def route_batch(reqs):
        if "boom" in reqs:
            raise RuntimeError("encoder failed")
        return list(reqs)

    with MicroBatcher(route_batch, max_batch_size=2, max_wait_s=0.2) as b:
        f1, f2 = b.submit_future("boom"), b.submit_future("x")
        for f in (f1, f2):
            with pytest.raises(RuntimeError, match="encoder failed"):
                f.result(timeout=5)
        assert b.submit("y", timeout_s=5) == "y"
        assert b.stats.failed_batches == 1


def test_a_wrong_number_of_results_is_an_error_not_a_mix_up():
    with MicroBatcher(lambda reqs: reqs[:-1], max_batch_size=2, max_wait_s=0.2) as b:
        f1, f2 = b.submit_future(1), b.submit_future(2)
        for f in (f1, f2):
            with pytest.raises(RuntimeError, match="returned 1 results for 2 requests"):
                f.result(timeout=5)


def test_batch_size_one_routes_one_at_a_time_and_close_rejects_new_requests():
    sizes = []
    b = MicroBatcher(lambda reqs: sizes.append(len(reqs)) or list(reqs), max_batch_size=1, max_wait_s=0.0)
    assert [b.submit(i, timeout_s=5) for i in range(5)] == list(range(5))
    assert sizes == [1] * 5
    b.close()
    with pytest.raises(BatcherClosedError):
        b.submit(1)


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError):
        MicroBatcher(list, max_batch_size=0)
    with pytest.raises(ValueError):
        MicroBatcher(list, max_wait_s=-1)
