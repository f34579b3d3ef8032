"""SIMULATED correctness labels y_m(x), version 2: label source 'simulated-irt-v2' (docs/labels.md).

v1 (cr2/labels/simulator.py) nests the models too strongly (latent correlation ≈ 0.86, no guessing), so
its labels make routing look easier than measured outputs do. v2 keeps v1's exact-accuracy rank cut and
its stable hashing, and changes the structure; its shape is FITTED on measured MMLU-Pro outputs
(cr2/labels/fit_shape.py, stored in configs/labels/simulated-irt-v2.yaml). For query i of benchmark b and
subset s, embedding e(x_i), n_i answer options (0: not multiple choice), and model m:

    z_pred,i = standardise_b( sqrt(w_s)·standardise_b(μ_s) + sqrt(1 − w_s)·standardise_b(e(x_i)·g) )
    δ_i      = sqrt(ρ)·z_pred,i + sqrt(1 − ρ)·ε_i                      shared difficulty, unit variance
    η_m,i    = −sqrt(r)·δ_i + sqrt(1 − r)·ν_m,i                        knowledge latent, Corr(η_m, η_m') = r
    lucky_m,i = u_m,i < 1/n_i                                          a blind guess is right (n_i ≥ 2)
    y_m(x_i) = knows_m,i ∨ lucky_m,i,  knows = the k_m,b largest η_m of benchmark b, with the smallest
               k_m,b at which the count of correct labels reaches round(acc_m,b · n_b)

g ~ N(0, I) is a seeded direction of the encoder space, so the predictable share ρ of the difficulty is
what a router that reads the embedding can learn; μ_s, ε, ν ~ N(0, 1), u ~ U(0, 1), every one a stable
hash of (seed, ids). r, ρ and w_s come from the shape; the accuracy of every (model, benchmark) is exact:
the count of correct labels rises by 0 or 1 with each added knower, so some k hits the target count
(when the lucky guesses alone exceed it, nobody knows and only the first lucky ones by η are kept).
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from cr2.config import ModelSpec, SimulatorShape, SimulatorSpec
from cr2.core.errors import InvalidValueError
from cr2.labels.simulator import SimulatedLabels, _output_tokens, _standardise, check_simulator_inputs, hash_normal

SOURCE = "simulated-irt-v2"


def hash_uniform(*prefix: object, keys: Sequence[str]) -> np.ndarray:
    """U(0, 1) numbers, one per key, each a function of (prefix, key) only."""
    from scipy.special import ndtr

    return ndtr(hash_normal(*prefix, keys=keys))


def embedding_direction(dim: int, seed: int) -> np.ndarray:
    """g: the seeded N(0, I) direction of the encoder space that carries the text-predictable difficulty."""
    key = int.from_bytes(hashlib.blake2b(f"cr2-sim2-direction\x1f{seed}".encode(), digest_size=8).digest(), "little")
    return np.random.default_rng(key).standard_normal(dim)


def knowledge_cut(latent: np.ndarray, lucky: np.ndarray, target_count: int) -> np.ndarray:
    """[n] bool correct labels: the top-k by `latent` know, the rest are right iff lucky, with the smallest k
    whose count of correct labels reaches `target_count` (exact, see the module docstring)."""
    n = len(latent)
    target_count = int(min(max(target_count, 0), n))
    order = np.argsort(-latent, kind="stable")
    g = lucky[order]
    out = np.zeros(n, dtype=bool)
    if g.sum() >= target_count:  # guessing alone reaches the target: nobody knows, keep the first lucky ones
        out[order[np.flatnonzero(g)[:target_count]]] = True
        return out
    # correct count with the top-k knowing: C(k) = k + #lucky outside the top k (non-decreasing, steps of 0/1)
    count = np.arange(1, n + 1) + g.sum() - np.cumsum(g)
    k = int(np.searchsorted(count, target_count)) + 1
    out[order[:k]] = True
    out[order[k:]] = g[k:]
    return out


@dataclass(frozen=True)
class LatentDraws:
    """The seeded random terms of v2 for n queries and M models; they do not depend on the shape."""

    mu: np.ndarray  # [n] subset effect μ_s of each query's (benchmark, subset)
    text: np.ndarray  # [n] e(x)·g, the embedding's projection on the seeded direction g
    eps: np.ndarray  # [n] ε_i
    nu: np.ndarray  # [n, M] ν_m,i
    u: np.ndarray  # [n, M] guess uniforms u_m,i


def draw_latents(ids: np.ndarray, bench: np.ndarray, subs: np.ndarray, emb: np.ndarray, model_ids: Sequence[str],
                 seed: int) -> LatentDraws:
    """Every random term of v2, each a stable hash of (seed, ids) (the slow part: one blake2b per number)."""
    return LatentDraws(
        mu=hash_normal("cr2-sim2-subset", seed, keys=[f"{b}\x1f{s}" for b, s in zip(bench, subs)]),
        text=emb @ embedding_direction(emb.shape[1], seed) if len(ids) else np.zeros(0),
        eps=hash_normal("cr2-sim2-item", seed, keys=list(ids)),
        nu=np.stack([hash_normal("cr2-sim2-model", seed, m, keys=list(ids)) for m in model_ids], axis=1),
        u=np.stack([hash_uniform("cr2-sim2-guess", seed, m, keys=list(ids)) for m in model_ids], axis=1),
    )


def labels_from_draws(draws: LatentDraws, bench: np.ndarray, n_choices: np.ndarray, model_ids: Sequence[str],
                      targets: Mapping[tuple[str, str], float], shape: SimulatorShape
                      ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(correct [n, M] bool, difficulty δ [n], predictable part [n], latent η [n, M]) under `shape`."""
    n = len(bench)
    rho, r, w_sub = shape.predictable_share, shape.latent_correlation, shape.subset_share
    present = sorted(set(bench.tolist()))
    z_pred = np.zeros(n)
    for b in present:
        rows = bench == b
        z_sub, z_txt = _standardise(draws.mu[rows]), _standardise(draws.text[rows])
        mixed = np.sqrt(w_sub) * z_sub + np.sqrt(1.0 - w_sub) * z_txt if z_sub.any() else z_txt
        z_pred[rows] = _standardise(mixed)
    # δ_i = sqrt(ρ)·z_pred + sqrt(1 − ρ)·ε: a share ρ of Var(δ) is predictable from the query embedding
    predictable = np.sqrt(rho) * z_pred
    difficulty = predictable + np.sqrt(1.0 - rho) * draws.eps
    # η_m,i = −sqrt(r)·δ_i + sqrt(1 − r)·ν_m,i: two models' latents correlate r (fitted on measured data)
    latent = -np.sqrt(r) * difficulty[:, None] + np.sqrt(1.0 - r) * draws.nu
    floor = np.where(n_choices >= 2, 1.0 / np.maximum(n_choices, 1), 0.0) if shape.guess_floor else np.zeros(n)
    lucky = draws.u < floor[:, None]  # a blind guess among n_i options is right with probability 1/n_i
    correct = np.zeros((n, len(model_ids)), dtype=bool)
    for b in present:
        rows = np.flatnonzero(bench == b)
        for j, m in enumerate(model_ids):
            target = int(math.floor(float(targets[(m, b)]) * len(rows) + 0.5))
            correct[rows, j] = knowledge_cut(latent[rows, j], lucky[rows, j], target)
    return correct, difficulty, predictable, latent


