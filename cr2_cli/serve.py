"""`cr2 serve`: the deployed CR² router behind HTTP.

    GET  /health                 → status, gate fingerprint, threshold version, state distribution, grids
    POST /route                  → {query, choices?, lam, alpha?, distance_m?, benchmark?, seed?} → the decision
                                   (accept/defer, score, τ*, chosen model, every model's p, cost and utility)
    POST /v1/chat/completions    → OpenAI-compatible: routes the last user message (λ, α from the request's
                                   extra fields `cr2_lam` / `cr2_alpha` or the X-CR2-Lambda / X-CR2-Alpha
                                   headers), forwards the request to the chosen model's endpoint
                                   (config `serving.endpoints`) and returns its answer unchanged, with the
                                   decision in the X-CR2-Decision header — existing OpenAI clients work as is.

Bad input → 422 with the field and the problem; an off-grid λ → 400 naming the calibrated grid; an
unconfigured endpoint → 503 naming the config key.
"""
from __future__ import annotations

import json
import os
from typing import Any

from fastapi import FastAPI, Request  # module level: FastAPI resolves the handlers' (string) annotations here
from pydantic import BaseModel, Field, model_validator

from cr2.config import Config
from cr2.errors import Cr2Error, UncalibratedOperatingPointError


class RouteRequest(BaseModel):
    """POST /route body."""

    query: str = Field(min_length=1, description="the query text")
    choices: list[str] | None = Field(None, description="multiple-choice options, in A, B, … order")
    lam: float | None = Field(None, gt=0, description="cost weight λ (on the calibrated grid); or give a target")
    target_accuracy: float | None = Field(None, gt=0, lt=1, description="instead of λ: the cheapest (λ, α) certified "
                                          "to reach this accuracy (docs/guarantees.md)")
    budget: float | None = Field(None, gt=0, description="instead of λ: the most accurate (λ, α) certified to keep the "
                                 "mean normalised cost ≤ budget")
    alpha: float | None = Field(None, gt=0, lt=1, description="risk level α (default: grids.default_alpha)")
    distance_m: float | None = Field(None, gt=0, description="UE–edge distance, m (mean fading); default: sampled")
    benchmark: str = Field("mmlu", description="benchmark whose default output length is assumed")
    seed: int = Field(0, description="seed of the sampled channel state")

    @model_validator(mode="after")
    def _one_operating_point(self) -> "RouteRequest":
        given = [k for k in ("lam", "target_accuracy", "budget") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of lam, target_accuracy, budget (got {', '.join(given) or 'none'})")
        return self


def _jsonable(value: Any) -> Any:
    """JSON has no infinities: τ* = +inf (accept nothing) / −inf (accept all) travel as the strings "inf" / "-inf"."""
    import math

    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else "nan")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def create_app(config: Config, home: str) -> Any:
    """The FastAPI application serving the router loaded from `home` (artefacts are loaded once, here)."""
    import httpx
    from fastapi.responses import JSONResponse

    from cr2_cli.online import OnlineRouter

    router = OnlineRouter.load(config, home)
    serving = config.serving
    app = FastAPI(title="cr2", description="CR² cost-aware, risk-controlled device–edge routing")

    def _error(exc: Exception) -> JSONResponse:
        status = 400 if isinstance(exc, (UncalibratedOperatingPointError, Cr2Error)) else 500
        return JSONResponse(status_code=status, content={"detail": str(exc)})

    def _decide(query: str, choices, lam: float, alpha: float | None, distance_m=None, benchmark="mmlu", seed=0):
        a = config.grids.default_alpha if alpha is None else alpha
        return _jsonable(router.route(query, choices, lam, a, distance_m, benchmark, seed))

    # ---- opt-in micro-batching of /route (serving.batch_max_size > 1): see cr2_cli/serve_batching.py
    if serving.batch_max_size > 1:
        from cr2_cli.serve_batching import RouteCall, make_batcher

        batcher = make_batcher(router, serving.batch_max_size, serving.batch_max_wait_ms)
        app.router.on_shutdown.append(batcher.close)

        def _decide(query: str, choices, lam: float, alpha: float | None, distance_m=None, benchmark="mmlu", seed=0):
            a = config.grids.default_alpha if alpha is None else alpha
            return _jsonable(batcher.submit(RouteCall(query, choices, lam, a, distance_m, benchmark, seed)))
    # ---- end of micro-batching

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", **router.describe()}

    @app.post("/route")
    def route(req: RouteRequest):
        try:
            if req.lam is None:  # issue 21: operate by target (certified choice, cached on the router)
                from cr2_cli.targets import route_by_target

                return _jsonable(route_by_target(config, home, req.query, req.choices, req.target_accuracy, req.budget,
                                                 req.distance_m, req.benchmark, req.seed, router=router))
            return _decide(req.query, req.choices, req.lam, req.alpha, req.distance_m, req.benchmark, req.seed)
        except Cr2Error as exc:
            return _error(exc)

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return JSONResponse(status_code=422, content={"detail": "the request body is not valid JSON"})
        messages = body.get("messages") if isinstance(body, dict) else None
        user = [m for m in messages or [] if isinstance(m, dict) and m.get("role") == "user"]
        if not user or not isinstance(user[-1].get("content"), str) or not user[-1]["content"].strip():
            return JSONResponse(status_code=422, content={"detail": "messages must contain a user message with text "
                                                                    "content (the query that is routed)"})
        try:
            lam = float(body.pop("cr2_lam", None) or request.headers.get("x-cr2-lambda") or serving.default_lam)
            alpha_raw = body.pop("cr2_alpha", None) or request.headers.get("x-cr2-alpha")
            alpha = float(alpha_raw) if alpha_raw is not None else None
        except (TypeError, ValueError):
            return JSONResponse(status_code=422, content={"detail": "cr2_lam / cr2_alpha must be numbers"})
        if not lam > 0 or (alpha is not None and not 0 < alpha < 1):
            return JSONResponse(status_code=422, content={"detail": "need λ > 0 and 0 < α < 1"})
        try:
            decision = _decide(user[-1]["content"], None, lam, alpha)
        except Cr2Error as exc:
            return _error(exc)
        model_id = decision["chosen_model"]
        base = serving.endpoints.get(model_id)
        if not base:
            return JSONResponse(status_code=503, content={"detail": f"no endpoint for '{model_id}': set serving.endpoints."
                                                                    f"{model_id} in the config", "decision": decision})
        spec = next(m for m in config.models if m.id == model_id)
        upstream = {**body, "model": serving.served_names.get(model_id, spec.hf_name)}
        headers = {"content-type": "application/json"}
        if serving.api_key_env and os.environ.get(serving.api_key_env):
            headers["authorization"] = f"Bearer {os.environ[serving.api_key_env]}"
        try:
            async with httpx.AsyncClient(timeout=serving.timeout_s) as client:
                resp = await client.post(base.rstrip("/") + "/chat/completions", json=upstream, headers=headers)
        except httpx.HTTPError as exc:
            return JSONResponse(status_code=502, content={"detail": f"endpoint of '{model_id}' ({base}) failed: {exc}",
                                                          "decision": decision})
        summary = (f"{'accept' if decision['accept_local'] else 'defer'}; model={model_id}; score={decision['score']:.6f}; "
                   f"tau={decision['tau']}; lam={lam:g}; alpha={decision['alpha']:g}")
        return JSONResponse(status_code=resp.status_code, content=resp.json(), headers={"x-cr2-decision": summary})

    return app
