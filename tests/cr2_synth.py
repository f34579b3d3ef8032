"""Synthetic routing data for the CR² method tests: exchangeable queries with learnable correctness and costs."""
from __future__ import annotations

import numpy as np

from cr2.data import EMBED_DIM, RoutingSet

MODEL_IDS = ("qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b")


def make_routing_set(n: int, seed: int, dim: int = EMBED_DIM) -> RoutingSet:
    """Return n synthetic queries: L2-normalised embeddings clustered by topic, correctness driven by a
    latent difficulty (topic + a direction in embedding space + noise), and normalised costs with m0
    cheapest, edge costs moving with the channel and c_ref ≡ 1."""
    rng = np.random.default_rng(seed)
    task = np.random.default_rng(12345)  # shared across calls: the same topics and difficulty for every split
    n_topics = 16
    centroids = task.standard_normal((n_topics, dim))
    centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
    topic_difficulty = 2.0 * task.standard_normal(n_topics)
    direction = task.standard_normal(dim)
    direction /= np.linalg.norm(direction)
    topic = rng.integers(0, n_topics, n)
    emb = centroids[topic] + 0.7 * rng.standard_normal((n, dim)) / np.sqrt(dim)
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    difficulty = topic_difficulty[topic] + np.sqrt(dim) * (emb @ direction) + 0.5 * rng.standard_normal(n)
    skill = np.array([-0.6, 0.2, 0.7, 1.2])  # bigger model, higher accuracy
    p = 1.0 / (1.0 + np.exp(-(skill[None, :] - difficulty[:, None])))
    correct = rng.random((n, 4)) < p
    distance = rng.uniform(30.0, 150.0, n)
    comm = 0.05 * (distance / 90.0) ** 2 * rng.exponential(1.0, n)  # channel-dependent edge overhead
    base = np.array([0.15, 0.35, 0.55, 1.0])
    cost = np.tile(base, (n, 1))
    cost[:, 0] *= rng.uniform(0.8, 1.2, n)
    cost[:, 1:3] += comm[:, None]
    cost[:, 1:3] /= (1.0 + comm[:, None])  # keep c_ref ≡ 1 while edge costs move with the channel
    return RoutingSet(
        query_id=np.array([f"q{seed}-{i}" for i in range(n)]),
        benchmark=np.array(["mmlu"] * n),
        embedding=emb,
        correct=correct,
        cost=cost.astype(np.float32),
        model_ids=MODEL_IDS,
        distance_m=distance,
    )
