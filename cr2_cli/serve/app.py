"""`cr2 serve`'s application: the FastAPI app, its routes and the decision path.

    GET  /health                 → status, gate fingerprint, threshold version, state distribution, grids
    GET  /metrics                → Prometheus text format (cr2_cli/serve/metrics.py)
    POST /route                  → {query, choices?, lam | target_accuracy | budget, alpha?, distance_m?, benchmark?,
                                   seed?} → the decision
                                   (accept/defer, score, τ*, chosen model, every model's p, cost and utility)
    POST /v1/chat/completions    → OpenAI-compatible: routes the last user message (λ, α from the request's
                                   extra fields `cr2_lam` / `cr2_alpha` or the X-CR2-Lambda / X-CR2-Alpha
                                   headers) and forwards the request to the chosen model (cr2_cli/serve/proxy.py).

The security checks run before any handler (cr2_cli/serve/security.py). At most `serving.max_concurrency`
requests are decided or forwarded at once, the rest wait up to `serving.queue_timeout_s` and then get 503
with Retry-After; decisions run in worker threads, so /health answers while a decision runs. A target
(`target_accuracy` / `budget` instead of `lam`) not yet certified is computed in a slot of its own
(TARGET_CONCURRENCY, seconds of CPU each) before it takes a concurrency slot, so many distinct targets cannot take
the slots of ordinary requests; targets are rounded and cached (cr2.deploy.deployment.served_target,
TARGET_CACHE_SIZE). A query's
embedding comes from the LRU cache (`serving.embedding_cache_size`) or the encoder, alone or batched with
concurrent requests (`serving.batch_max_size`; cr2_cli/serve/batching.py).

The router is CR² by default, or a certified router `<router>@<rule>` (`cr2 serve --router knn --rule
crc-avoidable`, cr2.deploy.deployment.CertifiedOnlineRouter): same request path, same answer fields and headers, with
`router` naming it in every answer, in X-CR2-Decision and in /health. CR² is live (cr2_cli/serve/live.py): a newer
threshold table written to the home (a re-calibration) is swapped in without a restart; a certified router serves the
table it started with. Every answer names the version that decided it (X-CR2-Thresholds-Version).

Every bad value is a 4xx naming the field and the problem: malformed JSON, JSON nested deeper than
MAX_JSON_DEPTH, NaN / Infinity / 1e400, a blank query, a wrong type → 422; more than MAX_JSON_VALUES values → 413
(counted before parsing; bodies are parsed and checked in a worker thread, off the event loop); an off-grid λ →
400 naming the calibrated grid; an unconfigured endpoint → 503 naming the config key. A value an error quotes is cut
(security.clip_detail).
"""
from __future__ import annotations

import asyncio
import contextlib
import math
from typing import Any

from fastapi import FastAPI, Request  # module level: FastAPI resolves the handlers' (string) annotations here
from pydantic import BaseModel, ConfigDict, Field, FiniteFloat, ValidationError, field_validator, model_validator

from cr2.system.channel import MAX_DISTANCE_M, MIN_DISTANCE_M
from cr2.config import Config
from cr2.core.errors import Cr2Error, DataValidationError
from cr2_cli.serve.security import (Guard, HttpError, allowed_hosts, check_exposure, clip, clip_detail, number,
                                    parse_json, read_body, validation_detail)

# target computations (OnlineRouter.choose_target: seconds of CPU each) running at once; the others wait up to
# serving.queue_timeout_s for this slot, holding no concurrency slot meanwhile, then get 503
TARGET_CONCURRENCY = 1
TARGET_RETRY_AFTER_S = 3  # about one target computation


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
    distance_m: FiniteFloat | None = Field(None, ge=MIN_DISTANCE_M, le=MAX_DISTANCE_M, description="UE–edge distance, m (mean "
                                           "fading); default: sampled")
    benchmark: str | None = Field(None, max_length=200, description="benchmark whose default output length is "
                                  "assumed (default: the config's first enabled benchmark)")
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


