"""`cr2 serve` against a fault-injecting upstream (tests/fault_upstream.py), faults F1–F6, and the fourth round's
slow reader (a streamed answer nobody reads), JSON bombs (in requests and in upstream answers) and cookies.

Whatever the upstream does — down, slow headers, a stall mid-body (streaming or not), an answer trickling one byte
at a time, 500, a malformed or HTML 200, gzip SSE, reflected request headers, a huge or deeply nested answer, a JSON
bomb, JSON that backtracks a string scan, a cookie — and
whenever the client goes away or stops reading, the server answers 2xx / 4xx / 502 / 503 / 504 with a short
message, never passes on the upstream's body, an endpoint URL with credentials or a request header, and afterwards
serves at full capacity again (every slot released). The router is a stub (tests/test_serve_security.py explains
why); the server runs with `cr2 serve`'s own uvicorn configuration (read timeouts, write-progress deadline).
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cr2.config import load_config
from cr2_cli.serve import create_app
from tests.fault_upstream import (BACKTRACK_BODY, COOKIE, HUGE_BYTES, MODES, SECRET_PATH, TRICKLE_S, FaultUpstream,
                                 closed_port)
from tests.serve_helpers import read_until_closed, running

KEY_ENV = "CR2_TEST_FAULT_UPSTREAM_KEY"
UPSTREAM_KEY = "sk-upstream-do-not-leak-7f3a9c"
URL_PASSWORD = "pa55w0rd-in-url"
MAX_CONCURRENCY = 2
HOLD_S = 0.4  # a "hold" /route decision: longer than the queue timeout, so a lost slot shows as a 503
WRITE_TIMEOUT_S = 0.5
STREAM_TIMEOUT_S = 1.0
SERVING = dict(timeout_s=0.5, connect_timeout_s=0.5, max_concurrency=MAX_CONCURRENCY, queue_timeout_s=0.3,
               max_response_bytes=HUGE_BYTES // 2, api_key_env=KEY_ENV, write_timeout_s=WRITE_TIMEOUT_S,
               stream_timeout_s=STREAM_TIMEOUT_S)
FORBIDDEN = (UPSTREAM_KEY, URL_PASSWORD, "user:", SECRET_PATH, "<html", "request_headers", "Traceback", "127.0.0.1:")
ALLOWED = set(range(200, 300)) | set(range(400, 500)) | {502, 503, 504}


class FaultRouter:
    """Defers every query to the 'up' edge model; queries starting with 'down' to the model whose endpoint is
    down; 'hold' queries take HOLD_S (the capacity probe)."""

    def __init__(self, models: list[str]):
        self.models = models

    def describe(self) -> dict:
        return {"models": self.models}

    def route(self, question, choices, lam, alpha, distance_m=None, benchmark="mmlu", seed=0) -> dict:
        if question.startswith("hold"):
            time.sleep(HOLD_S)
        chosen = self.models[2] if question.startswith("down") else self.models[1]
        return {"accept_local": False, "chosen_model": chosen, "score": 0.5, "tau": 0.1, "lam": lam, "alpha": alpha,
                "models": []}


@contextlib.contextmanager
def fault_stack(**overrides):
    """(base URL of cr2 serve, the fault upstream) with serving limits SERVING (+ overrides)."""
    cfg = load_config()
    upstream = FaultUpstream()
    old = os.environ.get(KEY_ENV)
    os.environ[KEY_ENV] = UPSTREAM_KEY
    try:
        with running(upstream) as up:
            endpoints = {cfg.models[1].id: up + "/v1",
                         cfg.models[2].id: f"http://user:{URL_PASSWORD}@127.0.0.1:{closed_port()}/v1"}
            serving = cfg.serving.model_copy(update={"endpoints": endpoints, **SERVING, **overrides})
            cfg = cfg.model_copy(update={"serving": serving})
            app = create_app(cfg, "unused", router=FaultRouter([m.id for m in cfg.models]))
            with running(app, serving=serving) as base:
                yield base, upstream
    finally:
        if old is None:
            os.environ.pop(KEY_ENV, None)
        else:
            os.environ[KEY_ENV] = old


@pytest.fixture(scope="module")
def stack():
    with fault_stack() as s:
        yield s


def chat(mode: str = "ok", stream: bool = False, query: str = "Name a prime number.") -> dict:
    return {"model": "cr2", "messages": [{"role": "user", "content": query}], "cr2_lam": 2.0, "stream": stream,
            "fault": mode}


def send(base: str, mode: str, stream: bool, disconnect: bool = False, query: str = "Name a prime number."):
    """(status, headers, body bytes) of one chat request; `disconnect`: the client goes away early (None status)."""
    body = chat(mode, stream, query)
    if disconnect:
        try:
            with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=0.15) as r:
                for _ in r.iter_raw():
                    break  # one chunk, then hang up
        except httpx.TimeoutException:
            pass
        return None, {}, b""
    with httpx.stream("POST", base + "/v1/chat/completions", json=body, timeout=10) as r:
        return r.status_code, dict(r.headers), b"".join(r.iter_raw())


def assert_clean(status: int, headers: dict, raw: bytes, stream: bool) -> None:
    """The contract for one answer: an allowed status, no secret in body or headers, a short one-line error
    detail, and otherwise well-formed SSE or a chat completion."""
    assert status in ALLOWED, (status, raw[:300])
    text = raw.decode("utf-8")  # gzip bytes passed on as they came would fail here (F5)
    for secret in FORBIDDEN:
        assert secret not in text, f"{secret!r} reached the client: {text[:300]}"
        assert secret not in json.dumps(headers), f"{secret!r} in the response headers"
    if status >= 400:
        detail = json.loads(text)["detail"]
        assert isinstance(detail, str) and 0 < len(detail) < 400 and "\n" not in detail, detail
        return
    if headers.get("content-type", "").startswith("text/event-stream"):
        assert stream
        events = [e for e in text.split("\n\n") if e.strip()]
        assert events and all(e.lstrip("\n").startswith("data: ") for e in events), text[:300]
        return
    answer = json.loads(text)  # a 200 is a chat completion, never an upstream's malformed or HTML page (F6)
    assert isinstance(answer["choices"], list)


def probe_capacity(base: str, within_s: float = 4.0) -> None:
    """MAX_CONCURRENCY concurrent decisions each holding a slot longer than the queue timeout all succeed
    (retried until `within_s`: slots of disconnected streams are released when cr2 notices)."""
    deadline = time.monotonic() + within_s
    while True:
        with ThreadPoolExecutor(MAX_CONCURRENCY) as pool:
            codes = list(pool.map(lambda _: httpx.post(base + "/route", json={"query": "hold", "lam": 1.0},
                                                       timeout=10).status_code, range(MAX_CONCURRENCY)))
        if codes == [200] * MAX_CONCURRENCY:
            return
        assert time.monotonic() < deadline, f"the server did not return to full capacity: {codes}"
        time.sleep(0.2)


# ------------------------------------------------------------------ one test per finding
def test_f1_stalled_streams_release_their_slots(stack):
    base, _ = stack
    answers = []
    for _ in range(2 * MAX_CONCURRENCY):  # more stalls than slots: each must give its slot back
        try:
            answers.append(send(base, "stall_body", stream=True))
        except httpx.HTTPError as exc:  # before the fix: the stream broke off mid-chunk
            answers.append(exc)
    probe_capacity(base, within_s=2.0)  # before the fix: 503 "busy" from here on, forever
    for answer in answers:
        assert isinstance(answer, tuple), answer
        status, headers, raw = answer
        assert status == 200
        assert_clean(status, headers, raw, stream=True)
        assert b'"upstream_error"' in raw  # the broken stream ends with an SSE error event


def test_f2_stalled_body_without_streaming_is_504_not_500(stack):
    base, _ = stack
    status, headers, raw = send(base, "stall_body", stream=False)
    assert status == 504 and "serving.timeout_s" in json.loads(raw)["detail"]
    status, _, raw = send(base, "slow_headers", stream=False)
    assert status == 504
    probe_capacity(base, within_s=1.0)


def test_f3_deeply_nested_json_is_refused_not_a_recursion_error(stack):
    base, _ = stack
    deep = "[" * 50_000 + "]" * 50_000  # far beyond Python's recursion limit, within MAX_JSON_VALUES
    for path, text in (("/route", '{"query": "q", "lam": 1.0, "choices": ' + deep + "}"),
                       ("/route", deep),
                       ("/v1/chat/completions", '{"messages": ' + deep + "}")):
        r = httpx.post(base + path, content=text, headers={"content-type": "application/json"}, timeout=10)
        assert r.status_code == 422 and "nested deeper" in r.json()["detail"], (path, r.status_code, r.text[:200])
    status, headers, raw = send(base, "deep", stream=False)  # inside an upstream's `choices`
    assert status == 502 and "nested too deep" in json.loads(raw)["detail"]


@pytest.mark.parametrize("mode, query", [("error_500", "q"), ("reflect", "q"), ("ok", "down: endpoint refuses")])
def test_f4_upstream_failures_leak_no_url_credentials_body_or_headers(stack, mode, query):
    base, upstream = stack
    status, headers, raw = send(base, mode, stream=False, query=query)
    assert status == 502
    assert_clean(status, headers, raw, stream=False)
    detail = json.loads(raw)["detail"]
    assert "serving.endpoints." in detail  # names the config key to fix instead of the URL
    if mode != "ok":
        assert upstream.seen[-1][1]["authorization"] == f"Bearer {UPSTREAM_KEY}"  # it was sent, and not echoed


def test_f5_gzip_sse_reaches_the_openai_client_decoded(stack):
    openai = pytest.importorskip("openai")
    base, _ = stack
    client = openai.OpenAI(base_url=base + "/v1", api_key="unused", max_retries=0)
    parts = [c.choices[0].delta.content for c in client.chat.completions.create(
        model="cr2", messages=[{"role": "user", "content": "hi"}], stream=True,
        extra_body={"cr2_lam": 2.0, "fault": "gzip_sse"})]
    assert "".join(p for p in parts if p).split() == ["answer", "from", "fault-upstream"]


@pytest.mark.parametrize("mode", ["malformed", "html", "huge"])
def test_f6_malformed_html_or_huge_upstream_200_is_502(stack, mode):
    base, _ = stack
    status, headers, raw = send(base, mode, stream=False)
    assert status == 502, raw[:200]
    assert_clean(status, headers, raw, stream=False)
    if mode == "huge":
        status, headers, raw = send(base, mode, stream=True)
        assert status == 200 and b"max_response_bytes" in raw and len(raw) < HUGE_BYTES
        assert_clean(status, headers, raw, stream=True)


def test_upstream_down_is_502_and_ok_modes_pass_through(stack):
    base, _ = stack
    for stream in (False, True):
        status, headers, raw = send(base, "ok", stream)
        assert status == 200
        assert_clean(status, headers, raw, stream)
    status, headers, raw = send(base, "ok", False, query="down")
    assert status == 502 and "ConnectError" in json.loads(raw)["detail"]


@pytest.fixture(scope="module")
def roomy_stack():
    """The fault stack with room for large upstream answers (64 MiB, the default): a stream outgrows every socket
    buffer before the size limit ends it, and only the value budget refuses a JSON bomb."""
    with fault_stack(max_response_bytes=64 << 20) as s:
        yield s


def _never_reads(base: str, body: dict) -> socket.socket:
    """A client that sends one chat request and then reads nothing of the answer (a 4 KiB receive buffer)."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    payload = json.dumps(body).encode()
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                 b"content-length: %d\r\n\r\n%s" % (len(payload), payload))
    return sock


