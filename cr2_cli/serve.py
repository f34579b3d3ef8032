"""`cr2 serve`: the deployed CR² router behind HTTP.

    GET  /health                 → status, gate fingerprint, threshold version, state distribution, grids
    POST /route                  → {query, choices?, lam | target_accuracy | budget, alpha?, distance_m?, benchmark?,
                                   seed?} → the decision
                                   (accept/defer, score, τ*, chosen model, every model's p, cost and utility)
    POST /v1/chat/completions    → OpenAI-compatible: routes the last user message (λ, α from the request's
                                   extra fields `cr2_lam` / `cr2_alpha` or the X-CR2-Lambda / X-CR2-Alpha
                                   headers), forwards the request to the chosen model's endpoint
                                   (config `serving.endpoints`) and returns its answer unchanged — streamed
                                   when the request says `stream: true` — with the decision in the
                                   X-CR2-Decision header: existing OpenAI clients work as is.

Safe by default (docs/operations.md, "Exposing cr2 serve"):
- it binds to loopback; binding beyond it needs a bearer token ($CR2_SERVE_TOKEN, `serving.token_env`),
  and once a token is set every request must carry `Authorization: Bearer <token>` (else 401);
- the Host header must name the server (loopback names, the bound address, `serving.allowed_hosts`):
  a DNS-rebinding page gets 400; a browser Origin other than the server's own (or
  `serving.allowed_origins`) gets 403, and a POST must be `application/json` (415), so a cross-site
  form or text/plain POST cannot spend the upstream API key;
- bodies over `serving.max_body_bytes` and routed texts over `serving.max_prompt_chars` get 413;
- at most `serving.max_concurrency` requests are decided or forwarded at once, the rest wait up to
  `serving.queue_timeout_s` and then get 503 with Retry-After; decisions run in worker threads, so
  /health answers while a decision runs; one upstream HTTP client with timeouts is shared by all requests.

Every bad value is a 4xx naming the field and the problem: malformed JSON, JSON nested deeper than
MAX_JSON_DEPTH, NaN / Infinity / 1e400, a blank query, a wrong type → 422; an off-grid λ → 400 naming the
calibrated grid; an unconfigured endpoint → 503 naming the config key. Client credentials are never
forwarded; the upstream key comes from `serving.api_key_env` only.

Bad upstreams (issue 28): an unreachable endpoint, an error status, a 200 that is not a JSON chat completion
(malformed, HTML, nested too deep) or an answer over `serving.max_response_bytes` → 502; an endpoint that
does not answer within `serving.timeout_s` → 504; 429 → 503 with Retry-After. The message names the model
and its config key, never the endpoint URL (it may hold credentials) nor the upstream's body (it may reflect
request headers, the upstream key included). Answers are decompressed before they are passed on. A stream
that breaks after its headers were sent ends with an SSE `error` event. Every request's slot is released on
every path (error, timeout, client disconnect). A client that has not sent its request headers within
`serving.header_timeout_s` is disconnected (HeaderTimeoutH11Protocol).
"""
from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import logging
import math
import os
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI, Request  # module level: FastAPI resolves the handlers' (string) annotations here
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, ValidationError, field_validator, model_validator

from cr2.channel import MAX_DISTANCE_M
from cr2.config import Config
from cr2.errors import ConfigError, Cr2Error, DataValidationError, UncalibratedOperatingPointError

log = logging.getLogger(__name__)

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
MAX_JSON_DEPTH = 64  # nesting of objects / arrays accepted in any JSON the server reads (requests, upstream answers)


