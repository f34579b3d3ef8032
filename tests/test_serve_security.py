"""`cr2 serve` is safe by default: each safety probe against a server on loopback, with a stub router.

The router here is a stand-in with the deployed router's interface (route / describe) that takes a set
time per decision, so the HTTP layer is tested on its own in seconds; tests/test_pipeline_flow.py serves
the real router end to end.
"""
from __future__ import annotations

import contextlib
import json
import re
import threading
import time

import httpx
import pytest

from cr2.config import load_config
from cr2.core.errors import ConfigError, DataValidationError, UncalibratedOperatingPointError
from cr2_cli.serve import create_app
from tests.serve_helpers import fake_model_endpoint, running

GRID = (1.0, 2.0)


class StubRouter:
    """route() sleeps `delay` s (a decision's work, off the event loop or not) and defers to the first edge model."""

    def __init__(self, models: list[str], delay: float = 0.0):
        self.models, self.delay, self.calls, self.threads = models, delay, 0, set()

    def describe(self) -> dict:
        return {"models": self.models, "lams": list(GRID)}

    def route(self, question, choices, lam, alpha, distance_m=None, benchmark="mmlu", seed=0) -> dict:
        if lam not in GRID:
            raise UncalibratedOperatingPointError(f"λ={lam:g} is not on the calibrated grid [1 … 2, 2 points]")
        self.calls += 1
        self.threads.add(threading.get_ident())
        time.sleep(self.delay)
        return {"accept_local": False, "chosen_model": self.models[1], "score": 0.25, "tau": float("inf"),
                "lam": lam, "alpha": alpha, "models": []}


def _config(endpoints: dict | None = None, **serving):
    cfg = load_config()
    return cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"endpoints": endpoints or {}, **serving})})


@contextlib.contextmanager
def _stack(delay: float = 0.0, token: str | None = None, fail: bool = False, router_class: type = StubRouter,
           **serving):
    """(base URL of cr2 serve, the stub router, what the fake upstream saw)."""
    cfg = load_config()
    seen: list = []
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(running(fake_model_endpoint(cfg.models[1].id, seen, fail=fail)))
        cfg = _config({cfg.models[1].id: upstream + "/v1"}, **serving)
        router = router_class([m.id for m in cfg.models], delay)
        base = stack.enter_context(running(create_app(cfg, "unused", router=router, token=token)))
        yield base, router, seen


CHAT = {"model": "cr2", "messages": [{"role": "user", "content": "Name a prime number."}], "cr2_lam": 2.0}


@pytest.fixture(scope="module")
def server():
    with _stack(max_prompt_chars=1000, max_body_bytes=4096) as s:
        yield s


def test_cross_site_text_plain_post_is_refused_before_the_upstream(server):
    base, router, seen = server
    n = len(seen)
    r = httpx.post(base + "/v1/chat/completions", content=json.dumps(CHAT),
                   headers={"content-type": "text/plain", "origin": "https://evil.example"})
    assert r.status_code == 403 and "origin" in r.json()["detail"]
    r = httpx.post(base + "/v1/chat/completions", content=json.dumps(CHAT), headers={"content-type": "text/plain"})
    assert r.status_code == 415 and "application/json" in r.json()["detail"]
    r = httpx.post(base + "/v1/chat/completions", data={"messages": "x"})  # an HTML form post
    assert r.status_code == 415
    assert len(seen) == n and router.calls == 0  # nothing was forwarded, no key was spent


def test_dns_rebinding_host_is_refused_and_same_origin_is_allowed(server):
    base, _, _ = server
    r = httpx.get(base + "/health", headers={"host": "attacker.example:8080"})
    assert r.status_code == 400 and "allowed_hosts" in r.json()["detail"]
    assert httpx.get(base + "/health", headers={"host": "localhost"}).status_code == 200
    r = httpx.post(base + "/route", json={"query": "2 + 2?", "lam": 1.0}, headers={"origin": base})
    assert r.status_code == 200, r.text  # the server's own page (/docs) may call it