def test_p1_streams_nobody_reads_give_their_slots_back_after_the_write_timeout(roomy_stack):
    """Before: clients that asked for a stream larger than the socket buffers and never read held every slot (503
    for as long as their sockets stayed open); now each is disconnected WRITE_TIMEOUT_S after its buffer filled."""
    base, _ = roomy_stack
    readers = [_never_reads(base, chat("endless", stream=True)) for _ in range(MAX_CONCURRENCY)]
    try:
        probe_capacity(base, within_s=4.0)  # the upstream stalls only after STALL_S (5 s): slots freed before that
        for sock in readers:  # and the slow readers' connections were closed, their unsent answer dropped
            data, closed_s = _drain(sock, limit_s=5.0)
            assert data.startswith(b"HTTP/1.1 200") and closed_s < 5.0, (data[:100], closed_s)
    finally:
        for sock in readers:
            sock.close()


def _drain(sock: socket.socket, limit_s: float) -> tuple[bytes, float]:
    """What is left to read on `sock` until the server closes or aborts it (the first 4 KiB kept), and when (s)."""
    return read_until_closed(sock, limit_s, keep=4096, reset_closes=True)


# 1 MB of 340,000 empty objects: cheap to send, seconds of event-loop time when parsed there
REQUEST_BOMB = b"[" + b",".join([b"{}"] * 340_000) + b"]"


