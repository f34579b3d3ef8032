"""A running `cr2 serve` swaps to a newer threshold table without a restart (cr2_cli/serve/live.py): requests in
flight finish on the table they started with, none fails, and every answer names the version that decided it.

Routers here are stand-ins that answer with their version after a set delay, so the swap is tested on its own
in seconds; tests/test_pipeline_flow.py swaps the real router after a real `recalibrate`.
"""
from __future__ import annotations

import contextlib
import threading
import time

import httpx
import pytest

from cr2.config import load_config
from cr2_cli.serve import create_app
from cr2_cli.serve.live import LiveRouter
from tests.serve_helpers import running
from cr2_warehouse.repository import read_thresholds_version, write_thresholds_version

MODELS = ["dev", "edge"]


class VersionedRouter:
    """Decides in `delay` s and answers with its version; `started` records the version each decision began on."""

    def __init__(self, version: int, delay: float, log: list):
        self.version, self.delay, self.log = version, delay, log

    def describe(self) -> dict:
        return {"thresholds_version": self.version, "models": MODELS, "lams": [1.0]}

    def route(self, question, choices, lam, alpha, distance_m=None, benchmark="mmlu", seed=0, embedding=None) -> dict:
        self.log.append(("start", self.version, question))
        time.sleep(self.delay)
        return {"accept_local": True, "chosen_model": "dev", "score": 0.5, "tau": 0.1, "lam": lam, "alpha": alpha,
                "thresholds_version": self.version, "models": []}


@contextlib.contextmanager
def _live_server(home, delay: float = 0.05, fail_versions: tuple[int, ...] = ()):
    log: list = []

    def load(current):
        newest = read_thresholds_version(home)
        if newest in fail_versions:
            raise RuntimeError(f"checkpoint of version {newest} is missing")
        return VersionedRouter(newest, delay, log)

    write_thresholds_version(home, 1)
    cfg = load_config()
    cfg = cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"reload_interval_s": 0.05,
                                                                           "max_concurrency": 16})})
    app = create_app(cfg, str(home), router=LiveRouter(VersionedRouter(1, delay, log),
                                                       newest_version=lambda: read_thresholds_version(home),
                                                       load=load))
    with running(app) as base:
        yield base, log, app


def _metric(base: str, name: str) -> str:
    return "\n".join(line for line in httpx.get(base + "/metrics", timeout=10).text.splitlines()
                     if line.startswith(name))


def test_a_newer_table_is_swapped_in_under_load_and_no_request_fails(tmp_path):
    with _live_server(tmp_path, delay=0.2) as (base, log, app):
        answers: dict[int, list[tuple[int, int, int]]] = {c: [] for c in range(8)}
        failures: list = []
        stop = threading.Event()

        def client(c: int) -> None:
            with httpx.Client(base_url=base, timeout=30) as http:
                i = 0
                while not stop.is_set():
                    r = http.post("/route", json={"query": f"client {c} query {i}", "lam": 1.0})
                    if r.status_code != 200:
                        failures.append((c, r.status_code, r.text))
                    else:
                        answers[c].append((i, r.json()["thresholds_version"],
                                           int(r.headers["x-cr2-thresholds-version"])))
                    i += 1

        threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30  # every client has answers on version 1 (and more in flight) before the swap
        while time.monotonic() < deadline and not all(answers.values()):
            time.sleep(0.05)
        time.sleep(0.2)
        write_thresholds_version(tmp_path, 2)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(any(v == 2 for _, v, _ in a) for a in answers.values()):
            time.sleep(0.05)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        health = httpx.get(base + "/health", timeout=10).json()
        gauge = _metric(base, "cr2_serve_thresholds_version ")
        reloads = _metric(base, "cr2_serve_threshold_reloads_total")
    assert not failures, failures[:3]
    for c, got in answers.items():
        versions = [v for _, v, _ in got]
        assert all(v == h for _, v, h in got), "the header names the version in the body"
        assert versions[0] == 1 and versions[-1] == 2, (c, versions)
        assert versions == sorted(versions), (c, versions)  # never back to the old table after the swap
    # the decisions in flight when the swap happened began on version 1 and answered version 1
    started = {q: v for kind, v, q in log if kind == "start"}
    for c, got in answers.items():
        for i, v, _ in got:
            assert started[f"client {c} query {i}"] == v
    assert health["thresholds_version"] == 2 and gauge.endswith(" 2.0")
    assert 'outcome="swapped"} 1.0' in reloads


