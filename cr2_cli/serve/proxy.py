"""`cr2 serve`'s proxy layer: forward a routed chat request to the chosen model's OpenAI-compatible endpoint.

`forward_chat` sends the request (model name from `serving.served_names` or the model's hf_name, the upstream
key from `serving.api_key_env` only — client credentials are never forwarded) and returns the answer unchanged,
streamed when asked, with the decision in the X-CR2-Decision header.

Bad upstreams: an unreachable endpoint, an error status, a 200 that is not a JSON chat completion
(malformed, HTML, nested too deep, more than MAX_JSON_VALUES values: parsed in a worker thread, the budget counted
before parsing) or an answer over `serving.max_response_bytes` → 502; 429 → 503 with Retry-After. The message names
the model and its config key, never the endpoint URL (it may hold credentials) nor the upstream's body (it may reflect
request headers, the upstream key included). Answers are decompressed before they are passed on.

Deadlines, on the whole answer and not on each read (an upstream sending a byte every second would otherwise hold a
request, and its slot, for as long as it likes):
- a non-streamed answer must be complete — status, headers and the last byte of its body — within
  `serving.timeout_s` of the request being sent, else 504;
- a streamed answer must send its status and headers within `serving.timeout_s`, may pause at most
  `serving.timeout_s` between bytes (the HTTP client's read timeout), and must end within `serving.stream_timeout_s`
  of the request being sent; a stream that breaks one of these, breaks off, or grows past max_response_bytes after
  its headers were sent ends with an SSE `error` event.
The request's concurrency slot (`SlotRelease`) is released on every path (error, deadline, client disconnect).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from typing import Any

from fastapi.responses import StreamingResponse

from cr2_cli.serve.security import HttpError, TooManyJsonValues, parse_bounded_json

log = logging.getLogger("cr2_cli.serve")


def upstream_client(serving: Any) -> Any:
    """The one upstream HTTP client shared by all requests (timeouts and pool limits from `serving`).

    It keeps no cookies: its jar refuses every cookie, so a `Set-Cookie` in one upstream's answer to one client is
    never sent with another client's request, to that upstream or any other (the client is shared by all)."""
    from http.cookiejar import CookieJar, DefaultCookiePolicy

    import httpx

    return httpx.AsyncClient(timeout=httpx.Timeout(serving.timeout_s, connect=serving.connect_timeout_s),
                             limits=httpx.Limits(max_connections=4 * serving.max_concurrency,
                                                 max_keepalive_connections=serving.max_concurrency),
                             cookies=CookieJar(policy=DefaultCookiePolicy(allowed_domains=[])))


def version_header(decision: dict) -> dict[str, str]:
    """X-CR2-Thresholds-Version: the threshold-table version that decided (absent for a router without one)."""
    version = decision.get("thresholds_version")
    return {} if version is None else {"x-cr2-thresholds-version": str(version)}


async def forward_chat(client: Any, config: Any, body: dict, decision: dict, lam: float, stream: bool,
                       free: "SlotRelease", metrics: Any = None) -> Any:
    """The chosen model's answer to `body` (or the 502 / 503 / 504 saying why there is none).

    `free` releases the request's slot; a streamed answer takes it over (`free.handed_over`) and releases it when
    the stream ends. `metrics` (cr2_cli.serve.metrics.ServeMetrics or None) counts upstream errors and latency."""
    import httpx
    from fastapi.responses import JSONResponse, Response

    serving = config.serving
    model_id = decision["chosen_model"]
    base = serving.endpoints.get(model_id)
    if not base:
        return JSONResponse(status_code=503, content={
            "detail": f"no endpoint for '{model_id}': set serving.endpoints.{model_id} in the config",
            "decision": decision})
    spec = next(m for m in config.models if m.id == model_id)
    upstream = {**body, "model": serving.served_names.get(model_id, spec.hf_name)}
    headers = {"content-type": "application/json"}
    if serving.api_key_env and os.environ.get(serving.api_key_env):
        headers["authorization"] = f"Bearer {os.environ[serving.api_key_env]}"
    summary = (f"{'accept' if decision['accept_local'] else 'defer'}; model={model_id}; "
               f"score={decision['score']:.6f}; tau={decision['tau']}; lam={lam:g}; alpha={decision['alpha']:g}; "
               f"risk={decision.get('risk')}" + (f"; router={decision['router']}" if decision.get("router") else ""))
    out_headers = {"x-cr2-decision": summary, **version_header(decision)}
    t0 = time.perf_counter()

    def failed(status: int, what: str, kind: str, retry_after: bool = False) -> Any:
        # names the model and its config key only: the URL may hold credentials, the upstream's body
        # may reflect our request headers (the upstream key); details stay in this server's log
        log.warning("upstream of model '%s' %s", model_id, what)
        if metrics is not None:
            metrics.upstream_done(model_id, kind, time.perf_counter() - t0)
        extra = {"retry-after": "1"} if retry_after else {}
        return JSONResponse(status_code=status, headers={**out_headers, **extra}, content={
            "detail": f"the endpoint of '{model_id}' (serving.endpoints.{model_id}) {what}",
            "decision": decision})

    url = base.rstrip("/") + "/chat/completions"
    resp = None
    stream_deadline = asyncio.get_running_loop().time() + serving.stream_timeout_s
    try:
        async with asyncio.timeout(serving.timeout_s):  # the whole answer, or a stream's status and headers
            resp = await client.send(client.build_request("POST", url, json=upstream, headers=headers), stream=True)
            if resp.status_code == 429:
                return failed(503, "is rate-limited (HTTP 429); retry shortly", "rate_limited", retry_after=True)
            if not 200 <= resp.status_code < 300:
                return failed(502, f"answered {resp.status_code}; its body is not passed on", "status")
            media = resp.headers.get("content-type", "application/json")
            if stream and media.split(";", 1)[0].strip().lower() == "text/event-stream":
                free.handed_over = True  # the relay releases the slot when the stream ends, however it ends
                if metrics is not None:
                    metrics.upstream_done(model_id, "ok", time.perf_counter() - t0)  # time to the stream's headers
                return RelayResponse(relay(resp, free, serving.max_response_bytes, model_id, metrics,
                                           stream_deadline, serving.stream_timeout_s),
                                     on_close=lambda: close(resp, free), status_code=resp.status_code,
                                     media_type="text/event-stream", headers=out_headers)
            content = await read_bounded(resp, serving.max_response_bytes)
    except TooLarge:
        return failed(502, f"answered more than {serving.max_response_bytes:,} bytes (serving.max_response_bytes)",
                      "too_large")
    except (httpx.TimeoutException, TimeoutError) as exc:  # TimeoutError: the deadline on the whole answer
        return failed(504, f"did not {'finish its answer' if isinstance(exc, TimeoutError) else 'answer'} within "
                           f"serving.timeout_s = {serving.timeout_s:g} s ({type(exc).__name__})", "timeout")
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        return failed(502, f"failed ({type(exc).__name__})", "connection")
    finally:
        if resp is not None and not free.handed_over:
            await resp.aclose()
    from starlette.concurrency import run_in_threadpool

    try:  # in a worker thread: a large answer costs that thread, not the event loop
        answer = await run_in_threadpool(parse_bounded_json, content)
    except TooManyJsonValues as exc:
        return failed(502, f"answered {resp.status_code} with JSON that {exc}", "malformed")
    except ValueError as exc:
        return failed(502, f"answered {resp.status_code} with a body that is not JSON "
                           f"({'nested too deep' if 'nested' in str(exc) else 'malformed, or HTML'})", "malformed")
    if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
        return failed(502, f"answered {resp.status_code} with JSON that is not a chat completion "
                           "(no 'choices' list)", "malformed")
    if metrics is not None:
        metrics.upstream_done(model_id, "ok", time.perf_counter() - t0)
    return Response(content=content, status_code=resp.status_code, media_type="application/json", headers=out_headers)