class RouteRequest(BaseModel):
    """POST /route body."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, description="the query text")
    choices: list[str] | None = Field(None, max_length=26, description="multiple-choice options, in A, B, … order")
    lam: FiniteFloat | None = Field(None, gt=0, description="cost weight λ (on the calibrated grid); or give a target")
    target_accuracy: FiniteFloat | None = Field(None, gt=0, lt=1, description="instead of λ: the cheapest (λ, α) "
                                                "certified to reach this accuracy (docs/guarantees.md)")
    budget: FiniteFloat | None = Field(None, gt=0, description="instead of λ: the most accurate (λ, α) certified to "
                                       "keep the mean normalised cost ≤ budget")
    alpha: FiniteFloat | None = Field(None, gt=0, lt=1, description="risk level α (default: grids.default_alpha)")
    distance_m: FiniteFloat | None = Field(None, gt=0, le=MAX_DISTANCE_M, description="UE–edge distance, m (mean "
                                           "fading); default: sampled")
    benchmark: str = Field("mmlu", description="benchmark whose default output length is assumed")
    seed: int = Field(0, ge=0, lt=2 ** 63, description="seed of the sampled channel state")

    @field_validator("lam", "target_accuracy", "budget", "alpha", "distance_m", "seed", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):  # JSON true/false would pass as 1/0
            raise ValueError("must be a number, not true/false")
        return value

    @model_validator(mode="after")
    def _one_operating_point(self) -> "RouteRequest":
        given = [k for k in ("lam", "target_accuracy", "budget") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of lam, target_accuracy, budget (got {', '.join(given) or 'none'})")
        return self


# POST /v1/chat/completions body as /openapi.json documents it (any other OpenAI field is passed on upstream)
CHAT_SCHEMA = {
    "type": "object", "required": ["messages"], "additionalProperties": True,
    "properties": {
        "model": {"type": "string", "description": "ignored: cr2 picks the model"},
        "messages": {"type": "array", "minItems": 1, "items": {
            "type": "object", "required": ["role", "content"], "additionalProperties": True,
            "properties": {"role": {"type": "string", "enum": ["system", "user", "assistant"]},
                           "content": {"type": "string"}}}},
        "stream": {"type": "boolean"},
        "cr2_lam": {"type": "number", "exclusiveMinimum": 0, "description": "cost weight λ (on the calibrated grid)"},
        "cr2_alpha": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1, "description": "risk level α"},
    },
}


def _json_body(schema: dict) -> dict:
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


class HttpError(Exception):
    """A request problem answered with `status` and a JSON {"detail": …}."""

    def __init__(self, status: int, detail: Any, headers: dict[str, str] | None = None):
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers or {}


def _jsonable(value: Any) -> Any:
    """JSON has no infinities: τ* = +inf (accept nothing) / −inf (accept all) travel as the strings "inf" / "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def is_loopback(host: str) -> bool:
    """True for localhost and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(value: str) -> str:
    """The host part of a Host header value ("127.0.0.1:8080" → "127.0.0.1", "[::1]:80" → "::1"), lower-cased."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number; send a finite number")


def _json_depth_exceeds(value: Any, limit: int) -> bool:
    """True when `value` nests objects / arrays deeper than `limit` (iterative: no recursion on hostile input)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        if depth > limit:
            return True
        stack.extend((v, depth + 1) for v in item if isinstance(v, (dict, list)))
    return False


def parse_bounded_json(raw: bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict, bounded JSON: NaN / Infinity literals and nesting deeper than `max_depth` are ValueErrors.

    The size is bounded by the caller (it reads at most max_body_bytes / max_response_bytes); Python's json
    raises RecursionError for very deep input, turned into the same ValueError here."""
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth} levels") from None
    if _json_depth_exceeds(value, max_depth):
        raise ValueError(f"nested deeper than {max_depth} levels")
    return value


def _parse_json(raw: bytes) -> Any:
    """The request body as strict, bounded JSON, or a 422 (NaN / Infinity literals, nesting > MAX_JSON_DEPTH)."""
    try:
        return parse_bounded_json(raw)
    except ValueError as exc:  # JSONDecodeError is a ValueError; so are the NaN/Infinity and depth refusals
        raise HttpError(422, f"the request body is not valid JSON: {exc}") from None