def test_p2_json_bombs_are_refused_before_parsing_and_health_stays_live(roomy_stack):
    """Before: four clients posting REQUEST_BOMB drove /health to p50 11.5 s (the bodies were parsed and checked on
    the event loop); an upstream answer of millions of keys stalled it too. Now both are refused by the value budget
    before they are parsed, off the event loop, and /health answers throughout."""
    base, _ = roomy_stack
    assert len(REQUEST_BOMB) < 1 << 20  # within max_body_bytes: only the budget refuses it
    status, headers, raw = send(base, "bomb", stream=False)  # an upstream answer of BOMB_KEYS keys
    assert status == 502 and re.search(r"more than [\d,]+ JSON values", json.loads(raw)["detail"]), raw[:300]
    assert_clean(status, headers, raw, stream=False)
    worst_s, answers = 0.0, []
    with ThreadPoolExecutor(4) as pool:
        posts = [pool.submit(httpx.post, base + path, content=REQUEST_BOMB, timeout=60,
                             headers={"content-type": "application/json"})
                 for path in ("/route", "/v1/chat/completions") * 2]
        while not all(f.done() for f in posts):
            t0 = time.monotonic()
            assert httpx.get(base + "/health", timeout=60).status_code == 200
            worst_s = max(worst_s, time.monotonic() - t0)
            time.sleep(0.02)
        answers = [f.result() for f in posts]
    for r in answers:
        assert r.status_code == 413 and re.search(r"more than [\d,]+ JSON values", r.json()["detail"]), r.text[:300]
    assert worst_s < 2.0, f"/health took {worst_s:.1f} s while the bombs were handled"
    probe_capacity(base, within_s=2.0)


