"""How `cr2 serve` gets from a /route request to a decision: embedding cache, length-bucketed micro-batching.

`Decider` owns the path. A query's embedding e(x) comes from the LRU cache (cr2_cli/serve/cache.py,
`serving.embedding_cache_size`) or from the encoder; OnlineRouter.route then finishes the decision (τ*,
costs, teacher, gate) on that embedding. With `serving.batch_max_size` > 1 the /route handlers submit to a
cr2.deploy.batching.MicroBatcher instead: its worker takes every request that arrived within
`serving.batch_max_wait_ms` and embeds their uncached texts together, split into length buckets.

Length buckets: the encoder pads a batch to its longest text, so one call over texts of very different
lengths spends most of its work on padding (without buckets, batching measured slower than no batching for that
reason). `length_buckets` sorts the texts by token length and cuts the sorted run where another encoder
call costs less than the padding it saves: it minimises Σ_buckets (n_b · L_b + c) exactly (dynamic
programming over the sorted lengths), with n_b texts padded to L_b tokens and c =
`serving.batch_call_overhead_tokens`, an encoder call's fixed cost in token-equivalents.

Batched and single embeddings of a text differ only by float32 rounding of the padded batch (measured by
benchmarks/bench_serve.py); decisions are those of OnlineRouter.route on that embedding. A router without
an encoder (tests' stand-ins) is called as route(query, …) for each request, without cache or buckets.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cr2.deploy.batching import MicroBatcher
from cr2.core.errors import Cr2Error
from cr2_cli.serve.cache import EmbeddingCache


@dataclass(frozen=True)
class RouteCall:
    """One /route request as the decider carries it (OnlineRouter.route's arguments)."""

    query: str
    choices: list[str] | None
    lam: float
    alpha: float
    distance_m: float | None = None
    benchmark: str | None = None  # None: the deployment's default_benchmark
    seed: int = 0


def length_buckets(lengths_tokens: np.ndarray, call_overhead_tokens: float) -> list[np.ndarray]:
    """Indices of the texts grouped into encoder calls: longest first, each group contiguous in decreasing
    length, minimising Σ (n_b · L_b + c) over groups (n_b texts padded to their longest, L_b tokens; c the
    fixed cost of one call, tokens)."""
    lengths = np.asarray(lengths_tokens, dtype=np.int64)
    n = len(lengths)
    if n == 0:
        return []
    order = np.argsort(-lengths, kind="stable")
    srt = lengths[order]
    best = np.full(n + 1, np.inf)  # best[j]: least cost of the first j sorted texts
    best[0], cut = 0.0, np.zeros(n + 1, dtype=np.int64)
    for j in range(1, n + 1):
        i = np.arange(j)  # the last bucket is sorted texts i … j-1, padded to srt[i]
        cost = best[:j] + (j - i) * srt[:j] + call_overhead_tokens
        k = int(np.argmin(cost))
        best[j], cut[j] = cost[k], k
    groups, j = [], n
    while j > 0:
        groups.append(order[cut[j]:j])
        j = int(cut[j])
    return groups[::-1]


class Decider:
    """The decision path of one server: the router, its embedding cache and (opt-in) its micro-batcher."""

    def __init__(self, live: Any, serving: Any, metrics: Any = None):
        """`live`: the LiveRouter (cr2_cli/serve/live.py) whose current router decides — its encoder is shared by
        every router it swaps to — or a router, which then never changes."""
        from cr2_cli.serve.live import LiveRouter

        self.live = live if isinstance(live, LiveRouter) else LiveRouter(live)
        self.metrics = metrics
        self.encoder = getattr(self.live.current, "encoder", None)
        self.call_overhead_tokens = float(serving.batch_call_overhead_tokens)
        self.cache = EmbeddingCache(serving.embedding_cache_size) if self.encoder is not None else None
        self.batcher: MicroBatcher | None = None
        if serving.batch_max_size > 1:
            self.batcher = MicroBatcher(self.decide_batch, max_batch_size=serving.batch_max_size,
                                        max_wait_s=serving.batch_max_wait_ms / 1000.0, name="cr2-serve-batcher")
        if metrics is not None:
            metrics.watch(self)

    def queue_depth(self) -> int:
        """Requests waiting in the micro-batcher for the next encoder call."""
        return 0 if self.batcher is None else self.batcher.pending()

    def embed(self, texts: list[str]) -> np.ndarray:
        """e(x) [n, d] float32 for router texts: cached ones from the cache, the others in length buckets."""
        from cr2.inputs.embed import EMBED_DIM, embed_texts

        out = np.empty((len(texts), EMBED_DIM), dtype=np.float32)
        todo: dict[str, list[int]] = {}  # a text repeated within the batch is embedded once
        for i, text in enumerate(texts):
            hit = self.cache.get(text) if self.cache is not None else None
            if hit is None:
                todo.setdefault(text, []).append(i)
            else:
                out[i] = hit
        if self.metrics is not None:
            self.metrics.cache_lookups(hits=len(texts) - sum(map(len, todo.values())),
                                       misses=sum(map(len, todo.values())))
        if not todo:
            return out
        new = list(todo)
        router = self.live.current
        max_len = router.config.embedding.max_seq_length
        with router._lock:  # the encoder is shared with unbatched and target-mode callers
            ids = self.encoder.tokenizer(new, truncation=True, max_length=max_len, padding=False)["input_ids"]
            lengths = np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(new))
            groups = length_buckets(lengths, self.call_overhead_tokens) if len(new) > 1 else [np.arange(1)]
            for group in groups:
                emb = embed_texts([new[k] for k in group], batch_size=len(group), progress=False,
                                  encoder=self.encoder, max_seq_length=max_len)
                for row, k in enumerate(group):
                    for i in todo[new[k]]:
                        out[i] = emb[row]
                    if self.cache is not None:
                        self.cache.put(new[k], emb[row])
                if self.metrics is not None:
                    self.metrics.encoder_call(len(group))
        return out

    def _route(self, call: RouteCall, embedding: np.ndarray | None) -> dict:
        router = self.live.current  # taken once: a swap during this decision does not change its table
        if embedding is None:
            return router.route(call.query, call.choices, call.lam, call.alpha, call.distance_m, call.benchmark,
                                call.seed)
        return router.route(call.query, call.choices, call.lam, call.alpha, call.distance_m, call.benchmark,
                            call.seed, embedding=embedding)

    def decide(self, call: RouteCall) -> dict:
        """The decision for one request (a worker thread calls this when there is no batcher)."""
        if self.encoder is None:
            return self._route(call, None)
        from cr2.inputs.embed import router_text

        return self._route(call, self.embed([router_text(call.query, call.choices)]))

    def decide_batch(self, calls: list[RouteCall]) -> list[dict | BaseException]:
        """Decisions for `calls`, their uncached texts embedded together; a request's Cr2Error is its result."""
        from cr2.inputs.embed import router_text

        if self.metrics is not None:
            self.metrics.batch_size.observe(len(calls))
        emb = None
        if self.encoder is not None:
            emb = self.embed([router_text(c.query, c.choices) for c in calls])
        out: list[dict | BaseException] = []
        for i, c in enumerate(calls):
            try:
                out.append(self._route(c, None if emb is None else emb[i : i + 1]))
            except Cr2Error as exc:  # e.g. an off-grid λ: that caller's error, not the batch's
                out.append(exc)
        return out

    def close(self) -> None:
        if self.batcher is not None:
            self.batcher.close()


__all__ = ["Decider", "RouteCall", "length_buckets"]