def _number(value: Any, name: str, low: float, high: float | None = None) -> float:
    """A finite number low < value (< high), or a 422 naming the field; strings (from headers) are parsed."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise HttpError(422, f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise HttpError(422, f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value):
        raise HttpError(422, f"{name} must be finite, got {value}")
    if not value > low or (high is not None and not value < high):
        bound = f"> {low:g}" if high is None else f"in ({low:g}, {high:g})"
        raise HttpError(422, f"{name} must be {bound}, got {value:g}")
    return value


def _validation_detail(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors())


def _cr2_status(exc: Cr2Error) -> int:
    if isinstance(exc, DataValidationError):
        return 422
    return 400  # off-grid λ, unknown names, …


class Guard:
    """ASGI middleware: Host, Origin, bearer token, JSON content type and declared body size, before any handler."""

    def __init__(self, app, *, token: str | None, hosts: set[str], origins: set[str], max_body_bytes: int):
        self.app, self.token, self.hosts, self.origins = app, token, hosts, origins
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        problem = self._check(scope, headers)
        if problem is not None:
            return await _send_json(send, problem.status, {"detail": problem.detail}, problem.headers)
        return await self.app(scope, receive, send)

    def _check(self, scope, headers: dict[str, str]) -> HttpError | None:
        host = headers.get("host", "")
        if "*" not in self.hosts and _host_name(host) not in self.hosts:
            return HttpError(400, f"Host {host!r} is not served here; add it to serving.allowed_hosts if it names "
                                  "this server")
        origin = headers.get("origin")
        if origin is not None and origin not in self.origins:
            parts = urlsplit(origin)
            if parts.scheme not in ("http", "https") or parts.netloc.lower() != host.lower():
                return HttpError(403, f"requests from the browser origin {origin!r} are not allowed; add it to "
                                      "serving.allowed_origins to allow it")
        if self.token is not None:
            given = headers.get("authorization", "")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), self.token.encode()):
                return HttpError(401, "missing or wrong bearer token (Authorization: Bearer <token>)",
                                 {"www-authenticate": "Bearer"})
        if scope["method"] == "POST":
            ctype = headers.get("content-type", "").split(";", 1)[0].strip().lower()
            if ctype != "application/json":
                return HttpError(415, f"POST bodies must be application/json, got {ctype or 'no content type'!r}")
            length = headers.get("content-length")
            if length is not None and (not length.isdigit() or int(length) > self.max_body_bytes):
                return HttpError(413, f"the request body has {length} bytes; the limit is {self.max_body_bytes:,} "
                                      "(serving.max_body_bytes)")
        return None


async def _send_json(send, status: int, content: Any, headers: dict[str, str] | None = None) -> None:
    body = json.dumps(content).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def _read_body(request: Request, limit: int) -> bytes:
    """The request body, or 413 as soon as it exceeds `limit` bytes (chunked bodies have no Content-Length)."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HttpError(413, f"the request body exceeds {limit:,} bytes (serving.max_body_bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def allowed_hosts(config: Config, bind_host: str) -> set[str]:
    """Host names the server answers to: loopback names, the bound address (unless a wildcard), the configured ones."""
    hosts = set(LOOPBACK_NAMES) | {h.lower() for h in config.serving.allowed_hosts}
    if bind_host not in ("0.0.0.0", "::", ""):
        hosts.add(_host_name(bind_host))
    return hosts


def create_app(config: Config, home: str, *, router: Any = None, token: str | None = None,
               bind_host: str = "127.0.0.1") -> Any:
    """The FastAPI application serving the router loaded from `home` (artefacts are loaded once, here).

    `router`: an object with route(...) and describe() (default: the deployed OnlineRouter of `home`);
    `token`: the bearer token every request must carry (None: none, allowed only on loopback)."""
    import httpx
    from fastapi.responses import JSONResponse, Response
    from starlette.concurrency import run_in_threadpool

    from cr2.deployment import check_route_inputs

    serving = config.serving
    if token is not None and not token.strip():
        raise ConfigError(f"the bearer token (${serving.token_env}) is empty; set a long random value or unset it")
    if token is None and not is_loopback(bind_host):
        raise ConfigError(f"binding to {bind_host} exposes the router (and the upstream API key) beyond this machine; "
                          f"set a bearer token in ${serving.token_env} first (e.g. `export {serving.token_env}=$(openssl "
                          "rand -hex 32)`), or bind to 127.0.0.1")
    if router is None:
        from cr2_cli.online import load_online_router

        router = load_online_router(config, home)
    batcher = None
    if serving.batch_max_size > 1:  # opt-in micro-batching of /route (cr2_cli/serve_batching.py)
        from cr2_cli.serve_batching import make_batcher

        batcher = make_batcher(router, serving.batch_max_size, serving.batch_max_wait_ms)
    slots = asyncio.Semaphore(serving.max_concurrency)
    state: dict[str, Any] = {}

    def upstream_client() -> httpx.AsyncClient:
        if state.get("client") is None:
            state["client"] = httpx.AsyncClient(
                timeout=httpx.Timeout(serving.timeout_s, connect=serving.connect_timeout_s),
                limits=httpx.Limits(max_connections=4 * serving.max_concurrency,
                                    max_keepalive_connections=serving.max_concurrency))
        return state["client"]

    @contextlib.asynccontextmanager
    async def lifespan(app_):
        upstream_client()
        try:
            yield
        finally:
            client = state.pop("client", None)
            if client is not None:
                await client.aclose()
            if batcher is not None:
                batcher.close()

    app = FastAPI(title="cr2", description="CR² cost-aware, risk-controlled device–edge routing", lifespan=lifespan)
    app.add_middleware(Guard, token=token, hosts=allowed_hosts(config, bind_host),
                       origins=set(serving.allowed_origins), max_body_bytes=serving.max_body_bytes)

    @app.exception_handler(HttpError)
    async def _http_error(request: Request, exc: HttpError):
        return JSONResponse(status_code=exc.status, content={"detail": exc.detail}, headers=exc.headers)

    @app.exception_handler(Cr2Error)
    async def _cr2_error(request: Request, exc: Cr2Error):
        return JSONResponse(status_code=_cr2_status(exc), content={"detail": str(exc)})

    async def acquire() -> None:
        try:
            async with asyncio.timeout(serving.queue_timeout_s):  # a cancelled wait never keeps a slot
                await slots.acquire()
        except (asyncio.TimeoutError, TimeoutError):
            raise HttpError(503, f"busy: {serving.max_concurrency} requests in progress (serving.max_concurrency); "
                                 "retry shortly", {"retry-after": "1"}) from None

    def check_length(query: str, choices: list[str] | None) -> None:
        n = len(query) + sum(len(c) for c in choices or [])
        if n > serving.max_prompt_chars:
            raise HttpError(413, f"the routed text has {n:,} characters; the limit is {serving.max_prompt_chars:,} "
                                 "(serving.max_prompt_chars)")

    async def decide(query: str, choices, lam: float, alpha: float | None, distance_m=None, benchmark="mmlu", seed=0):
        a = config.grids.default_alpha if alpha is None else alpha
        check_route_inputs(query, choices, lam, a, distance_m)  # a blank query is a 422, not a traceback
        check_length(query, choices)
        if batcher is not None:  # concurrent requests share one encoder call
            from cr2_cli.serve_batching import RouteCall

            out = await run_in_threadpool(batcher.submit, RouteCall(query, choices, lam, a, distance_m, benchmark, seed))
        else:
            out = await run_in_threadpool(router.route, query, choices, lam, a, distance_m, benchmark, seed)
        return _jsonable(out)

    async def decide_by_target(req: "RouteRequest"):
        """Issue 21: the operating point certified for the request's target (cached on the router), then route."""
        from cr2_cli.targets import route_by_target

        check_length(req.query, req.choices)
        out = await run_in_threadpool(route_by_target, config, home, req.query, req.choices, req.target_accuracy,
                                      req.budget, req.distance_m, req.benchmark, req.seed, router)
        return _jsonable(out)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", **router.describe()}

    # the handlers read their bodies themselves (bounded, strict); the schemas below document them in /docs and
    # /openapi.json, which the HTTP fuzz (tests/test_serve_fuzz.py) generates requests from
    @app.post("/route", openapi_extra=_json_body(RouteRequest.model_json_schema()))
    async def route(request: Request):
        raw = await _read_body(request, serving.max_body_bytes)
        try:
            req = RouteRequest.model_validate(_parse_json(raw))
        except ValidationError as exc:
            raise HttpError(422, _validation_detail(exc)) from None
        await acquire()
        try:
            if req.lam is None:
                return await decide_by_target(req)
            return await decide(req.query, req.choices, req.lam, req.alpha, req.distance_m, req.benchmark, req.seed)
        finally:
            slots.release()

    @app.post("/v1/chat/completions", openapi_extra=_json_body(CHAT_SCHEMA))
    async def chat(request: Request):
        body = _parse_json(await _read_body(request, serving.max_body_bytes))
        if not isinstance(body, dict):
            raise HttpError(422, "the request body must be a JSON object")
        query = _last_user_text(body.get("messages"))
        check_length(query, None)
        lam = (_number(body.pop("cr2_lam"), "cr2_lam", 0.0) if "cr2_lam" in body
               else _number(request.headers["x-cr2-lambda"], "X-CR2-Lambda", 0.0) if "x-cr2-lambda" in request.headers
               else serving.default_lam)
        alpha = (_number(body.pop("cr2_alpha"), "cr2_alpha", 0.0, 1.0) if "cr2_alpha" in body
                 else _number(request.headers["x-cr2-alpha"], "X-CR2-Alpha", 0.0, 1.0)
                 if "x-cr2-alpha" in request.headers else None)
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise HttpError(422, f"stream must be true or false, got {stream!r}")
        await acquire()
        free = _SlotRelease(slots)
        try:
            decision = await decide(query, None, lam, alpha)
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
                       f"risk={decision.get('risk')}")
            out_headers = {"x-cr2-decision": summary}

            def failed(status: int, what: str, retry_after: bool = False) -> Any:
                # names the model and its config key only: the URL may hold credentials, the upstream's body
                # may reflect our request headers (the upstream key); details stay in this server's log
                log.warning("upstream of model '%s' %s", model_id, what)
                extra = {"retry-after": "1"} if retry_after else {}
                return JSONResponse(status_code=status, headers={**out_headers, **extra}, content={
                    "detail": f"the endpoint of '{model_id}' (serving.endpoints.{model_id}) {what}",
                    "decision": decision})

            client = upstream_client()
            url = base.rstrip("/") + "/chat/completions"
            resp = None
            try:
                resp = await client.send(client.build_request("POST", url, json=upstream, headers=headers),
                                         stream=True)
                if resp.status_code == 429:
                    return failed(503, "is rate-limited (HTTP 429); retry shortly", retry_after=True)
                if not 200 <= resp.status_code < 300:
                    return failed(502, f"answered {resp.status_code}; its body is not passed on")
                media = resp.headers.get("content-type", "application/json")
                if stream and media.split(";", 1)[0].strip().lower() == "text/event-stream":
                    free.handed_over = True  # the relay releases the slot when the stream ends, however it ends
                    return _RelayResponse(_relay(resp, free, serving.max_response_bytes, model_id),
                                          on_close=lambda: _close(resp, free), status_code=resp.status_code,
                                          media_type="text/event-stream", headers=out_headers)
                content = await _read_bounded(resp, serving.max_response_bytes)
            except _TooLarge:
                return failed(502, f"answered more than {serving.max_response_bytes:,} bytes "
                                   "(serving.max_response_bytes)")
            except httpx.TimeoutException as exc:
                return failed(504, f"did not answer within serving.timeout_s = {serving.timeout_s:g} s "
                                   f"({type(exc).__name__})")
            except (httpx.HTTPError, httpx.InvalidURL) as exc:
                return failed(502, f"failed ({type(exc).__name__})")
            finally:
                if resp is not None and not free.handed_over:
                    await resp.aclose()
            try:
                answer = parse_bounded_json(content)
            except ValueError as exc:
                return failed(502, f"answered {resp.status_code} with a body that is not JSON "
                                   f"({'nested too deep' if 'nested' in str(exc) else 'malformed, or HTML'})")
            if not isinstance(answer, dict) or not isinstance(answer.get("choices"), list):
                return failed(502, f"answered {resp.status_code} with JSON that is not a chat completion "
                                   "(no 'choices' list)")
            return Response(content=content, status_code=resp.status_code, media_type="application/json",
                            headers=out_headers)
        finally:
            if not free.handed_over:
                free()

    return app


