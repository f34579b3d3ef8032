"""`cr2 serve`'s target mode under load: a target computation (seconds of CPU: the calibration split scored and a
Learn-then-Test search) is paid once per rounded target, kept in a bounded LRU, and at most one runs at a time in its
own slot, so a client sending many distinct targets cannot take the slots of ordinary /route requests.

OnlineRouter.choose_target runs on a stand-in deployment (its certification, cr2.method.targets.choose_by_target,
replaced by a counter): the rounding and the cache are tested on the real method; the server's slots with the stub
router of tests/test_serve_security.py. tests/test_pipeline_flow.py certifies real targets end to end.
"""
from __future__ import annotations

import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from cr2.config import load_config
from cr2.core.errors import InvalidValueError
from cr2.deploy.deployment import OnlineRouter
from cr2_cli.serve import create_app
from tests.serve_helpers import running
from tests.test_serve_security import StubRouter


class _Choice:
    def __init__(self, target_accuracy, budget):
        self.target_accuracy, self.budget = target_accuracy, budget

    def as_dict(self) -> dict:
        return {"mode": "accuracy" if self.budget is None else "budget",
                "target": self.target_accuracy if self.budget is None else self.budget,
                "lam": 1.0, "alpha": 0.1, "tau": 0.5, "rule": "crc"}


@pytest.fixture
def certified(monkeypatch) -> list:
    """The targets certified (one entry per computation), with the certification replaced by a counter."""
    calls: list = []

    def choose_by_target(*args, target_accuracy=None, budget=None, **kwargs):
        calls.append((target_accuracy, budget))
        return _Choice(target_accuracy, budget)

    monkeypatch.setattr("cr2.method.targets.choose_by_target", choose_by_target)
    monkeypatch.setattr("cr2.method.utility.risk_label", lambda *args, **kwargs: None)
    return calls


def _online_router(version: int = 1) -> OnlineRouter:
    cfg = load_config()
    table = types.SimpleNamespace(scored_lams=[1.0], alphas=[0.1], rule="crc")
    gate = types.SimpleNamespace(threshold_table_=table, proba=lambda emb: np.zeros((len(emb), 3)),
                                 scores=lambda emb, lams: np.zeros((len(emb), len(lams))))
    router = OnlineRouter(config=cfg, router=gate, version=version, dist=None, cost_config=cfg)
    router.calibration_set = lambda: types.SimpleNamespace(embedding=np.zeros((4, 8)), decision_cost=np.zeros((4, 3)),
                                                           correct=np.zeros((4, 3), bool), cost=np.zeros((4, 3)))
    return router


def test_targets_are_rounded_in_the_safe_direction_and_the_answer_names_the_rounded_target(certified):
    """Before: every distinct float was its own computation (0.9511 and 0.9519 cost two); now accuracy targets are
    rounded up to the 0.001 grid (at least the accuracy asked for) and budgets down to 3 significant digits (at most
    the cost allowed), and the answer says which target was certified and which was asked for."""
    router = _online_router()
    for asked in (0.9511, 0.9519, 0.952):
        c = router.choose_target(asked, None)
        assert c["target"] == 0.952 and c["target_requested"] == asked, c
    assert certified == [(0.952, None)]
    for asked in (0.01234, 0.012349):
        c = router.choose_target(None, asked)
        assert c["target"] == 0.0123 and c["target_requested"] == asked, c
    assert router.choose_target(0.57, None)["target"] == 0.57  # on the grid already: float noise does not round up
    assert certified == [(0.952, None), (None, 0.0123), (0.57, None)]
    with pytest.raises(InvalidValueError, match="at most 0.999"):  # rounding up would ask for perfection
        router.choose_target(0.9995, None)


