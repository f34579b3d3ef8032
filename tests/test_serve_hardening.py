"""`cr2 serve` against hostile clients, third round: huge numbers (N2), text that is not UTF-8 (N3), slow bodies
(N5), clients that disconnect mid-body (N6) and Host headers with trailing junk — each a 4xx or a closed
connection, never a 500, with a stub router (tests/test_serve_security.py) behind `cr2 serve`'s own uvicorn
configuration (header- and body-read timeouts)."""
from __future__ import annotations

import contextlib
import json
import logging
import socket
import time

import httpx
import pytest

from cr2.config import load_config
from cr2_cli.serve import create_app
from tests.serve_helpers import fake_model_endpoint, read_until_closed, running
from tests.test_serve_security import StubRouter

TOKEN = "s3cret-token-for-tests"


@contextlib.contextmanager
def _server(token: str | None = None, **serving):
    cfg = load_config()
    with contextlib.ExitStack() as stack:
        upstream = stack.enter_context(running(fake_model_endpoint(cfg.models[1].id)))
        cfg = cfg.model_copy(update={"serving": cfg.serving.model_copy(
            update={"endpoints": {cfg.models[1].id: upstream + "/v1"}, **serving})})
        app = create_app(cfg, "unused", router=StubRouter([m.id for m in cfg.models]), token=token)
        yield stack.enter_context(running(app, serving=cfg.serving)), app


@pytest.fixture(scope="module")
def server():
    with _server(body_timeout_s=1.0, min_body_rate_bps=1024.0) as s:
        yield s


def _post(base: str, path: str, raw: bytes, headers: dict | None = None) -> httpx.Response:
    return httpx.post(base + path, content=raw, headers={"content-type": "application/json", **(headers or {})},
                      timeout=10)


def _errors_500(base: str) -> float:
    text = httpx.get(base + "/metrics", timeout=10).text
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("cr2_serve_requests_total{") and 'status="500"' in line)


def _raw(base: str, head: str, body: bytes = b"") -> socket.socket:
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    sock.sendall(head.encode("latin-1") + b"\r\n" + body)
    return sock


# ------------------------------------------------------------------ N2: huge numbers
@pytest.mark.parametrize("field", ["cr2_lam", "cr2_alpha"])
def test_a_401_digit_integer_in_a_chat_body_is_a_422_naming_the_field(server, field):
    base, _ = server
    body = {"messages": [{"role": "user", "content": "Name a prime."}], field: 10 ** 400}
    r = _post(base, "/v1/chat/completions", json.dumps(body).encode())
    assert r.status_code == 422 and field in r.json()["detail"], r.text


def test_huge_numbers_in_headers_and_route_bodies_are_422(server):
    base, _ = server
    chat = json.dumps({"messages": [{"role": "user", "content": "Name a prime."}]}).encode()
    r = _post(base, "/v1/chat/completions", chat, {"x-cr2-lambda": "9" * 401})
    assert r.status_code == 422 and "X-CR2-Lambda" in r.json()["detail"], r.text
    r = _post(base, "/route", json.dumps({"query": "q", "lam": 10 ** 400}).encode())
    assert r.status_code == 422, r.text


# ------------------------------------------------------------------ N3: lone surrogates
@pytest.mark.parametrize("path, raw, field", [
    ("/route", b'{"query": "q", "lam": 1.0, "choices": ["\\udfff", "b"]}', "choices[0]"),
    ("/route", b'{"query": "caf\\udce9?", "lam": 1.0}', "body.query"),
    ("/v1/chat/completions", b'{"messages": [{"role": "user", "content": "\\ud83d"}]}', "messages[0].content"),
])
def test_lone_surrogates_in_json_bodies_are_422_naming_the_field(server, path, raw, field):
    base, _ = server
    r = _post(base, path, raw)
    assert r.status_code == 422 and field in r.json()["detail"] and "UTF-8" in r.json()["detail"], r.text


def test_invalid_utf8_bytes_in_a_body_are_422(server):
    base, _ = server
    r = _post(base, "/route", b'{"query": "caf\xe9?", "lam": 1.0}')
    assert r.status_code == 422, r.text