def test_oversized_bodies_and_prompts_get_413(server):
    base, router, _ = server
    calls = router.calls
    r = httpx.post(base + "/route", json={"query": "x" * 10_000, "lam": 1.0})
    assert r.status_code == 413 and "max_body_bytes" in r.json()["detail"]

    def chunks():  # no Content-Length: the limit applies while reading
        for _ in range(10):
            yield b" " * 1000

    r = httpx.post(base + "/route", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413
    r = httpx.post(base + "/route", json={"query": "y" * 2000, "lam": 1.0})
    assert r.status_code == 413 and "max_prompt_chars" in r.json()["detail"]
    chat = {**CHAT, "messages": [{"role": "user", "content": "z" * 2000}]}
    assert httpx.post(base + "/v1/chat/completions", json=chat).status_code == 413
    assert router.calls == calls


@pytest.mark.parametrize("field, raw", [
    ("lam", "NaN"), ("lam", "Infinity"), ("lam", "-Infinity"), ("lam", "1e400"), ("lam", "0"), ("lam", "true"),
    ("alpha", "NaN"), ("alpha", "1e400"), ("alpha", "1.5"), ("distance_m", "NaN"), ("distance_m", "1e400"),
    ("distance_m", "-3"), ("seed", "-1"), ("query", '"   "'), ("choices", "[" + ",".join(['"c"'] * 1000) + "]"),
    ("query", "5"), ("unknown_field", "1"),
])
def test_every_bad_route_value_is_a_4xx_naming_it(server, field, raw):
    base, router, _ = server
    fields = {k: v for k, v in {"query": "2 + 2?", "lam": 1.0}.items() if k != field}
    text = json.dumps(fields)[:-1] + f', "{field}": {raw}' + "}"  # raw JSON: NaN and 1e400 cannot be dumped
    r = httpx.post(base + "/route", content=text, headers={"content-type": "application/json"})
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    detail = str(r.json()["detail"]).lower()
    assert field in detail or "json" in detail or "query text" in detail, detail


@pytest.mark.parametrize("patch, needle", [
    ({"cr2_lam": 0}, "cr2_lam"), ({"cr2_lam": -1}, "cr2_lam"), ({"cr2_lam": "abc"}, "cr2_lam"),
    ({"cr2_lam": None}, "cr2_lam"), ({"cr2_alpha": 1.5}, "cr2_alpha"), ({"messages": 5}, "messages"),
    ({"messages": [{"role": "user", "content": "   "}]}, "user message"), ({"messages": []}, "user message"),
    ({"stream": "yes"}, "stream"),
])
def test_every_bad_chat_value_is_a_4xx_naming_it(server, patch, needle):
    base, _, seen = server
    n = len(seen)
    r = httpx.post(base + "/v1/chat/completions", json={**CHAT, **patch})
    assert r.status_code == 422, (r.status_code, r.text)
    assert needle in r.json()["detail"]
    assert len(seen) == n


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "1e400"])
def test_non_finite_lambda_in_chat_is_422(server, raw):
    base, _, _ = server
    text = '{"messages": [{"role": "user", "content": "hi"}], "cr2_lam": ' + raw + "}"
    r = httpx.post(base + "/v1/chat/completions", content=text, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    r = httpx.post(base + "/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                   headers={"x-cr2-lambda": raw})
    assert r.status_code == 422, r.text


def test_off_grid_lambda_is_400_naming_the_grid(server):
    base, _, _ = server
    r = httpx.post(base + "/route", json={"query": "2 + 2?", "lam": 0.37})
    assert r.status_code == 400 and "calibrated grid" in r.json()["detail"]


def test_forwarding_reuses_one_client_keeps_the_target_and_drops_client_credentials(server, monkeypatch):
    base, _, seen = server
    n = len(seen)
    with httpx.Client(base_url=base) as client:
        for _ in range(4):
            r = client.post("/v1/chat/completions", json={**CHAT, "model": "http://evil.example/v1"},
                            headers={"authorization": "Bearer client-secret"})
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["message"]["content"].startswith("answer from")
            assert "model=" in r.headers["x-cr2-decision"]
    got = seen[n:]
    assert len(got) == 4
    assert all("client-secret" not in str(g["headers"]) for g in got)  # the client's credentials stay here
    assert all(g["body"]["model"] != "http://evil.example/v1" for g in got)  # the served model name, not the client's
    assert all("cr2_lam" not in g["body"] for g in got)
    assert len({g["port"] for g in got}) == 1, "each request opened a new upstream connection"


def test_streaming_is_passed_through(server):
    base, _, _ = server
    with httpx.stream("POST", base + "/v1/chat/completions", json={**CHAT, "stream": True}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        assert "x-cr2-decision" in r.headers
        text = "".join(r.iter_text())
    assert text.count("data: ") == 4 and text.rstrip().endswith("data: [DONE]")


def test_decisions_run_off_the_event_loop_and_concurrency_is_bounded():
    with _stack(delay=1.5, max_concurrency=1, queue_timeout_s=0.3) as (base, router, _):
        results: dict = {}

        def slow():
            results["slow"] = httpx.post(base + "/route", json={"query": "q", "lam": 1.0}, timeout=30)

        t = threading.Thread(target=slow)
        t.start()
        time.sleep(0.3)  # the slow decision is running
        t0 = time.perf_counter()
        health = httpx.get(base + "/health", timeout=30)
        health_s = time.perf_counter() - t0
        busy = httpx.post(base + "/route", json={"query": "q", "lam": 1.0}, timeout=30)
        t.join()
    assert health.status_code == 200 and health_s < 0.5, f"/health took {health_s:.2f} s during a decision"
    assert busy.status_code == 503 and busy.headers["retry-after"] == "1" and "max_concurrency" in busy.json()["detail"]
    assert results["slow"].status_code == 200
    assert threading.main_thread().ident not in router.threads


def test_upstream_failure_is_502_not_500():
    with _stack(fail=True) as (base, _, _):
        r = httpx.post(base + "/v1/chat/completions", json=CHAT)
    assert r.status_code == 502 and "answered 500" in r.json()["detail"]


def test_a_token_is_required_beyond_loopback_and_checked_when_set():
    cfg = _config()
    router = StubRouter([m.id for m in cfg.models])
    with pytest.raises(ConfigError, match="CR2_SERVE_TOKEN"):
        create_app(cfg, "unused", router=router, bind_host="0.0.0.0")
    with pytest.raises(ConfigError, match="empty"):
        create_app(cfg, "unused", router=router, token="  ")
    with running(create_app(cfg, "unused", router=router, token="s3cret-token", bind_host="0.0.0.0")) as base:
        assert httpx.get(base + "/health").status_code == 401
        assert httpx.get(base + "/health", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert httpx.get(base + "/docs").status_code == 401
        ok = httpx.post(base + "/route", json={"query": "q", "lam": 1.0},
                        headers={"authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200, ok.text


class EchoingRouter(StubRouter):
    """Refuses an unknown benchmark as the deployed router does: naming it (a DataValidationError, 422)."""

    def route(self, question, choices, lam, alpha, distance_m=None, benchmark="mmlu", seed=0) -> dict:
        if benchmark != "mmlu":
            raise DataValidationError(f"unknown benchmark '{benchmark}' for the output-length estimate; known: mmlu")
        return super().route(question, choices, lam, alpha, distance_m, benchmark, seed)


def test_error_answers_cut_every_value_they_echo():
    """Before: a 100 KB `benchmark` came back whole in the 4xx detail (and so did a header's or a field's value);
    now every echoed value is cut to a few dozen characters and says how long it was."""
    long_text = "b" * 100_000
    with _stack(router_class=EchoingRouter) as (base, _, _):
        answers = {
            "benchmark": httpx.post(base + "/route", json={"query": "q", "lam": 1.0, "benchmark": long_text}),
            "benchmark (150)": httpx.post(base + "/route", json={"query": "q", "lam": 1.0, "benchmark": "b" * 150}),
            "stream": httpx.post(base + "/v1/chat/completions", json={**CHAT, "stream": long_text}),
            "X-CR2-Lambda": httpx.post(base + "/v1/chat/completions", json={"messages": CHAT["messages"]},
                                       headers={"x-cr2-lambda": "9" * 8000 + "x"}),
            "content-type": httpx.post(base + "/route", content=b"{}", headers={"content-type": "text/" + "c" * 8000}),
            "origin": httpx.get(base + "/health", headers={"origin": "https://" + "o" * 8000 + ".example"}),
            "host": httpx.get(base + "/health", headers={"host": "h" * 8000 + ".example"}),
        }
    for what, r in answers.items():
        detail = r.json()["detail"]
        assert 400 <= r.status_code < 500 and len(detail) < 300, (what, r.status_code, len(detail), detail[:200])
        assert not re.search(r"(.)\1{80}", detail), (what, detail)  # no value quoted longer than 80 characters
        if what not in ("benchmark", "X-CR2-Lambda"):  # those two are refused by their length, unquoted
            assert " chars)" in detail, (what, detail)


def _raw_status(base: str, request: bytes) -> int:
    """The status code of the answer to one raw HTTP/1.1 request."""
    import socket

    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        head = b""
        while b"\r\n" not in head:
            chunk = sock.recv(4096)
            if not chunk:
                break
            head += chunk
    return int(head.split(b" ", 2)[1])


@pytest.mark.parametrize("name, first, second", [
    ("authorization", "Bearer wrong", "Bearer s3cret-token"), ("authorization", "Bearer s3cret-token", "Bearer wrong"),
    ("authorization", "Bearer s3cret-token", "Bearer s3cret-token"), ("host", "127.0.0.1", "evil.example"),
    ("content-type", "application/json", "text/plain"), ("content-length", "2", "3"),
    ("x-cr2-lambda", "1", "2"), ("origin", "http://127.0.0.1", "https://evil.example"),
])
def test_a_request_with_two_copies_of_a_singleton_header_is_400(name, first, second):
    """Before: the last copy won silently (two Authorization headers: whichever came last decided), so a proxy in
    front and this server could read different credentials, hosts or sizes from one request; now it is a 400."""
    cfg = _config()
    with running(create_app(cfg, "unused", router=StubRouter([m.id for m in cfg.models]), token="s3cret-token",
                            bind_host="0.0.0.0")) as base:
        headers = {"host": "127.0.0.1", "authorization": "Bearer s3cret-token", "content-type": "application/json",
                   "content-length": "2"}
        lines = [f"{k}: {v}" for k, v in headers.items() if k != name] + [f"{name}: {first}", f"{name}: {second}"]
        request = ("POST /route HTTP/1.1\r\n" + "\r\n".join(lines) + "\r\n\r\n{}").encode()
        assert _raw_status(base, request) == 400, name
        single = ("POST /route HTTP/1.1\r\n" + "\r\n".join(f"{k}: {v}" for k, v in headers.items()) + "\r\n\r\n{}")
        assert _raw_status(base, single.encode()) == 422  # one copy of each: authenticated, then the empty body