def test_the_target_cache_is_a_bounded_lru(certified):
    """Before: the cache kept every target ever asked for; now it keeps the TARGET_CACHE_SIZE most recently used."""
    from cr2.deploy import deployment

    size = getattr(deployment, "TARGET_CACHE_SIZE", 64)
    router = _online_router()
    targets = [round(0.5 + 0.001 * i, 3) for i in range(size + 20)]
    for t in targets:
        router.choose_target(t, None)
    router.choose_target(targets[-1], None)  # a hit
    assert len(certified) == len(targets)
    assert len(router._target_cache) == size
    router.choose_target(targets[0], None)  # evicted: computed again
    assert len(certified) == len(targets) + 1


class TargetStubRouter(StubRouter):
    """StubRouter with a target mode whose computation takes `target_delay` s (the LTT search's CPU time) and is
    cached per target, as OnlineRouter's."""

    target_delay = 1.0

    def __init__(self, models, delay=0.0):
        super().__init__(models, delay)
        self.cache: dict = {}
        self.computing = self.most_computing = 0
        self.lock = threading.Lock()

    def target_cached(self, target_accuracy, budget) -> bool:
        return (target_accuracy, budget) in self.cache

    def choose_target(self, target_accuracy, budget) -> dict:
        if (target_accuracy, budget) not in self.cache:
            with self.lock:
                self.computing += 1
                self.most_computing = max(self.most_computing, self.computing)
            time.sleep(self.target_delay)
            with self.lock:
                self.computing -= 1
            self.cache[(target_accuracy, budget)] = {"target": target_accuracy, "lam": 1.0, "alpha": 0.1}
        return self.cache[(target_accuracy, budget)]

    def route_by_target(self, question, choices, target_accuracy, budget, distance_m=None, benchmark="mmlu", seed=0):
        c = self.choose_target(target_accuracy, budget)
        return {**self.route(question, choices, c["lam"], c["alpha"], distance_m, benchmark, seed), "target_choice": c}


def test_target_computations_run_one_at_a_time_and_leave_route_its_slots():
    """Before: four clients with distinct targets took both slots for a second each, and an ordinary /route waited
    past queue_timeout_s into a 503; now one target computation runs at a time (the others wait queue_timeout_s
    for it, then get 503 with Retry-After) and /route answers at once."""
    cfg = load_config()
    cfg = cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"max_concurrency": 2,
                                                                          "queue_timeout_s": 0.3})})
    router = TargetStubRouter([m.id for m in cfg.models])
    router.target_delay = 2.0  # long beside queue_timeout_s: a request that waits for the slot gets its 503
    with running(create_app(cfg, "unused", router=router)) as base:
        def target(i: int) -> httpx.Response:
            return httpx.post(base + "/route", json={"query": "q", "target_accuracy": 0.9 + 0.01 * i}, timeout=30)

        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(target, i) for i in range(4)]
            time.sleep(0.4)  # the target requests are in: computing, or waiting for the target slot
            t0 = time.monotonic()
            probe = httpx.post(base + "/route", json={"query": "q", "lam": 1.0}, timeout=30)
            probe_s = time.monotonic() - t0
            answers = [f.result() for f in futures]
        assert probe.status_code == 200 and probe_s < 1.5, (probe.status_code, probe.text[:200], probe_s)
        codes = sorted(r.status_code for r in answers)
        # one computes; those that arrive while it does wait queue_timeout_s and get 503 (on a loaded machine a
        # request may reach the server after the first computation ended, and compute in turn: never two at once)
        assert set(codes) == {200, 503}, [r.text[:200] for r in answers]
        busy = next(r for r in answers if r.status_code == 503)
        assert busy.headers["retry-after"] and "target" in busy.json()["detail"]
        assert router.most_computing == 1
        ok = next(r for r in answers if r.status_code == 200)
        t0 = time.monotonic()  # a cached target is no computation: it does not wait for the target slot
        target = ok.json()["target_choice"]["target"]
        again = httpx.post(base + "/route", json={"query": "q", "target_accuracy": target})
        assert again.status_code == 200 and time.monotonic() - t0 < 1.5
