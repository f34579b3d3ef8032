"""A fault-injecting OpenAI-compatible upstream for the `cr2 serve` tests.

A raw ASGI app (no framework between the test and the bytes on the wire): POST …/chat/completions answers
according to the request body's `fault` field, which `cr2 serve` forwards unchanged, so concurrent requests
can each pick their own fault. Modes:

| mode | what the upstream does |
|---|---|
| ok | a chat completion (JSON), or three SSE chunks and [DONE] when `stream` is true |
| slow_headers | waits STALL_S before sending anything (cr2's read timeout fires first) |
| stall_body | sends the status and headers and half a JSON body (or one SSE chunk when streaming), then stalls |
| error_500 | 500 whose body names an internal file path and reflects every request header |
| reflect | 400 whose body reflects every request header (the upstream key included) |
| malformed | 200 application/json that is not JSON |
| html | 200 text/html (a proxy's error page) |
| deep | 200 JSON whose `choices` nest 50,000 levels |
| gzip_sse | SSE compressed with Content-Encoding: gzip (what cr2 asked for with Accept-Encoding) |
| huge | 200 answer (JSON, or SSE when streaming) of HUGE_BYTES |
| endless | 200 SSE that never ends: 16 KiB chunks until the client (cr2) goes away, or STALL_S |
| bomb | 200 JSON with BOMB_KEYS keys beside its `choices` (a JSON bomb: cheap to send, costly to parse) |
| set_cookie | the ok answer with a `Set-Cookie` header (a session cookie no other client may get) |
| trickle | 200 (JSON, or SSE when streaming) whose body comes one byte every TRICKLE_S: never idle, never done |
| backtrack | 200 JSON of BACKTRACK_BODY: an unterminated string of escaped quotes, then 100,000 commas |

"down" is not a mode of this app: point an endpoint at a closed port (`closed_port()`).
A stall ends when the client (cr2) disconnects, or after STALL_S, so a test's teardown never waits long.
"""
from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket

MODES = ("ok", "slow_headers", "stall_body", "error_500", "reflect", "malformed", "html", "deep", "gzip_sse", "huge",
         "backtrack")
SECRET_PATH = "/srv/internal/upstream/secret_handler.py"  # what an upstream's error page might reveal
STALL_S = 5.0
HUGE_BYTES = 256 * 1024
BOMB_KEYS = 300_000
COOKIE = "upstream-session=s3cr3t-of-another-client"
TRICKLE_S = 0.2  # the gap between a trickling answer's bytes: shorter than the tests' timeout_s, so never idle
# 104 KB that a backtracking scan for JSON strings takes seconds over (a string opens, its escapes never close it)
BACKTRACK_BODY = b'"' + b'\\"' * 2000 + b"," * 100_000