def simulate_labels_v2(
    query_ids: Sequence[str] | np.ndarray,
    benchmarks: Sequence[str] | np.ndarray,
    subsets: Sequence[str] | np.ndarray,
    embeddings: np.ndarray,
    n_choices: Sequence[int] | np.ndarray,
    models: Sequence[ModelSpec] | Sequence[str],
    targets: Mapping[tuple[str, str], float],
    spec: SimulatorSpec,
    shape: SimulatorShape,
    model_params: Sequence[float] | None = None,
    seed: int | None = None,
    with_output_tokens: bool = True,
) -> SimulatedLabels:
    """Simulated correctness (exact per-(model, benchmark) accuracy) and output lengths under source v2.

    embeddings: [n, d] e(x) (the router's encoder); n_choices: [n] options per query, 0 or 1 where a
    blind guess cannot be right (free-form answers, code). seed: overrides spec.seed (Monte-Carlo draws).
    with_output_tokens: False leaves L_out at 0 (callers with measured lengths, e.g. the sim-to-real check).
    """
    ids = np.asarray(query_ids).astype(str)
    bench = np.asarray(benchmarks).astype(str)
    subs = np.asarray(subsets).astype(str)
    emb = np.asarray(embeddings, dtype=np.float64)
    k_opt = np.asarray(n_choices, dtype=np.int64)
    n = len(ids)
    if ids.ndim != 1 or bench.shape != (n,) or subs.shape != (n,) or k_opt.shape != (n,) or emb.ndim != 2 \
            or emb.shape[0] != n:
        raise InvalidValueError(f"query_ids ({n}), benchmarks {bench.shape}, subsets {subs.shape}, n_choices {k_opt.shape} "
                         f"and embeddings {emb.shape} must all have one entry (row) per query")
    model_ids, model_params, present = check_simulator_inputs(ids, bench, models, targets, spec, model_params,
                                                              with_output_tokens)

    seed = spec.seed if seed is None else int(seed)
    draws = draw_latents(ids, bench, subs, emb, model_ids, seed)
    correct, difficulty, predictable, latent = labels_from_draws(draws, bench, k_opt, model_ids, targets, shape)

    out_spec = spec if seed == spec.seed else spec.model_copy(update={"seed": seed})
    output_tokens = (_output_tokens(ids, bench, model_ids, model_params, out_spec) if with_output_tokens
                     else np.zeros((n, len(model_ids)), dtype=np.int64))
    return SimulatedLabels(
        query_id=ids.astype(object), model_ids=tuple(model_ids), correct=correct, output_tokens=output_tokens,
        difficulty=difficulty, predictable=predictable, latent=latent, source=SOURCE, seed=seed,
    )
