"""`cr2 serve`'s embedding cache, length buckets and Prometheus /metrics.

The cache and bucket tests embed with the real all-MiniLM-L6-v2 encoder (torch backend, a router stand-in
that records the embedding each decision was made on); the /metrics test uses the stub router of
tests/test_serve_security.py, so the counts come from the HTTP layer alone.
"""
from __future__ import annotations

import contextlib
import itertools
import threading

import httpx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from cr2.config import load_config
from cr2.core.errors import ConfigError, InvalidValueError
from cr2_cli.serve import create_app
from cr2_cli.serve.batching import Decider, RouteCall, length_buckets
from cr2_cli.serve.cache import EmbeddingCache
from tests.serve_helpers import fake_model_endpoint, running
from tests.test_serve_security import StubRouter


# ---------------------------------------------------------------- the LRU cache on its own
def test_cache_counts_hits_and_misses_and_evicts_the_least_recently_used():
    cache = EmbeddingCache(2)
    a, b, c = (np.full(4, v, dtype=np.float32) for v in (1, 2, 3))
    assert cache.get("a") is None and (cache.hits, cache.misses) == (0, 1)
    cache.put("a", a)
    cache.put("b", b)
    np.testing.assert_array_equal(cache.get("a"), a)  # "a" is now the most recent, "b" the least
    cache.put("c", c)
    assert len(cache) == 2 and cache.evictions == 1
    assert cache.get("b") is None  # evicted
    np.testing.assert_array_equal(cache.get("c"), c)
    np.testing.assert_array_equal(cache.get("a"), a)
    assert (cache.hits, cache.misses) == (3, 2)
    with pytest.raises(ValueError):
        cache.get("a")[0] = 9.0  # a cached embedding cannot be changed by a caller


def test_cache_size_zero_keeps_nothing_and_a_negative_size_is_refused():
    cache = EmbeddingCache(0)
    cache.put("a", np.ones(4))
    assert len(cache) == 0 and cache.get("a") is None and cache.misses == 1
    with pytest.raises(InvalidValueError, match="≥ 0"):
        EmbeddingCache(-1)
    with pytest.raises(ConfigError, match="embedding_cache_size"):
        load_config(overrides={"serving": {"embedding_cache_size": -5}})


# ---------------------------------------------------------------- length buckets
def _cost(groups, lengths, c):
    return sum(len(g) * max(lengths[i] for i in g) + c for g in groups)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 256), min_size=1, max_size=7), st.sampled_from([0.0, 4.0, 16.0, 200.0]))
def test_length_buckets_are_the_cheapest_split_of_the_sorted_texts(lengths, c):
    groups = length_buckets(np.array(lengths), c)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(lengths)))  # every text once
    srt = sorted(lengths, reverse=True)
    best = min(  # brute force over every cut of the sorted run
        sum((b - a) * srt[a] + c for a, b in zip((0, *cuts), (*cuts, len(srt))))
        for k in range(len(srt)) for cuts in itertools.combinations(range(1, len(srt)), k))
    assert _cost(groups, lengths, c) == pytest.approx(best)


def test_one_long_text_gets_its_own_encoder_call():
    lengths = np.array([12, 250, 14, 10, 11, 13])
    groups = length_buckets(lengths, 16.0)
    assert [g.tolist() for g in groups] == [[1], [2, 5, 0, 4, 3]]  # the short five are not padded to 250 tokens
    assert len(length_buckets(np.full(8, 40), 16.0)) == 1


# ---------------------------------------------------------------- the decision path with a real encoder
class EncodingRouter:
    """The deployed router's interface around the real encoder: records the embedding each decision used."""

    def __init__(self, encoder, config):
        self.encoder, self.config, self._lock, self.seen = encoder, config, threading.Lock(), []

    def describe(self) -> dict:
        return {"models": [m.id for m in self.config.models]}

    def route(self, question, choices, lam, alpha, distance_m=None, benchmark="mmlu", seed=0, embedding=None):
        assert embedding is not None and embedding.shape == (1, 384)
        self.seen.append((question, embedding.copy()))
        return {"accept_local": question.startswith("local"), "chosen_model": self.config.models[0].id
                if question.startswith("local") else self.config.models[1].id, "score": float(embedding[0, 0]),
                "tau": 0.0, "lam": lam, "alpha": alpha, "models": []}


@pytest.fixture(scope="module")
def encoder():
    from cr2.inputs.embed import load_encoder

    return load_encoder(load_config().embedding.max_seq_length, backend="torch")


def _serving(**kw):
    return load_config().serving.model_copy(update=kw)