def last_user_text(messages: Any) -> str:
    """The text of the last user message (a string, or the text parts of a content list), or a 422."""
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise HttpError(422, "messages must be a list of message objects")
    user = [m for m in messages if m.get("role") == "user"]
    content = user[-1].get("content") if user else None
    if isinstance(content, list):
        content = "\n".join(p["text"] for p in content
                            if isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str))
    if not isinstance(content, str) or not content.strip():
        raise HttpError(422, "messages must contain a user message with text content (the query that is routed)")
    return content


class TooLarge(Exception):
    """An upstream answer over serving.max_response_bytes."""


class SlotRelease:
    """Releases one concurrency slot exactly once, from whichever cleanup path runs first."""

    def __init__(self, slots: Any):  # an asyncio.Semaphore
        self.slots, self.done, self.handed_over = slots, False, False

    def __call__(self) -> None:
        if not self.done:
            self.done = True
            self.slots.release()


async def read_bounded(resp: Any, limit: int) -> bytes:
    """The (decompressed) body of an upstream answer, or TooLarge past `limit` bytes."""
    chunks, size = [], 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise TooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


async def close(resp: Any, free: SlotRelease) -> None:
    """Release the slot first (never lost to a cancellation), then close the upstream answer, shielded."""
    import anyio

    free()
    with anyio.CancelScope(shield=True):
        with contextlib.suppress(Exception):
            await resp.aclose()


async def relay(resp: Any, free: SlotRelease, limit: int, model_id: str, metrics: Any = None,
                deadline: float | None = None, total_s: float | None = None):
    """The upstream's server-sent events, decompressed, until the stream ends or the event-loop time `deadline`
    (`total_s` after the request was sent: serving.stream_timeout_s); passing the deadline, a pause longer than the
    client's read timeout, a broken connection or an answer over `limit` bytes ends the stream with an SSE error
    event instead of an exception (F1)."""
    import httpx

    size = 0
    chunks = resp.aiter_bytes()
    try:
        while True:
            try:  # the deadline covers waiting for the upstream only, never a send to the client
                async with asyncio.timeout_at(deadline):
                    chunk = await anext(chunks)
            except StopAsyncIteration:
                break
            size += len(chunk)
            if size > limit:
                raise TooLarge()
            yield chunk
    except (httpx.HTTPError, TooLarge, TimeoutError) as exc:
        if isinstance(exc, TooLarge):
            what, kind = f"answered more than {limit:,} bytes (serving.max_response_bytes)", "too_large"
        elif isinstance(exc, TimeoutError):
            what, kind = f"did not finish its stream within serving.stream_timeout_s = {total_s:g} s", "stream_timeout"
        else:
            what, kind = f"broke off the stream ({type(exc).__name__})", "stream_broken"
        log.warning("upstream of model '%s' %s", model_id, what)
        if metrics is not None:
            metrics.upstream_error(model_id, kind)
        error = {"error": {"message": f"the endpoint of '{model_id}' (serving.endpoints.{model_id}) {what}",
                           "type": "upstream_error", "code": 502}}
        yield b"\n\ndata: " + json.dumps(error).encode() + b"\n\n"
    finally:
        await close(resp, free)


class RelayResponse(StreamingResponse):
    """A StreamingResponse that runs `on_close` however the response ends (done, error, client gone)."""

    def __init__(self, content, *, on_close, **kwargs):
        super().__init__(content, **kwargs)
        self.on_close = on_close

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.on_close()