def test_p4_a_cookie_one_upstream_sets_is_never_sent_with_another_request(stack):
    """Before: the proxy's one HTTP client kept a cookie jar, so an upstream's Set-Cookie for one client went out
    with every later client's request; now the client keeps no cookies (and the cookie never reaches the client)."""
    base, upstream = stack
    status, headers, raw = send(base, "set_cookie", stream=False)
    assert status == 200 and "set-cookie" not in headers
    for stream in (False, True):  # later requests, other clients
        assert send(base, "ok", stream=stream)[0] == 200
        sent = upstream.seen[-1][1]
        assert "cookie" not in sent and COOKIE.split("=")[1] not in json.dumps(sent), sent


# ------------------------------------------------------------------ deadlines and hostile JSON
MARGIN_S = 1.0  # scheduling slack on a loaded 2-core machine: the deadlines under test are 0.5 s and 1 s


def test_a_trickling_upstream_is_a_504_within_timeout_s_and_frees_its_slot(stack):
    """Before: timeout_s bounded each read, not the answer, so an upstream sending one byte every TRICKLE_S
    (< timeout_s) held the request and its slot until it stopped; with every slot held so, /route got 503. Now
    timeout_s bounds the whole non-streamed answer."""
    base, _ = stack
    assert TRICKLE_S < SERVING["timeout_s"]  # never idle: only a deadline on the whole answer ends it
    with ThreadPoolExecutor(MAX_CONCURRENCY) as pool:  # every slot
        timed = list(pool.map(lambda _: _timed(send, base, "trickle", False), range(MAX_CONCURRENCY)))
    for (status, headers, raw), took_s in timed:
        assert status == 504 and "serving.timeout_s" in json.loads(raw)["detail"], (status, raw[:200])
        assert took_s < SERVING["timeout_s"] + MARGIN_S, f"the 504 came after {took_s:.1f} s"
        assert_clean(status, headers, raw, stream=False)
    probe_capacity(base, within_s=1.0)


def test_a_trickling_stream_ends_at_stream_timeout_s_and_frees_its_slot(stack):
    """Before: a stream had no deadline at all; now it ends with the SSE error event at serving.stream_timeout_s
    (its bytes keep coming, so the idle deadline, timeout_s, never fires) and gives its slot back."""
    base, _ = stack
    with ThreadPoolExecutor(MAX_CONCURRENCY) as pool:
        timed = list(pool.map(lambda _: _timed(send, base, "trickle", True), range(MAX_CONCURRENCY)))
    for (status, headers, raw), took_s in timed:
        assert status == 200 and b'"upstream_error"' in raw and b"stream_timeout_s" in raw, raw[-300:]
        assert took_s < STREAM_TIMEOUT_S + MARGIN_S, f"the stream ended after {took_s:.1f} s"
        assert_clean(status, headers, raw, stream=True)
    probe_capacity(base, within_s=1.0)


def _timed(fn, *args, **kwargs):
    t0 = time.monotonic()
    out = fn(*args, **kwargs)
    return out, time.monotonic() - t0