def test_a_table_that_fails_to_load_leaves_the_serving_one_and_is_not_retried(tmp_path, caplog):
    with _live_server(tmp_path, fail_versions=(2,)) as (base, log, app):
        write_thresholds_version(tmp_path, 2)
        time.sleep(0.6)  # a dozen polls
        r = httpx.post(base + "/route", json={"query": "q", "lam": 1.0}, timeout=10)
        reloads = _metric(base, "cr2_serve_threshold_reloads_total")
        write_thresholds_version(tmp_path, 3)  # the next version loads
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and app.state.live.version != 3:
            time.sleep(0.05)
        after = httpx.post(base + "/route", json={"query": "q", "lam": 1.0}, timeout=10)
    assert r.status_code == 200 and r.json()["thresholds_version"] == 1
    assert 'outcome="failed"} 1.0' in reloads  # tried once, not at every poll
    assert after.json()["thresholds_version"] == 3


def test_the_version_file_is_replaced_whole(tmp_path):
    assert read_thresholds_version(tmp_path) is None
    for v in (1, 2, 10):
        write_thresholds_version(tmp_path, v)
        assert read_thresholds_version(tmp_path) == v
    assert sorted(p.name for p in tmp_path.iterdir()) == ["thresholds.version"]  # no temporary file left behind


@pytest.mark.parametrize("interval", [0.0])
def test_reload_interval_zero_never_swaps(tmp_path, interval):
    cfg = load_config()
    cfg = cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"reload_interval_s": interval})})
    log: list = []
    write_thresholds_version(tmp_path, 1)
    live = LiveRouter(VersionedRouter(1, 0.0, log), newest_version=lambda: read_thresholds_version(tmp_path),
                      load=lambda cur: VersionedRouter(read_thresholds_version(tmp_path), 0.0, log))
    with running(create_app(cfg, str(tmp_path), router=live)) as base:
        write_thresholds_version(tmp_path, 2)
        time.sleep(0.3)
        assert httpx.get(base + "/health", timeout=10).json()["thresholds_version"] == 1


def test_p13_a_version_file_naming_an_absent_version_does_not_reload_in_a_loop(tmp_path, caplog):
    """Before: a version file naming 999 (not in the warehouse) made the server reload every poll ("1 → 1, swapped");
    now it asks once, logs once, and keeps serving — and still swaps when the file names a version that exists."""
    log: list = []
    loads: list = []
    held = {"newest": 1}  # the warehouse's newest table; the version file may name anything

    def load(current):  # what newer_online_router does: the newest deployment, or `current` when it is the newest
        loads.append(read_thresholds_version(tmp_path))
        return current if held["newest"] == current.version else VersionedRouter(held["newest"], 0.0, log)

    write_thresholds_version(tmp_path, 1)
    live = LiveRouter(VersionedRouter(1, 0.0, log), newest_version=lambda: read_thresholds_version(tmp_path), load=load)
    cfg = load_config()
    cfg = cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"reload_interval_s": 0.05})})
    with caplog.at_level("WARNING", logger="cr2_cli.serve"), running(create_app(cfg, str(tmp_path), router=live)) as base:
        write_thresholds_version(tmp_path, 999)
        time.sleep(0.6)  # a dozen polls
        reloads = _metric(base, "cr2_serve_threshold_reloads_total")
        assert httpx.get(base + "/health", timeout=10).json()["thresholds_version"] == 1
        held["newest"] = 2
        write_thresholds_version(tmp_path, 2)  # a version that exists is still picked up
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and live.version != 2:
            time.sleep(0.05)
    assert loads.count(999) == 1, loads
    assert "swapped" not in reloads and 'outcome="absent"} 1.0' in reloads, reloads
    assert len([r for r in caplog.records if "999" in r.getMessage()]) == 1
    assert live.version == 2


def test_p12_a_version_file_that_is_not_a_regular_file_is_refused_and_logged_once(tmp_path, caplog):
    """Before: a thresholds.version linked to /dev/zero was read to MemoryError at every poll (GBs of RSS); now the
    bounded reader refuses it at once, the watcher logs it once and the server keeps serving."""
    import subprocess
    import sys

    (tmp_path / "thresholds.version").symlink_to("/dev/zero")
    probe = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))\n"  # a regression: MemoryError,
             "from cr2.core.errors import InvalidValueError\n"                                   # not the machine's memory
             "from cr2_warehouse.repository import read_thresholds_version\n"
             "try:\n    read_thresholds_version(%r)\nexcept InvalidValueError as exc:\n    print('refused:', exc)\n"
             % str(tmp_path))
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "refused:" in out.stdout and "is a device" in out.stdout, out.stderr[-500:]
    log: list = []
    live = LiveRouter(VersionedRouter(1, 0.0, log), newest_version=lambda: read_thresholds_version(tmp_path),
                      load=lambda cur: VersionedRouter(2, 0.0, log))
    cfg = load_config()
    cfg = cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"reload_interval_s": 0.05})})
    with caplog.at_level("WARNING", logger="cr2_cli.serve"), running(create_app(cfg, str(tmp_path), router=live)) as base:
        time.sleep(0.6)
        assert httpx.get(base + "/health", timeout=10).json()["thresholds_version"] == 1
    assert len([r for r in caplog.records if "thresholds watcher" in r.getMessage()]) == 1
