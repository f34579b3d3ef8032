"""Micro-batching for `cr2 serve`'s /route: concurrent requests share one encoder call (opt-in).

`serving.batch_max_size` > 1 turns it on: the /route handler submits its request to a cr2.batching.MicroBatcher,
whose worker embeds the texts of every request that arrived within `serving.batch_max_wait_ms` in one
embed_texts call, then finishes each decision (τ*, costs, teacher, gate) with OnlineRouter.route on the
precomputed embedding. With batch_max_size = 1 (the default) serve.py does not use this module.

Batched and single embeddings of a text differ only by float32 rounding of the padded batch (measured by
benchmarks/bench_serve.py); decisions are those of OnlineRouter.route on that embedding.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cr2.batching import MicroBatcher
from cr2.errors import Cr2Error


@dataclass(frozen=True)
class RouteCall:
    """One /route request as the batcher carries it (OnlineRouter.route's arguments)."""

    query: str
    choices: list[str] | None
    lam: float
    alpha: float
    distance_m: float | None = None
    benchmark: str = "mmlu"
    seed: int = 0


def route_batch(router: Any, calls: list[RouteCall]) -> list[dict | BaseException]:
    """Decisions for `calls` with one encoder call for all their texts; a request's Cr2Error is its result."""
    from cr2.embed import embed_texts, router_text

    texts = [router_text(c.query, c.choices) for c in calls]
    with router._lock:  # the encoder is shared with any unbatched caller
        emb = embed_texts(texts, progress=False, encoder=router.encoder,
                          max_seq_length=router.config.embedding.max_seq_length)
    out: list[dict | BaseException] = []
    for i, c in enumerate(calls):
        try:
            out.append(router.route(c.query, c.choices, c.lam, c.alpha, c.distance_m, c.benchmark, c.seed,
                                    embedding=emb[i : i + 1]))
        except Cr2Error as exc:  # e.g. an off-grid λ: that caller's error, not the batch's
            out.append(exc)
    return out


def make_batcher(router: Any, max_batch_size: int, max_wait_ms: float) -> MicroBatcher:
    """A MicroBatcher in front of route_batch for this router."""
    return MicroBatcher(lambda calls: route_batch(router, calls), max_batch_size=max_batch_size,
                        max_wait_s=max_wait_ms / 1000.0, name="cr2-serve-batcher")


__all__ = ["RouteCall", "make_batcher", "route_batch"]