def _health_while(base: str, work) -> tuple[list, float]:
    """(the results of the callables `work`, run concurrently, and the slowest /health answer meanwhile, s)."""
    worst_s = 0.0
    with ThreadPoolExecutor(len(work)) as pool:
        futures = [pool.submit(w) for w in work]
        while not all(f.done() for f in futures):
            t0 = time.monotonic()
            assert httpx.get(base + "/health", timeout=60).status_code == 200
            worst_s = max(worst_s, time.monotonic() - t0)
            time.sleep(0.02)
        return [f.result() for f in futures], worst_s


def test_json_that_backtracks_a_string_scan_is_answered_at_once_and_health_stays_live(stack):
    """Before: BACKTRACK_BODY (104 KB) as a /route body was answered after 20 s, as an upstream answer after 6 s,
    and /health waited as long (the value count's regex held the GIL); now the count is one linear pass."""
    base, _ = stack
    post = lambda path: _timed(httpx.post, base + path, content=BACKTRACK_BODY,  # noqa: E731
                               headers={"content-type": "application/json"}, timeout=60)
    results, worst_s = _health_while(base, [lambda: post("/route"), lambda: post("/v1/chat/completions"),
                                            lambda: _timed(send, base, "backtrack", False)])
    for r, took_s in results[:2]:
        assert r.status_code in (413, 422) and took_s < 2.0, (r.status_code, r.text[:200], took_s)
    (status, headers, raw), took_s = results[2]
    assert status == 502 and took_s < 2.0, (status, raw[:200], took_s)
    assert_clean(status, headers, raw, stream=False)
    assert worst_s < 1.0, f"/health took {worst_s:.1f} s while the bodies were counted"


# ------------------------------------------------------------------ the property
ACTIONS = st.tuples(st.sampled_from(MODES + ("down",)), st.booleans(), st.booleans())


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(ACTIONS, min_size=1, max_size=5))
def test_any_sequence_of_faults_and_disconnects_answers_cleanly_and_frees_every_slot(stack, actions):
    base, _ = stack
    results: list = []
    lock = threading.Lock()

    def act(action) -> None:
        mode, stream, disconnect = action
        query = "down" if mode == "down" else "Name a prime number."
        out = send(base, "ok" if mode == "down" else mode, stream, disconnect, query)
        with lock:
            results.append((action, out))

    threads = [threading.Thread(target=act, args=(a,)) for a in actions]  # concurrent: more than the slots
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == len(actions)
    for (mode, stream, disconnect), (status, headers, raw) in results:
        if not disconnect:
            assert_clean(status, headers, raw, stream)
    probe_capacity(base)


# ------------------------------------------------------------------ minor points: timeouts, ports, bad input
def test_slow_header_connections_are_closed_after_the_header_timeout():
    import socket

    cfg = load_config()
    serving = cfg.serving.model_copy(update={"header_timeout_s": 0.5})
    app = create_app(cfg.model_copy(update={"serving": serving}), "unused", router=FaultRouter([m.id for m in cfg.models]))
    with running(app, serving=serving) as base:
        port = int(base.rsplit(":", 1)[1])
        assert httpx.get(base + "/health").status_code == 200  # complete requests are served as before
        for partial in (b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"):  # nothing, or headers never finished
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(partial)
                t0 = time.monotonic()
                try:
                    closed = s.recv(1024) == b""
                except (ConnectionResetError, TimeoutError, socket.timeout):
                    closed = False
                waited = time.monotonic() - t0
            assert closed and waited < 3, f"a slow-header connection stayed open ({waited:.1f} s, partial={partial!r})"
        with httpx.Client(base_url=base) as client:  # keep-alive: the next request on the connection still works
            assert client.get("/health").status_code == 200
            time.sleep(0.2)
            assert client.get("/health").status_code == 200


def test_serve_on_a_port_in_use_fails_before_saying_it_serves(tmp_path, monkeypatch):
    import socket

    from typer.testing import CliRunner

    import cr2_cli.serve
    from cr2_cli.main import app

    monkeypatch.setattr(cr2_cli.serve, "create_app", lambda *a, **k: FaultUpstream())  # no warehouse needed
    (tmp_path / "cr2.duckdb").write_bytes(b"")  # `cr2 serve` reads an existing warehouse only
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(app, ["serve", "--port", str(port), "--home", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "serving" not in result.output and f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "--port" in result.output


def test_an_absurd_distance_is_a_422(stack):
    base, _ = stack
    r = httpx.post(base + "/route", json={"query": "q", "lam": 1.0, "distance_m": 1e308})
    assert r.status_code == 422 and "distance_m" in r.json()["detail"]