def _last_user_text(messages: Any) -> str:
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


class _TooLarge(Exception):
    """An upstream answer over serving.max_response_bytes."""


class _SlotRelease:
    """Releases one concurrency slot exactly once, from whichever cleanup path runs first."""

    def __init__(self, slots: asyncio.Semaphore):
        self.slots, self.done, self.handed_over = slots, False, False

    def __call__(self) -> None:
        if not self.done:
            self.done = True
            self.slots.release()


async def _read_bounded(resp: Any, limit: int) -> bytes:
    """The (decompressed) body of an upstream answer, or _TooLarge past `limit` bytes."""
    chunks, size = [], 0
    async for chunk in resp.aiter_bytes():
        size += len(chunk)
        if size > limit:
            raise _TooLarge()
        chunks.append(chunk)
    return b"".join(chunks)


async def _close(resp: Any, free: _SlotRelease) -> None:
    """Release the slot first (never lost to a cancellation), then close the upstream answer, shielded."""
    import anyio

    free()
    with anyio.CancelScope(shield=True):
        with contextlib.suppress(Exception):
            await resp.aclose()


async def _relay(resp: Any, free: _SlotRelease, limit: int, model_id: str):
    """The upstream's server-sent events, decompressed (issue 28, F5); a stall, a broken connection or an answer
    over `limit` bytes ends the stream with an SSE error event instead of an exception (F1)."""
    import httpx

    size = 0
    try:
        async for chunk in resp.aiter_bytes():
            size += len(chunk)
            if size > limit:
                raise _TooLarge()
            yield chunk
    except (httpx.HTTPError, _TooLarge) as exc:
        what = (f"answered more than {limit:,} bytes (serving.max_response_bytes)" if isinstance(exc, _TooLarge)
                else f"broke off the stream ({type(exc).__name__})")
        log.warning("upstream of model '%s' %s", model_id, what)
        error = {"error": {"message": f"the endpoint of '{model_id}' (serving.endpoints.{model_id}) {what}",
                           "type": "upstream_error", "code": 502}}
        yield b"\n\ndata: " + json.dumps(error).encode() + b"\n\n"
    finally:
        await _close(resp, free)