def _jsonable(value: Any) -> Any:
    """JSON has no infinities: τ* = +inf (accept nothing) / −inf (accept all) travel as the strings "inf" / "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _route_request(raw: bytes) -> RouteRequest:
    """A /route body parsed (bounded, strict) and validated, or the 4xx naming the problem."""
    try:
        return RouteRequest.model_validate(parse_json(raw))
    except ValidationError as exc:
        raise HttpError(422, validation_detail(exc)) from None


def _chat_request(raw: bytes) -> tuple[dict, str]:
    """A chat body parsed (bounded, strict) and the text of its last user message (the routed query), or the 4xx."""
    from cr2_cli.serve.proxy import last_user_text

    body = parse_json(raw)
    if not isinstance(body, dict):
        raise HttpError(422, "the request body must be a JSON object")
    return body, last_user_text(body.get("messages"))


def _cr2_status(exc: Cr2Error) -> int:
    if isinstance(exc, DataValidationError):
        return 422
    return 400  # off-grid λ, unknown names, …


def load_router(config: Config, home: str, name: str = "cr2") -> Any:
    """The deployed router `name` of `home` ('cr2' or '<router>@<rule>') that `cr2 serve` decides with (the one
    place serve loads it).

    After the encoder is loaded, torch runs on `serving.torch_threads` threads: a decision's teacher and gate see
    one row, and on a busy machine two spinning threads made them ≈ 25× slower than one (benchmarks/bench_serve.py)."""
    import torch

    from cr2_cli.online import load_online_router

    router = load_online_router(config, home, name)
    torch.set_num_threads(config.serving.torch_threads)
    return router


def create_app(config: Config, home: str, *, router: Any = None, token: str | None = None,
               bind_host: str = "127.0.0.1", router_name: str = "cr2") -> Any:
    """The FastAPI application serving the router loaded from `home` (artefacts are loaded once, here).

    `router`: an object with route(...) and describe() (default: the deployed router `router_name` of `home` —
    'cr2' or a certified '<router>@<rule>' —, load_router);
    `token`: the bearer token every request must carry (None: none, allowed only on loopback)."""
    from fastapi.responses import JSONResponse, Response
    from starlette.concurrency import run_in_threadpool

    from cr2.deploy.deployment import check_route_inputs
    from cr2_cli.serve.batching import Decider, RouteCall
    from cr2_cli.serve.metrics import MetricsMiddleware, ServeMetrics
    from cr2_cli.serve.live import LiveRouter, warehouse_live_router
    from cr2_cli.serve.proxy import SlotRelease, forward_chat, upstream_client, version_header

    serving = config.serving
    check_exposure(serving, token, bind_host)
    metrics = ServeMetrics(config.model_ids)
    if router is None:  # the deployed router of `home`, swapped when a newer threshold table is written there
        live = warehouse_live_router(load_router(config, home, router_name), config, home, metrics)
    else:
        live = router if isinstance(router, LiveRouter) else LiveRouter(router)
        live.attach_metrics(metrics)
    decider = Decider(live, serving, metrics)
    slots = asyncio.Semaphore(serving.max_concurrency)
    target_slots = asyncio.Semaphore(TARGET_CONCURRENCY)
    state: dict[str, Any] = {}

    def client() -> Any:
        if state.get("client") is None:
            state["client"] = upstream_client(serving)
        return state["client"]

    @contextlib.asynccontextmanager
    async def lifespan(app_):
        client()
        watcher = (asyncio.create_task(live.watch(serving.reload_interval_s))
                   if serving.reload_interval_s > 0 and live.load is not None else None)
        try:
            yield
        finally:
            if watcher is not None:
                watcher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watcher
            c = state.pop("client", None)
            if c is not None:
                await c.aclose()
            decider.close()

    app = FastAPI(title="cr2", description="CR² cost-aware, risk-controlled device–edge routing", lifespan=lifespan)
    app.add_middleware(Guard, token=token, hosts=allowed_hosts(config, bind_host),
                       origins=set(serving.allowed_origins), max_body_bytes=serving.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=metrics)  # outermost: requests the Guard refuses are counted too
    app.state.metrics, app.state.decider, app.state.live = metrics, decider, live

    @app.exception_handler(HttpError)
    async def _http_error(request: Request, exc: HttpError):
        return JSONResponse(status_code=exc.status, content={"detail": exc.detail}, headers=exc.headers)

    @app.exception_handler(Cr2Error)
    async def _cr2_error(request: Request, exc: Cr2Error):  # the message may quote a request's value: cut
        return JSONResponse(status_code=_cr2_status(exc), content={"detail": clip_detail(str(exc))})

    async def wait_for(semaphore: asyncio.Semaphore, busy: str, retry_after_s: int = 1) -> None:
        metrics.waiting.inc()
        try:
            async with asyncio.timeout(serving.queue_timeout_s):  # a cancelled wait never keeps a slot
                await semaphore.acquire()
        except (asyncio.TimeoutError, TimeoutError):
            raise HttpError(503, busy, {"retry-after": str(retry_after_s)}) from None
        finally:
            metrics.waiting.dec()

    async def acquire() -> None:
        await wait_for(slots, f"busy: {serving.max_concurrency} requests in progress (serving.max_concurrency); "
                              "retry shortly")

    def check_length(query: str, choices: list[str] | None) -> None:
        n = len(query) + sum(len(c) for c in choices or [])
        if n > serving.max_prompt_chars:
            raise HttpError(413, f"the routed text has {n:,} characters; the limit is {serving.max_prompt_chars:,} "
                                 "(serving.max_prompt_chars)")

    async def decide(query: str, choices, lam: float, alpha: float | None, distance_m=None, benchmark=None, seed=0):
        a = config.grids.default_alpha if alpha is None else alpha
        check_route_inputs(query, choices, lam, a, distance_m)  # a blank query is a 422, not a traceback
        check_length(query, choices)
        call = RouteCall(query, choices, lam, a, distance_m, benchmark, seed)
        if decider.batcher is not None:  # concurrent requests share one encoder call
            out = await asyncio.wrap_future(decider.batcher.submit_future(call))
        else:
            out = await run_in_threadpool(decider.decide, call)
        metrics.decided(out)
        return _jsonable(out)

    async def decide_by_target(req: "RouteRequest"):
        """The operating point certified for the request's target (cached on the router), then route.

        A target the router has not certified yet is computed in the target slot (TARGET_CONCURRENCY at once) and
        only then takes a concurrency slot: requests with new targets queue for that one slot, and a client sending
        many distinct targets keeps no more than one concurrency slot from ordinary requests. A cached target is no
        computation and skips the target slot."""
        from cr2_cli.online import route_by_target

        check_length(req.query, req.choices)
        router = live.current
        cached = getattr(router, "target_cached", None)
        computes = cached is None or not cached(req.target_accuracy, req.budget)
        if computes:
            await wait_for(target_slots, f"busy: a target computation is running (at most {TARGET_CONCURRENCY} at "
                                         "once, seconds of CPU each); retry shortly, or route with a calibrated lam",
                           TARGET_RETRY_AFTER_S)
        try:
            await acquire()
            try:
                out = await run_in_threadpool(route_by_target, config, home, req.query, req.choices,
                                              req.target_accuracy, req.budget, req.distance_m, req.benchmark,
                                              req.seed, router)
            finally:
                slots.release()
        finally:
            if computes:
                target_slots.release()
        metrics.decided(out)
        return _jsonable(out)

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", **live.current.describe()}

    @app.get("/metrics")
    def prometheus():
        body, media_type = metrics.exposition()
        return Response(content=body, media_type=media_type)

    # the handlers read their bodies themselves (bounded, strict); the schemas below document them in /docs and
    # /openapi.json, which the HTTP fuzz (tests/test_serve_fuzz.py) generates requests from
    # bodies are parsed and checked in a worker thread: a large or hostile body costs that thread, not the event
    # loop every other request (and /health) is answered on
    @app.post("/route", openapi_extra=_json_body(RouteRequest.model_json_schema()))
    async def route(request: Request):
        raw = await read_body(request, serving.max_body_bytes)
        req = await run_in_threadpool(_route_request, raw)
        if req.lam is None:
            out = await decide_by_target(req)  # takes its slots itself
        else:
            await acquire()
            try:
                out = await decide(req.query, req.choices, req.lam, req.alpha, req.distance_m, req.benchmark, req.seed)
            finally:
                slots.release()
        return JSONResponse(content=out, headers=version_header(out))

    @app.post("/v1/chat/completions", openapi_extra=_json_body(CHAT_SCHEMA))
    async def chat(request: Request):
        body, query = await run_in_threadpool(_chat_request, await read_body(request, serving.max_body_bytes))
        check_length(query, None)
        lam = (number(body.pop("cr2_lam"), "cr2_lam", 0.0) if "cr2_lam" in body
               else number(request.headers["x-cr2-lambda"], "X-CR2-Lambda", 0.0) if "x-cr2-lambda" in request.headers
               else serving.default_lam)
        alpha = (number(body.pop("cr2_alpha"), "cr2_alpha", 0.0, 1.0) if "cr2_alpha" in body
                 else number(request.headers["x-cr2-alpha"], "X-CR2-Alpha", 0.0, 1.0)
                 if "x-cr2-alpha" in request.headers else None)
        stream = body.get("stream", False)
        if not isinstance(stream, bool):
            raise HttpError(422, f"stream must be true or false, got {clip(repr(stream))}")
        await acquire()
        free = SlotRelease(slots)
        try:
            decision = await decide(query, None, lam, alpha)
            return await forward_chat(client(), config, body, decision, lam, stream, free, metrics)
        finally:
            if not free.handed_over:
                free()

    return app
