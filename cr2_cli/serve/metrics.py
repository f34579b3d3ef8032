"""Prometheus metrics of `cr2 serve` (GET /metrics, text exposition format, prometheus-client).

Each app has its own registry (several apps in one process — the tests — never share counts):

    cr2_serve_requests_total{route, method, status}       every HTTP request, refused ones included (status
                                                           "disconnected": the client left before its body was read)
    cr2_serve_client_disconnects_total{route, reason}      those clients: "disconnect" (they hung up),
                                                           "body_timeout" (too slow: serving.body_timeout_s) or
                                                           "body_chunks" (a body in too many pieces: 413)
    cr2_serve_errors_total{route, status}                  those answered 4xx / 5xx
    cr2_serve_request_duration_seconds{route}              latency histogram (to the last body byte)
    cr2_serve_in_progress_requests                         requests being answered now
    cr2_serve_queue_depth{stage}                           waiting for a concurrency slot ("slot") or for the
                                                           micro-batcher's next encoder call ("batch")
    cr2_serve_decisions_total{model, placement}            routing decisions: chosen model, local / defer
    cr2_serve_batch_size                                   requests per micro-batch (histogram)
    cr2_serve_encoder_batch_size                           texts per encoder call (length bucket; histogram)
    cr2_serve_embedding_cache_hits_total / _misses_total   embedding cache lookups
    cr2_serve_embedding_cache_entries                      embeddings held
    cr2_serve_thresholds_version                           the threshold-table version deciding now
    cr2_serve_threshold_reloads_total{outcome}             live swaps to a newer table: swapped / failed /
                                                           absent (the version file names a version not held)
    cr2_serve_upstream_requests_total{model, outcome}      forwarded chat requests: ok, timeout, status, …
    cr2_serve_upstream_errors_total{model, kind}           upstream failures (every outcome but ok)
    cr2_serve_upstream_duration_seconds{model}             upstream latency (to the answer, or to a stream's
                                                           headers)

    cr2_serve_unauthenticated_requests_total              requests refused before they were authenticated (Host,
                                                           Origin, bearer token): counted here and nowhere else

Every label comes from a closed set, so no client can grow the series: `route` is the path of a known endpoint
or "other", `method` a standard HTTP method or "other", `model` a model of the config's pool or "other", `status`
a code this server answers with. A request refused before authentication adds to one unlabelled counter only, so
a client without the bearer token cannot add series either.
"""
from __future__ import annotations

import logging
import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