def test_a_distance_below_the_path_loss_reference_is_422_naming_distance_m(server):
    base, _ = server
    r = _post(base, "/route", json.dumps({"query": "q", "lam": 1.0, "distance_m": 1e-300}).encode())
    assert r.status_code == 422 and "distance_m" in r.text and "non-finite" not in r.text, r.text


# ------------------------------------------------------------------ Host header junk
@pytest.mark.parametrize("host", ["[::1]evil.com", "localhost:80@evil.com", "127.0.0.1:80:81", "localhost:http",
                                  "localhost evil.com"])
def test_host_headers_with_trailing_junk_are_400(server, host):
    base, _ = server
    r = httpx.get(base + "/health", headers={"host": host}, timeout=10)
    assert r.status_code == 400, (host, r.status_code)
    for ok in ("localhost", "127.0.0.1:8080", "[::1]:8080", "LOCALHOST"):
        assert httpx.get(base + "/health", headers={"host": ok}, timeout=10).status_code == 200, ok


# ------------------------------------------------------------------ N5: slow bodies
def test_a_trickled_body_is_cut_off_with_408(server):
    base, _ = server
    sock = _raw(base, "POST /route HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                      "content-length: 100000\r\n", b"{")
    try:
        t0 = time.monotonic()
        for _ in range(3):  # one byte every 0.3 s: far below 1,024 bytes/s
            time.sleep(0.3)
            with contextlib.suppress(OSError):
                sock.sendall(b" ")
        data, closed_s = read_until_closed(sock, limit_s=8.0)
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 408"), data[:200]
    assert time.monotonic() - t0 < 6.0 and closed_s < 6.0  # body_timeout_s = 1 s plus 4 bytes' worth


def test_a_body_at_a_fair_rate_is_not_cut_off(server):
    base, _ = server
    payload = json.dumps({"query": "x" * 2000, "lam": 1.0}).encode()
    sock = _raw(base, "POST /route HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                      f"content-length: {len(payload)}\r\nconnection: close\r\n")
    try:
        for i in range(0, len(payload), 1024):  # 1 kB every 0.4 s: 2.5 kB/s, above the minimum rate
            sock.sendall(payload[i:i + 1024])
            time.sleep(0.4)
        data, _ = read_until_closed(sock, limit_s=8.0)
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 200"), data[:300]


def test_a_refused_request_closes_the_connection_instead_of_reading_the_trickle():
    with _server(token=TOKEN, body_timeout_s=30.0) as (base, _):
        sock = _raw(base, "POST /route HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                          "content-length: 100000\r\n", b"{")
        try:
            data, closed_s = read_until_closed(sock, limit_s=5.0)
        finally:
            sock.close()
    assert data.startswith(b"HTTP/1.1 401"), data[:200]
    assert closed_s < 5.0  # closed right after the 401, not after body_timeout_s


def test_a_body_sent_one_byte_per_packet_is_refused_with_413_at_once(server):
    """Before: a 1,040,020-byte body sent one byte per packet, fast enough for the body deadline, took 20 s of the
    event loop (one read and one ASGI message per byte) before its 413, and /health waited meanwhile; now a body may
    arrive in at most one read or chunk per 256 bytes of max_body_bytes (4,096 here), then it is a 413 at once."""
    import select

    base, _ = server
    sock = _raw(base, "POST /route HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                      "content-length: 1040020\r\n")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t0, sent = time.monotonic(), 0
    try:
        while time.monotonic() - t0 < 4.0 and not select.select([sock], [], [], 0)[0]:
            with contextlib.suppress(OSError):
                sock.sendall(b" ")
                sent += 1
            time.sleep(0.0001)  # one byte per packet, thousands per second: well above min_body_rate_bps
        answered_s = time.monotonic() - t0
        data, _ = read_until_closed(sock, limit_s=2.0)
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 413") and answered_s < 4.0, (data[:200], answered_s, sent)
    assert b"max_body_bytes" in data
    assert httpx.get(base + "/health", timeout=10).status_code == 200


def test_a_refusal_before_the_body_reaches_a_client_that_is_still_sending(server):
    """A request answered before its body was read (here 415: not JSON) gets its answer although the client sent
    more body than the server reads: the server flushes the answer and shuts its write side, then discards the rest
    (a lingering close). Closing a socket whose input was not all read sends a reset instead of the answer still
    queued (the one-byte-per-packet 413 met the same race now and then)."""
    base, _ = server
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    head = (b"POST /route HTTP/1.1\r\nhost: localhost\r\ncontent-type: text/plain\r\n"
            b"content-length: 1000000\r\n\r\n")
    try:
        sock.settimeout(1.0)  # the server stops reading the body: its kernel buffer holds what it has not read
        with contextlib.suppress(OSError):
            sock.sendall(head + b"x" * 1_000_000)
        time.sleep(0.5)  # the answer was sent and the socket closed (with unread input: a reset, before)
        data, closed_s = read_until_closed(sock, limit_s=5.0)
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 415") and closed_s < 5.0, (data[:200], closed_s)


def test_log_lines_of_a_flood_of_invalid_requests_are_rate_limited(server, monkeypatch):
    """Before: every malformed request added a log line (\"Invalid HTTP request received.\"), so any client
    could flood the server's log; now each kind of line passes LOG_BURST times per LOG_INTERVAL_S, and the first one
    after the interval says how many were suppressed."""
    from cr2_cli.serve import server as serve_server

    base, _ = server
    burst = getattr(serve_server, "LOG_BURST", 10)
    limiter = getattr(serve_server, "RATE_LIMITED_LOG", None)
    if limiter is not None:
        monkeypatch.setattr(limiter, "interval_s", 1.0)
        limiter.reset()
    seen = _Records()
    logging.getLogger("uvicorn.error").addHandler(seen)

    def malformed() -> None:
        sock = _raw(base, "GET /health HTTP/1.1\r\nhost: localhost\r\nno colon in this header line\r\n")
        try:
            read_until_closed(sock, limit_s=5.0)
        finally:
            sock.close()

    try:
        for _ in range(3 * burst):
            malformed()
        flood = [r.getMessage() for r in seen.records]
        time.sleep(1.1)
        malformed()
    finally:
        logging.getLogger("uvicorn.error").removeHandler(seen)
    invalid = [m for m in flood if "Invalid HTTP request" in m]
    assert 0 < len(invalid) <= burst, len(invalid)
    summary = seen.records[-1].getMessage()
    assert f"{2 * burst:,} similar lines suppressed" in summary, summary


# ------------------------------------------------------------------ N6: disconnects mid-body
class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def test_a_client_that_disconnects_mid_body_is_its_own_outcome_with_one_log_line(server):
    base, _ = server
    seen = _Records()
    loggers = [logging.getLogger(n) for n in ("uvicorn.error", "cr2_cli.serve", "uvicorn")]
    for lg in loggers:
        lg.addHandler(seen)
    old_level = logging.getLogger("cr2_cli.serve").level
    logging.getLogger("cr2_cli.serve").setLevel(logging.INFO)
    with contextlib.suppress(ImportError, AttributeError):  # five lines: within a fresh rate-limit window
        from cr2_cli.serve.server import RATE_LIMITED_LOG

        RATE_LIMITED_LOG.reset()
    try:
        before_500 = _errors_500(base)
        for _ in range(5):
            sock = _raw(base, "POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\n"
                              "content-type: application/json\r\ncontent-length: 1000\r\n", b'{"messages": [')
            time.sleep(0.05)
            sock.close()
        deadline = time.monotonic() + 10
        metrics = ""
        while time.monotonic() < deadline:
            metrics = httpx.get(base + "/metrics", timeout=10).text
            if 'cr2_serve_client_disconnects_total{reason="disconnect",route="/v1/chat/completions"} 5.0' in metrics:
                break
            time.sleep(0.1)
    finally:
        for lg in loggers:
            lg.removeHandler(seen)
        logging.getLogger("cr2_cli.serve").setLevel(old_level)
    assert 'cr2_serve_client_disconnects_total{reason="disconnect",route="/v1/chat/completions"} 5.0' in metrics, \
        [line for line in metrics.splitlines() if "disconnect" in line or "status=" in line]
    assert _errors_500(base) == before_500
    assert 'status="disconnected"' in metrics
    assert not [r for r in seen.records if r.exc_info or "Exception in ASGI" in r.getMessage()]
    lines = [r for r in seen.records if "client gone" in r.getMessage()]
    assert len(lines) == 5 and all("\n" not in r.getMessage() for r in lines)


# ------------------------------------------------------------------ fourth round: metrics, framing
def _series(text: str) -> set[str]:
    """The labelled series of a /metrics page (sample lines without their values)."""
    return {line.rsplit(" ", 1)[0] for line in text.splitlines() if line and not line.startswith("#")}


def test_p3_metric_series_stay_bounded_and_nothing_is_labelled_before_authentication():
    """Before: random 8 KB method names grew /metrics without bound, and requests refused with 401 (no token) added
    series too. Now methods, paths and models outside closed sets are one label, and a request refused before it was
    authenticated adds to one unlabelled counter only."""
    auth = {"authorization": f"Bearer {TOKEN}"}
    with _server(token=TOKEN) as (base, _):
        with httpx.Client(base_url=base, timeout=10) as http:
            assert http.post("/route", json={"query": "q", "lam": 1.0}, headers=auth).status_code == 200
            http.get("/metrics", headers=auth)  # its own series (route /metrics) exist from now on
            first = http.get("/metrics", headers=auth).text
            for i in range(30):  # without the token: 401 before anything else is looked at (a refused POST closes
                method = f"M{i}" + "X" * 4000  # its connection: each on a new one)
                assert httpx.request(method, f"{base}/nowhere/{i}", timeout=10).status_code == 401
                assert httpx.post(f"{base}/route?{i}", json={"query": "q", "lam": 1.0}, timeout=10).status_code == 401
            unauthenticated = http.get("/metrics", headers=auth).text
            for i in range(30):  # with the token: every method and path outside the closed sets is "other"
                assert http.request(f"M{i}" + "X" * 4000, f"/nowhere/{i}", headers=auth).status_code in (404, 405)
            authenticated = http.get("/metrics", headers=auth).text
    assert "XXXX" not in authenticated and "/nowhere" not in authenticated
    assert _series(unauthenticated) == _series(first)  # 60 refusals, not one new series
    assert "cr2_serve_unauthenticated_requests_total 60.0" in unauthenticated
    new = _series(authenticated) - _series(unauthenticated)  # route "other" (and method "other"): once, not 30 times
    assert new and all('route="other"' in s and ("method=" not in s or 'method="other"' in s) for s in new), sorted(new)
    assert len(new) < 30, sorted(new)
    assert len(authenticated) < len(first) + 4000


def test_p16_a_request_with_content_length_and_transfer_encoding_closes_its_connection(server):
    """RFC 9112 §6.1: such a request's framing is ambiguous (request smuggling); it is answered and its connection
    closed. Before: answered and kept open, so the pipelined request behind it was answered too."""
    base, _ = server
    body = b'{"query": "q", "lam": 1.0}'
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    pipelined = b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n"
    sock = _raw(base, "POST /route HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                      f"content-length: {len(chunked)}\r\ntransfer-encoding: chunked\r\n", chunked + pipelined)
    try:
        data, closed_s = read_until_closed(sock, limit_s=5.0)
    finally:
        sock.close()
    assert data.startswith(b"HTTP/1.1 200"), data[:300]
    assert data.count(b"HTTP/1.1 ") == 1 and b"connection: close" in data.lower(), data[:600]
    assert closed_s < 5.0
    with socket.create_connection(tuple(base.removeprefix("http://").split(":")[:1]) + (int(base.rsplit(":", 1)[1]),),
                                  timeout=5) as plain:  # an ordinary request keeps its connection
        plain.sendall(b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n" * 2)
        data, _ = read_until_closed(plain, limit_s=1.0)
    assert data.count(b"HTTP/1.1 200") == 2