class _RelayResponse(StreamingResponse):
    """A StreamingResponse that runs `on_close` however the response ends (done, error, client gone)."""

    def __init__(self, content, *, on_close, **kwargs):
        super().__init__(content, **kwargs)
        self.on_close = on_close

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.on_close()


def bind_socket(host: str, port: int):
    """A listening-ready socket bound to (host, port), or a ConfigError naming the port (in use, not permitted)
    before anything says the server is serving."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does; a listening port still refuses
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; another process may use the port "
                          "(pick another with --port) or the address is not this machine's") from None
    sock.set_inheritable(True)
    return sock


def header_timeout_protocol(header_timeout_s: float):
    """uvicorn's h11 protocol with a header-read timeout: a connection that has not delivered a request's
    headers within `header_timeout_s` of opening (or of the previous response) is closed (slow-header clients
    cannot hold connections open)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutH11Protocol(H11Protocol):
        _header_timer = None

        def _arm_header_timer(self) -> None:
            self._cancel_header_timer()
            self._header_timer = self.loop.call_later(header_timeout_s, self._header_timeout)

        def _cancel_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _header_timeout(self) -> None:
            self._header_timer = None
            waiting = self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete)
            if waiting and not self.transport.is_closing():
                log.info("closed a connection that sent no complete request headers within %g s", header_timeout_s)
                self.transport.close()

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the request's headers are in
                self._cancel_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:  # the next request's headers
                self._arm_header_timer()

        def connection_lost(self, exc) -> None:
            self._cancel_header_timer()
            super().connection_lost(exc)

    return HeaderTimeoutH11Protocol


def server_config(app: Any, serving: Any, host: str = "127.0.0.1", port: int = 8080, **kwargs: Any):
    """The uvicorn configuration `cr2 serve` runs with (h11 with the header-read timeout)."""
    import uvicorn

    return uvicorn.Config(app, host=host, port=port, http=header_timeout_protocol(serving.header_timeout_s),
                          log_level=kwargs.pop("log_level", "warning"), **kwargs)