ROUTES = ("/route", "/v1/chat/completions", "/health", "/metrics", "/docs", "/openapi.json")
METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH")
OTHER = "other"  # the label of every route, method or model outside the closed sets
log = logging.getLogger("cr2_cli.serve")
LATENCY_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class ServeMetrics:
    """The metrics of one `cr2 serve` app, in its own CollectorRegistry."""

    def __init__(self, models: tuple[str, ...] | list[str] = ()) -> None:
        """`models`: the pool's model ids, the closed set of `model` labels (any other name counts as "other")."""
        self.models = frozenset(models)
        r = self.registry = CollectorRegistry()
        self.requests = Counter("cr2_serve_requests", "HTTP requests by route, method and status",
                                ["route", "method", "status"], registry=r)
        self.errors = Counter("cr2_serve_errors", "HTTP requests answered 4xx or 5xx, by route and status",
                              ["route", "status"], registry=r)
        self.latency = Histogram("cr2_serve_request_duration_seconds", "HTTP request latency, s", ["route"],
                                 buckets=LATENCY_BUCKETS_S, registry=r)
        self.disconnects = Counter("cr2_serve_client_disconnects", "clients gone before their request body was "
                                   "read, by route and reason", ["route", "reason"], registry=r)
        self.in_progress = Gauge("cr2_serve_in_progress_requests", "HTTP requests being answered", registry=r)
        self.queue = Gauge("cr2_serve_queue_depth", "requests waiting: for a concurrency slot or a micro-batch",
                           ["stage"], registry=r)
        self.waiting = self.queue.labels(stage="slot")
        self.decisions = Counter("cr2_serve_decisions", "routing decisions by chosen model and placement",
                                 ["model", "placement"], registry=r)
        self.batch_size = Histogram("cr2_serve_batch_size", "requests per micro-batch", buckets=BATCH_BUCKETS,
                                    registry=r)
        self.encoder_batch = Histogram("cr2_serve_encoder_batch_size", "texts per encoder call (length bucket)",
                                       buckets=BATCH_BUCKETS, registry=r)
        self.cache_hits = Counter("cr2_serve_embedding_cache_hits", "embedding cache hits", registry=r)
        self.cache_misses = Counter("cr2_serve_embedding_cache_misses", "embedding cache misses", registry=r)
        self.cache_entries = Gauge("cr2_serve_embedding_cache_entries", "embeddings held in the cache", registry=r)
        self.thresholds_version = Gauge("cr2_serve_thresholds_version", "threshold-table version deciding now",
                                        registry=r)
        self.reloads = Counter("cr2_serve_threshold_reloads", "live swaps to a newer threshold table, by outcome",
                               ["outcome"], registry=r)
        self.upstream = Counter("cr2_serve_upstream_requests", "forwarded chat requests by model and outcome",
                                ["model", "outcome"], registry=r)
        self.upstream_errors = Counter("cr2_serve_upstream_errors", "upstream failures by model and kind",
                                       ["model", "kind"], registry=r)
        self.upstream_latency = Histogram("cr2_serve_upstream_duration_seconds", "upstream latency, s", ["model"],
                                          buckets=LATENCY_BUCKETS_S, registry=r)
        self.unauthenticated = Counter("cr2_serve_unauthenticated_requests", "requests refused before they were "
                                       "authenticated (Host, Origin, bearer token)", registry=r)

    def model(self, name: Any) -> str:
        """`name` as a `model` label: a model of the pool, else "other"."""
        return name if name in self.models else OTHER

    def watch(self, decider: Any) -> None:
        """Read the decider's batch queue and cache size at scrape time."""
        self.queue.labels(stage="batch").set_function(decider.queue_depth)
        cache = decider.cache
        self.cache_entries.set_function(lambda: 0 if cache is None else len(cache))

    def decided(self, decision: dict) -> None:
        self.decisions.labels(model=self.model(decision.get("chosen_model")),
                              placement="local" if decision.get("accept_local") else "defer").inc()

    def cache_lookups(self, hits: int, misses: int) -> None:
        if hits:
            self.cache_hits.inc(hits)
        if misses:
            self.cache_misses.inc(misses)

    def encoder_call(self, n_texts: int) -> None:
        self.encoder_batch.observe(n_texts)

    def upstream_done(self, model: str, outcome: str, seconds: float) -> None:
        model = self.model(model)
        self.upstream.labels(model=model, outcome=outcome).inc()
        self.upstream_latency.labels(model=model).observe(seconds)
        if outcome != "ok":
            self.upstream_errors.labels(model=model, kind=outcome).inc()

    def upstream_error(self, model: str, kind: str) -> None:
        """A failure after the answer started (a stream that broke off or grew too large)."""
        self.upstream_errors.labels(model=self.model(model), kind=kind).inc()

    def exposition(self) -> tuple[bytes, str]:
        """(the text exposition of every metric, its content type)."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class MetricsMiddleware:
    """ASGI middleware counting every HTTP request by route and status and timing it to its last body byte.

    Labels come from closed sets (module docstring). A request the Guard refused before authenticating it adds to
    `unauthenticated` only. A client that disconnects before its body is read (ClientGone) is its own outcome:
    counted, logged in one line, and not re-raised — it is not a server error, and its traceback would only hide
    real ones."""

    def __init__(self, app: Any, *, metrics: ServeMetrics):
        self.app, self.metrics = app, metrics

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = scope.get("path", "")
        route = path if path in ROUTES else OTHER
        method = scope.get("method", "")
        method = method if method in METHODS else OTHER
        status = {"code": 500}  # an exception before the response started ends as a 500
        m = self.metrics
        t0 = time.perf_counter()

        async def counting_send(message):
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        from cr2_cli.serve.security import AUTHENTICATED_SCOPE_KEY, ClientGone
        from cr2_cli.serve.server import BODY_CHUNKS_SCOPE_KEY, BODY_TIMEOUT_SCOPE_KEY

        m.in_progress.inc()
        try:
            await self.app(scope, receive, counting_send)
        except ClientGone as exc:
            reason = ("body_timeout" if scope.get(BODY_TIMEOUT_SCOPE_KEY)
                      else "body_chunks" if scope.get(BODY_CHUNKS_SCOPE_KEY) else "disconnect")
            status["code"] = 0
            m.disconnects.labels(route=route, reason=reason).inc()
            log.info("%s %s: client gone before its request body was read (%s, %d bytes received)",
                     method, route, reason, exc.received_bytes)
        finally:
            m.in_progress.dec()
            if scope.get(AUTHENTICATED_SCOPE_KEY):  # set by the Guard, inside this middleware
                code = str(status["code"]) if status["code"] else "disconnected"
                m.requests.labels(route=route, method=method, status=code).inc()
                if status["code"] >= 400:
                    m.errors.labels(route=route, status=code).inc()
                m.latency.labels(route=route).observe(time.perf_counter() - t0)
            else:
                m.unauthenticated.inc()

__all__ = ["MetricsMiddleware", "ServeMetrics"]