def closed_port() -> int:
    """A loopback port nothing listens on (connections are refused): an upstream that is down."""
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _completion(model: str, content: str) -> dict:
    return {"id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def _sse(model: str, words=("answer", "from", "fault-upstream")) -> list[bytes]:
    out = []
    for w in words:
        chunk = {"object": "chat.completion.chunk", "model": model, "choices": [{"index": 0, "delta": {"content": w + " "}}]}
        out.append(f"data: {json.dumps(chunk)}\n\n".encode())
    out.append(b"data: [DONE]\n\n")
    return out


class FaultUpstream:
    """The ASGI app; `seen` records (mode, headers) of every request it received."""

    def __init__(self):
        self.seen: list[tuple[str, dict]] = []

    async def __call__(self, scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                msg = await receive()
                if msg["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif msg["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if not msg.get("more_body"):
                break
        try:
            req = json.loads(body or b"{}")
        except ValueError:
            req = {}
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        mode = req.get("fault", "ok")
        self.seen.append((mode, headers))
        model, stream = str(req.get("model")), bool(req.get("stream"))

        async def start(status: int, ctype: str, extra: list | None = None, length: int | None = None):
            h = [(b"content-type", ctype.encode())] + (extra or [])
            if length is not None:
                h.append((b"content-length", str(length).encode()))
            await send({"type": "http.response.start", "status": status, "headers": h})

        async def body_(data: bytes, more: bool = False):
            await send({"type": "http.response.body", "body": data, "more_body": more})

        async def stall():  # until the client goes away (cr2 timed out) or STALL_S
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                async with asyncio.timeout(STALL_S):
                    while (await receive())["type"] != "http.disconnect":
                        pass

        gone = asyncio.Event()

        async def watch():  # sets `gone` when the client (cr2) goes away
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()

        if mode == "slow_headers":
            await stall()
            return
        if mode == "trickle":
            if stream:
                await start(200, "text/event-stream")
                await body_(_sse(model)[0], more=True)
                data = b"\n" * int(STALL_S / TRICKLE_S + 2)
            else:
                data = json.dumps(_completion(model, "t" * int(STALL_S / TRICKLE_S))).encode()
                await start(200, "application/json", length=len(data))
            watcher = asyncio.create_task(watch())
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                async with asyncio.timeout(STALL_S):
                    for i in range(len(data)):
                        if gone.is_set():
                            break
                        await body_(data[i : i + 1], more=True)
                        await asyncio.sleep(TRICKLE_S)
            watcher.cancel()
            return
        if mode == "backtrack":
            await start(200, "application/json", length=len(BACKTRACK_BODY))
            await body_(BACKTRACK_BODY)
            return
        if mode == "endless":
            await start(200, "text/event-stream")
            chunk = _sse(model, ("y" * 16_000,))[0]
            watcher = asyncio.create_task(watch())
            with contextlib.suppress(asyncio.TimeoutError, TimeoutError):
                async with asyncio.timeout(STALL_S):  # a send blocked on a reader that left still ends
                    while not gone.is_set():
                        await body_(chunk, more=True)
                        await asyncio.sleep(0)  # a send to a closed connection returns at once: let the loop run
            watcher.cancel()
            return
        if mode == "bomb":
            data = (b'{"choices": [], ' + b", ".join(b'"k%d": 0' % i for i in range(BOMB_KEYS)) + b"}")
            await start(200, "application/json", length=len(data))
            await body_(data)
            return
        if mode == "stall_body":
            if stream:
                await start(200, "text/event-stream")
                await body_(_sse(model)[0], more=True)
            else:
                full = json.dumps(_completion(model, "never finished")).encode()
                await start(200, "application/json", length=len(full))
                await body_(full[: len(full) // 2], more=True)
            await stall()
            return
        if mode in ("error_500", "reflect"):
            status = 500 if mode == "error_500" else 400
            page = {"error": f"Traceback (most recent call last): File \"{SECRET_PATH}\", line 7",
                    "request_headers": headers}
            data = json.dumps(page).encode()
            await start(status, "application/json", length=len(data))
            await body_(data)
            return
        if mode == "malformed":
            data = b'{"choices": [{"message": '
            await start(200, "application/json", length=len(data))
            await body_(data)
            return
        if mode == "html":
            data = b"<html><body><h1>502 Bad Gateway</h1><p>nginx at " + SECRET_PATH.encode() + b"</p></body></html>"
            await start(200, "text/html; charset=utf-8", length=len(data))
            await body_(data)
            return
        if mode == "deep":
            depth = 50_000  # far beyond the recursion limit, within the tests' max_response_bytes
            data = b'{"choices": ' + b"[" * depth + b"]" * depth + b"}"
            await start(200, "application/json", length=len(data))
            await body_(data)
            return
        if mode == "gzip_sse":
            data = gzip.compress(b"".join(_sse(model)))
            await start(200, "text/event-stream", [(b"content-encoding", b"gzip")], length=len(data))
            await body_(data)
            return
        if mode == "huge":
            if stream:
                await start(200, "text/event-stream")
                chunk = _sse(model, ("x" * 4000,))[0]
                for _ in range(HUGE_BYTES // len(chunk) + 2):
                    await body_(chunk, more=True)
                await body_(b"data: [DONE]\n\n")
            else:
                data = json.dumps(_completion(model, "x" * HUGE_BYTES)).encode()
                await start(200, "application/json", length=len(data))
                await body_(data)
            return
        # ok (set_cookie: with a session cookie)
        cookie = [(b"set-cookie", COOKIE.encode() + b"; Path=/")] if mode == "set_cookie" else []
        if stream:
            await start(200, "text/event-stream")
            for chunk in _sse(model):
                await body_(chunk, more=True)
            await body_(b"")
        else:
            data = json.dumps(_completion(model, "answer from fault-upstream")).encode()
            await start(200, "application/json", cookie, length=len(data))
            await body_(data)
