"""`cr2 serve`: the deployed CR² router behind HTTP, split by concern.

    security.py   who may call and what a request may carry (Guard middleware, bounded strict JSON,
                  bearer token, Host / Origin checks) — before any handler runs
    app.py        the FastAPI app: /health, /metrics, /route, /v1/chat/completions; concurrency slots;
                  load_router (the one place the deployed router is loaded)
    batching.py   the decision path: embedding cache, length-bucketed micro-batching, OnlineRouter.route
    cache.py      the LRU embedding cache (keyed by the text's SHA-256; hits and misses counted)
    metrics.py    Prometheus metrics (prometheus-client) and the middleware that counts every request
    proxy.py      forwarding a routed chat request to the chosen model's endpoint; bad-upstream handling
    server.py     the listening socket and uvicorn's h11 with a header-read timeout

Safe by default (docs/operations.md, "Exposing cr2 serve"): loopback unless a bearer token is set; see
security.py and proxy.py for the guarantees against hostile clients and bad upstreams.
"""
from __future__ import annotations

from cr2_cli.serve.app import RouteRequest, create_app, load_router
from cr2_cli.serve.security import MAX_JSON_DEPTH, HttpError, allowed_hosts, is_loopback, parse_bounded_json
from cr2_cli.serve.server import bind_socket, header_timeout_protocol, server_config

__all__ = ["MAX_JSON_DEPTH", "HttpError", "RouteRequest", "allowed_hosts", "bind_socket", "create_app",
           "header_timeout_protocol", "is_loopback", "load_router", "parse_bounded_json", "server_config"]
