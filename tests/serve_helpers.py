"""Helpers for the HTTP tests: run an ASGI app on 127.0.0.1 in a background thread; a fake model endpoint."""
from __future__ import annotations

import contextlib
import json
import socket
import threading
import time

from fastapi import FastAPI, Request  # module level: FastAPI resolves the handler's string annotations here


def free_port() -> int:
    with contextlib.closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(app, port: int | None = None, serving=None):
    """Serve `app` with uvicorn on 127.0.0.1 until the block ends; yields its base URL.

    `serving`: a config's serving section — run with `cr2 serve`'s own uvicorn configuration (header-read timeout)."""
    import uvicorn

    port = port or free_port()
    if serving is not None:
        from cr2_cli.serve import server_config

        config = server_config(app, serving, port=port, timeout_graceful_shutdown=2)
    else:
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        if time.time() > deadline:
            raise RuntimeError("test server did not start")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def fake_model_endpoint(model_name: str, seen: list | None = None, fail: bool = False):
    """A tiny OpenAI-compatible chat endpoint that answers 'answer from <model_name>' and echoes the model field.

    `seen` collects (headers, body, client port) of every request; `stream: true` answers as server-sent events
    (three chunks and [DONE]); `fail` answers 500."""
    from fastapi.responses import JSONResponse, StreamingResponse

    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        if seen is not None:
            seen.append({"headers": dict(request.headers), "body": body, "port": request.client.port})
        if fail:
            return JSONResponse(status_code=500, content={"error": "upstream broke"})
        if body.get("stream"):
            async def events():
                for word in ("answer", "from", model_name):
                    chunk = {"object": "chat.completion.chunk", "model": body.get("model"),
                             "choices": [{"index": 0, "delta": {"content": word + " "}}]}
                    yield f"data: {json.dumps(chunk)}\n\n".encode()
                yield b"data: [DONE]\n\n"

            return StreamingResponse(events(), media_type="text/event-stream")
        return {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": body.get("model"),
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": f"answer from {model_name}"}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}}

    return app


def read_until_closed(sock: socket.socket, limit_s: float, keep: int | None = None,
                      reset_closes: bool = False) -> tuple[bytes, float]:
    """What the server sends on `sock` until it closes the connection (the first `keep` bytes where given), and when
    it closed (s), or inf after limit_s. reset_closes: a connection reset (an aborted answer) counts as closed."""
    t0, data = time.monotonic(), b""
    sock.settimeout(0.2)
    while time.monotonic() - t0 < limit_s:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        except ConnectionResetError:
            if not reset_closes:
                raise
            return data, time.monotonic() - t0
        if not chunk:
            return data, time.monotonic() - t0
        data = data + chunk if keep is None else (data + chunk)[:keep]
    return data, float("inf")