def test_a_repeated_query_is_embedded_once_and_gets_the_same_embedding(encoder):
    from cr2.inputs.embed import embed_texts

    cfg = load_config()
    router = EncodingRouter(encoder, cfg)
    decider = Decider(router, _serving(embedding_cache_size=2))
    calls = [RouteCall(q, None, 1.0, 0.1) for q in ("What is 2 + 2?", "Name a prime.", "What is 2 + 2?", "Why?")]
    for call in calls:
        decider.decide(call)
    assert (decider.cache.hits, decider.cache.misses) == (1, 3)
    first, again = router.seen[0][1], router.seen[2][1]
    np.testing.assert_array_equal(first, again)
    alone = embed_texts(["What is 2 + 2?"], progress=False, encoder=encoder, max_seq_length=encoder.max_seq_length)
    np.testing.assert_array_equal(first, alone)  # a hit is what the encoder gives the text alone
    assert len(decider.cache) == 2  # size from serving.embedding_cache_size; "Name a prime." was evicted
    decider.decide(calls[1])
    assert decider.cache.misses == 4


def test_a_bucketed_batch_embeds_like_the_encoder_and_routes_each_request(encoder):
    from cr2.inputs.embed import embed_texts

    cfg = load_config()
    router = EncodingRouter(encoder, cfg)
    decider = Decider(router, _serving(embedding_cache_size=0, batch_call_overhead_tokens=4.0))
    texts = ["Short?", "A much longer question about " + "the history of mathematics and its many branches " * 6,
             "Also short?", "Tiny", "Short?"]
    out = decider.decide_batch([RouteCall(t, None, 1.0, 0.1) for t in texts])
    assert len(out) == 5 and all(isinstance(o, dict) for o in out)
    got = np.concatenate([e for _, e in router.seen])
    want = embed_texts(texts, progress=False, encoder=encoder, max_seq_length=encoder.max_seq_length)
    np.testing.assert_allclose(got, want, atol=1e-5)  # float32 rounding of the padded batch only
    decider.close()


# ---------------------------------------------------------------- /metrics
def _samples(text: str) -> dict:
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_count_requests_errors_decisions_and_upstream_failures():
    cfg = load_config()
    models = [m.id for m in cfg.models]
    with contextlib.ExitStack() as stack:
        up = stack.enter_context(running(fake_model_endpoint(models[1])))
        bad = stack.enter_context(running(fake_model_endpoint(models[1], fail=True)))
        serving = cfg.serving.model_copy(update={"endpoints": {models[1]: up + "/v1"}})
        base = stack.enter_context(running(create_app(cfg.model_copy(update={"serving": serving}), "unused",
                                                      router=StubRouter(models))))
        serving_bad = cfg.serving.model_copy(update={"endpoints": {models[1]: bad + "/v1"}})
        base_bad = stack.enter_context(running(create_app(cfg.model_copy(update={"serving": serving_bad}), "unused",
                                                          router=StubRouter(models))))
        with httpx.Client(base_url=base, timeout=30) as http:
            for _ in range(3):
                assert http.post("/route", json={"query": "q", "lam": 1.0}).status_code == 200
            assert http.post("/route", json={"query": "q", "lam": 3.0}).status_code == 400  # off-grid λ
            assert http.post("/route", content=b"{", headers={"content-type": "application/json"}).status_code == 422
            assert http.post("/route", content=b"{}", headers={"content-type": "text/plain"}).status_code == 415
            chat = {"messages": [{"role": "user", "content": "hi"}], "cr2_lam": 1.0}
            assert http.post("/v1/chat/completions", json=chat).status_code == 200
            assert http.get("/nowhere").status_code == 404
            page = http.get("/metrics")
        with httpx.Client(base_url=base_bad, timeout=30) as http:
            assert http.post("/v1/chat/completions", json=chat).status_code == 502
            bad_page = http.get("/metrics").text
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/plain")
    m = _samples(page.text)
    req = lambda route, status, method="POST": m.get(("cr2_serve_requests_total", (  # noqa: E731
        ("method", method), ("route", route), ("status", status))), 0)
    assert req("/route", "200") == 3 and req("/route", "400") == 1 and req("/route", "422") == 1
    assert req("/route", "415") == 1  # refused by the Guard, still counted
    assert req("/v1/chat/completions", "200") == 1 and req("other", "404", "GET") == 1
    assert m[("cr2_serve_errors_total", (("route", "/route"), ("status", "400")))] == 1
    assert m[("cr2_serve_request_duration_seconds_count", (("route", "/route"),))] == 6
    assert m[("cr2_serve_decisions_total", (("model", models[1]), ("placement", "defer")))] == 4  # 3 routes + 1 chat
    assert m[("cr2_serve_upstream_requests_total", (("model", models[1]), ("outcome", "ok")))] == 1
    assert m[("cr2_serve_queue_depth", (("stage", "slot"),))] == 0
    for name in ("cr2_serve_embedding_cache_hits_total", "cr2_serve_embedding_cache_misses_total",
                 "cr2_serve_batch_size_count", "cr2_serve_in_progress_requests"):
        assert (name, ()) in m, name
    b = _samples(bad_page)
    assert b[("cr2_serve_upstream_errors_total", (("kind", "status"), ("model", models[1])))] == 1
    assert b[("cr2_serve_upstream_duration_seconds_count", (("model", models[1]),))] == 1
    assert ("cr2_serve_upstream_errors_total", (("kind", "status"), ("model", models[1]))) not in m  # own registry
