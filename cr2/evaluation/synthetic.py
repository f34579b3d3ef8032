"""Synthetic data generators for tests and benchmarks (no warehouse, no files): importable as cr2.evaluation.synthetic.

1. make_routing_set — routing sets for the CR² method tests: exchangeable queries with learnable correctness
   and costs.
2. make_pool — a synthetic calibration pool for the guarantee tests and benchmark: the default labels'
   structure, no warehouse.
   It mirrors the default pipeline where the guarantees depend on it, not the numbers of a trained run:
   - four benchmarks with the default split sizes' proportions (mmlu 14,042 · bbh 6,511 · gpqa 448 ·
     mbpp 500 queries) and per-(model, benchmark) accuracies of data/qwen3_base_accuracy.csv;
   - correctness as in simulated-irt-v1 (cr2/labels/simulator.py): a shared item difficulty with a
     predictable part, η_m = −δ + σ_idio·ν_m, y_m = 1 for the round(acc·n_b) largest η_m of benchmark b;
   - a teacher p_m(x) that sees only the predictable part of the difficulty (it cannot know ν or ε);
   - normalised costs as in make_routing_set (m0 cheapest, edge costs moving with the channel, c_ref ≡ 1);
   - the risk label r(λ) = 1[m_full* ≠ m0] from the teacher (cr2.method.utility.disagree_label), and a gate
     score s(x, λ) = sigmoid(κ·Δθ(x, λ) + noise) in float32: a distilled but imperfect copy of the
     teacher margin, as the margin gate is.
   Queries are i.i.d., so random calibration/test splits are exchangeable, as the guarantees assume.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cr2.core.data import EMBED_DIM, RoutingSet
from cr2.method.utility import disagree_label, teacher_margin

# ------------------------------------------------------------------ routing sets (the CR² method tests)
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


# ------------------------------------------------------------------ the guarantee pool (default labels' structure)
BENCH_SIZES = {"mmlu": 14_042, "bbh": 6_511, "gpqa": 448, "mbpp": 500}
ACCURACY = {  # data/qwen3_base_accuracy.csv, Qwen3-1.7B/4B/8B/14B-Base
    "mmlu": (0.6263, 0.7299, 0.7689, 0.8105),
    "bbh": (0.5447, 0.7259, 0.7840, 0.8107),
    "gpqa": (0.2828, 0.3687, 0.4444, 0.3990),
    "mbpp": (0.5540, 0.6700, 0.6980, 0.7340),
}
RHO, SIGMA_D, SIGMA_IDIO = 0.5, 1.5, 1.0  # predictable share, difficulty sd, idiosyncratic sd (logits)
GATE_KAPPA, GATE_NOISE = 6.0, 0.4  # gate sharpness on the teacher margin, and its error (logits)


@dataclass(frozen=True)
class GuaranteePool:
    """n exchangeable calibration-or-test queries with everything the rules and the target mode read."""

    benchmark: np.ndarray  # [n] str
    lams: np.ndarray  # [n_lam] float64, ascending
    score: np.ndarray  # [n, n_lam] float32 gate scores s(x, λ)
    risk: np.ndarray  # [n, n_lam] bool r(λ)
    proba: np.ndarray  # [n, M] float64 teacher p_m(x)
    cost: np.ndarray  # [n, M] float64 normalised cost c_m(x, ξ)
    correct: np.ndarray  # [n, M] bool y_m(x)

    def __len__(self) -> int:
        return len(self.benchmark)

    def take(self, rows: np.ndarray) -> "GuaranteePool":
        return GuaranteePool(self.benchmark[rows], self.lams, self.score[rows], self.risk[rows], self.proba[rows],
                             self.cost[rows], self.correct[rows])


def _logit(p: np.ndarray) -> np.ndarray:
    return np.log(p / (1 - p))


def make_pool(n: int, lams: np.ndarray, seed: int) -> GuaranteePool:
    """Return n synthetic queries split over the four benchmarks in the default proportions."""
    rng = np.random.default_rng(seed)
    total = sum(BENCH_SIZES.values())
    names = list(BENCH_SIZES)
    sizes = [max(2, round(n * BENCH_SIZES[b] / total)) for b in names[1:]]
    sizes = [n - sum(sizes)] + sizes
    lams = np.sort(np.asarray(lams, dtype=np.float64))
    bench, correct, proba = [], [], []
    for b, n_b in zip(names, sizes):
        acc = np.asarray(ACCURACY[b])
        z = rng.standard_normal(n_b)
        predictable = SIGMA_D * np.sqrt(RHO) * z
        delta = predictable + SIGMA_D * np.sqrt(1 - RHO) * rng.standard_normal(n_b)
        eta = -delta[:, None] + SIGMA_IDIO * rng.standard_normal((n_b, 4))
        y = np.zeros((n_b, 4), dtype=bool)
        for m in range(4):  # the round(acc·n_b) largest η_m are correct (simulated-irt-v1's rank cut)
            y[np.argsort(-eta[:, m], kind="stable")[: int(round(acc[m] * n_b))], m] = True
        # the teacher knows the benchmark's accuracy and the predictable difficulty, slightly shrunk
        p = 1 / (1 + np.exp(-(_logit(acc)[None, :] - 0.8 * predictable[:, None] + 0.2 * rng.standard_normal((n_b, 4)))))
        bench += [b] * n_b
        correct.append(y)
        proba.append(p)
    order = rng.permutation(n)
    benchmark = np.array(bench)[order]
    correct = np.concatenate(correct)[order]
    proba = np.concatenate(proba)[order]
    distance = rng.uniform(30.0, 150.0, n)
    comm = 0.05 * (distance / 90.0) ** 2 * rng.exponential(1.0, n)
    cost = np.tile(np.array([0.15, 0.35, 0.55, 1.0]), (n, 1))
    cost[:, 0] *= rng.uniform(0.8, 1.2, n)
    cost[:, 1:3] += comm[:, None]
    cost[:, 1:3] /= 1.0 + comm[:, None]
    risk = disagree_label(proba, cost, lams)  # [n, n_lam]
    margin = teacher_margin(proba, cost, lams)
    score = (1 / (1 + np.exp(-(GATE_KAPPA * margin + GATE_NOISE * rng.standard_normal((n, 1)))))).astype(np.float32)
    return GuaranteePool(benchmark, lams, score, risk, proba, cost, correct)
