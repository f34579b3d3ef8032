"""SIMULATED correctness labels y_m(x) and output lengths L_out,m(x): label source 'simulated-irt-v1'.

Without the Qwen3 weights cr2 cannot measure per-query correctness, so the default labels come from an
item-response model fitted to the Qwen3 technical report's per-benchmark accuracies
(data/qwen3_base_accuracy.csv). The model and its limits are described in docs/labels.md; in short,
for query i of benchmark b and subset s and model m:

    z_pred,i = standardise_b( sqrt(w_s)·standardise_b(μ_s) + sqrt(1 − w_s)·standardise_b(t(x_i)) )
    δ_i      = σ_d · ( sqrt(ρ)·z_pred,i + sqrt(1 − ρ)·ε_i )          shared item difficulty, logits
    η_m,i    = −δ_i + σ_idio·ν_m,i                                   latent ability-minus-difficulty
    y_m(x_i) = 1  iff  η_m,i is among the round(acc_m,b · n_b) largest of benchmark b

μ_s ~ N(0, 1) is a subset (subject/task) effect, t(x) a random projection of the text's hashed word
uni- and bigram counts, ε_i and ν_m,i standard normals; ρ = predictable_share, σ_d = difficulty_sd,
σ_idio = idiosyncratic_sd. Every random number is a stable hash of (seed, query or subset, model), so
a query's μ, t, ε and ν never depend on the other queries; only the within-benchmark standardisation
and the rank cut (the count round(acc·n_b)) see the whole set, so adding queries changes others' labels
only near the cut. The ability θ_m,b of the usual IRT form θ − δ drops out: ranking η within (m, b) and
keeping the top round(acc·n_b) is thresholding at the quantile that makes the accuracy exact.
"""
from __future__ import annotations

import csv
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from cr2.config import ModelSpec, SimulatorSpec
from cr2.core.errors import DataValidationError, InvalidValueError
from cr2.core.hashing import stable_u64_array

SOURCE = "simulated-irt-v1"

# [cr2 decision] fixed shape parameters of simulated-irt-v1 (a change is a new source version)
SUBSET_SHARE = 0.5  # share of the predictable variance carried by the subset effect (benchmarks with > 1 subset)
LENGTH_SHARED = 0.8  # share of the log output-length variance common to all models on a query
EDGE_LENGTH_RANGE = (0.9, 1.1)  # L_out factor of the smallest … largest edge model (device model: 1.0)
N_TEXT_FEATURES = 2**18  # hashed word uni-/bigram features of t(x)


@dataclass(frozen=True)
class SimulatedLabels:
    """Simulated y_m(x) and L_out,m(x) for n queries and M models (pool order), with the latent terms."""

    query_id: np.ndarray  # [n] str
    model_ids: tuple[str, ...]  # pool order
    correct: np.ndarray  # [n, M] bool, simulated y_m(x)
    output_tokens: np.ndarray  # [n, M] int64, simulated L_out,m(x), tokens, in [1, max_tokens]
    difficulty: np.ndarray  # [n] float64, shared item difficulty δ, logits
    predictable: np.ndarray  # [n] float64, the part of δ predictable from the query, σ_d·sqrt(ρ)·z_pred, logits
    latent: np.ndarray  # [n, M] float64, η_m = −δ + σ_idio·ν_m, logits
    source: str = SOURCE
    seed: int = 0

    def __post_init__(self) -> None:
        n, m = len(self.query_id), len(self.model_ids)
        for name, shape in (("correct", (n, m)), ("output_tokens", (n, m)), ("difficulty", (n,)),
                            ("predictable", (n,)), ("latent", (n, m))):
            if getattr(self, name).shape != shape:
                raise InvalidValueError(f"SimulatedLabels.{name} has shape {getattr(self, name).shape}, expected {shape}")

    def __len__(self) -> int:
        return len(self.query_id)

    def to_frame(self):
        """Long form, one row per (query, model): query_id, model_id, correct, output_tokens (the labels table)."""
        import pandas as pd

        k = len(self.model_ids)
        return pd.DataFrame({
            "query_id": np.repeat(np.asarray(self.query_id, dtype=object), k),
            "model_id": np.tile(np.asarray(self.model_ids, dtype=object), len(self)),
            "correct": self.correct.reshape(-1),
            "output_tokens": self.output_tokens.reshape(-1),
        })


# ---------------------------------------------------------------- stable randomness


def hash_normal(*prefix: object, keys: Sequence[str]) -> np.ndarray:
    """Standard normals, one per key, each a function of (prefix, key) only (blake2b → uniform → Φ⁻¹)."""
    from scipy.special import ndtri

    head = "\x1f".join(str(p) for p in prefix) + "\x1f"
    u = ((stable_u64_array([head + k for k in keys]) >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53  # (0, 1)
    return ndtri(u)


def _standardise(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return np.zeros_like(x) if not np.isfinite(sd) or sd < 1e-12 else (x - x.mean()) / sd


def text_scores(texts: Sequence[str], seed: int) -> np.ndarray:
    """t(x): a random projection (weights seeded by `seed`) of the L2-normalised hashed word 1-2-gram counts."""
    from sklearn.feature_extraction.text import HashingVectorizer

    features = HashingVectorizer(n_features=N_TEXT_FEATURES, ngram_range=(1, 2), alternate_sign=False,
                                 norm="l2", lowercase=True).transform(list(texts))
    weights = np.random.default_rng(
        int.from_bytes(hashlib.blake2b(f"cr2-sim-text\x1f{seed}".encode(), digest_size=8).digest(), "little")
    ).standard_normal(N_TEXT_FEATURES)
    return np.asarray(features @ weights, dtype=np.float64).ravel()


# ---------------------------------------------------------------- targets
def _norm_name(name: str) -> str:
    name = name.strip().lower().rsplit("/", 1)[-1]
    return name[: -len("-base")] if name.endswith("-base") else name


def load_accuracy_targets(path: str | Path, models: Sequence[ModelSpec] | Sequence[str]) -> dict[tuple[str, str], float]:
    """{(model_id, benchmark): accuracy in [0, 1]} from a CSV of accuracies in % (one row per model).

    A CSV row matches a model when its name, lower-cased without an 'org/' prefix and a '-Base' suffix,
    equals the model id or the last part of its hf_name (Qwen3-8B-Base ↔ qwen3-8b, Qwen/Qwen3-8B).
    Columns other than model and params_b are benchmarks.
    """
    import io

    from cr2.core.boundary import MAX_YAML_BYTES, read_bounded
    from cr2.core.errors import InvalidValueError

    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise DataValidationError(f"{path}: accuracy file not found; set labels.simulator.accuracy_file")
    try:  # bounded: a regular file of at most 1 MiB (a table of a few models' accuracies)
        text = read_bounded(path, MAX_YAML_BYTES, "CSV file").decode("utf-8")
    except (InvalidValueError, UnicodeDecodeError) as exc:
        raise DataValidationError(f"{path}: not a readable accuracy CSV ({exc}); set labels.simulator.accuracy_file") from None
    rows = list(csv.DictReader(io.StringIO(text, newline="")))
    if not rows or "model" not in rows[0]:
        raise DataValidationError(f"{path}: expected a CSV with a 'model' column and one column per benchmark (%)")
    by_name = {_norm_name(r["model"]): r for r in rows}
    out: dict[tuple[str, str], float] = {}
    for m in models:
        mid = m.id if isinstance(m, ModelSpec) else str(m)
        names = {_norm_name(mid)} | ({_norm_name(m.hf_name)} if isinstance(m, ModelSpec) else set())
        row = next((by_name[n] for n in names if n in by_name), None)
        if row is None:
            raise DataValidationError(
                f"{path}: no accuracy row for model '{mid}' (rows: {', '.join(r['model'] for r in rows)}); "
                "add one or change the pool"
            )
        for bench, value in row.items():
            if bench in ("model", "params_b") or value in (None, ""):
                continue
            try:
                pct = float(value)
            except ValueError:
                raise DataValidationError(f"{path}: {row['model']}.{bench} = {value!r} is not a number (%)") from None
            if not 0.0 <= pct <= 100.0:
                raise DataValidationError(f"{path}: {row['model']}.{bench} = {pct} is outside 0–100 (%)")
            out[(mid, bench)] = pct / 100.0
    return out


def with_dataset_targets(targets: Mapping[tuple[str, str], float], models: Sequence[ModelSpec],
                           accuracy_pct: Mapping[str, Mapping[str, float]]) -> dict[tuple[str, str], float]:
    """`targets` completed from the benchmarks' dataset definitions ({benchmark: {model name: %}}, the
    `simulated.accuracy_pct` of configs/datasets/<name>.yaml) for pairs the accuracy file lacks; names
    match a model as in `load_accuracy_targets`."""
    out = dict(targets)
    for bench, by_name in accuracy_pct.items():
        norm = {_norm_name(k): float(v) for k, v in by_name.items()}
        for m in models:
            if (m.id, bench) in out:
                continue
            pct = next((norm[n] for n in (_norm_name(m.id), _norm_name(m.hf_name)) if n in norm), None)
            if pct is not None:
                if not 0.0 <= pct <= 100.0:
                    raise DataValidationError(f"benchmark '{bench}': simulated.accuracy_pct of {m.id} = {pct} is "
                                              "outside 0–100 (%)")
                out[(m.id, bench)] = pct / 100.0
    return out


def length_factors(model_params: Sequence[float]) -> np.ndarray:
    """L_out factor per model: 1 for the device model (index 0); edge models from 0.9 (smallest) to 1.1
    (largest), linear in log parameter count; a lone edge model gets 1.0."""
    params = np.asarray(model_params, dtype=np.float64)
    out = np.ones(len(params))
    if len(params) < 2:
        return out
    log_edge = np.log(params[1:])
    lo, hi = EDGE_LENGTH_RANGE
    span = log_edge.max() - log_edge.min()
    out[1:] = (lo + hi) / 2 if span <= 0 else lo + (hi - lo) * (log_edge - log_edge.min()) / span
    return out


# ---------------------------------------------------------------- the simulator
def check_simulator_inputs(ids: np.ndarray, bench: np.ndarray, models: Sequence[ModelSpec] | Sequence[str],
                           targets: Mapping[tuple[str, str], float], spec: SimulatorSpec,
                           model_params: Sequence[float] | None, with_output_tokens: bool = True,
                           ) -> tuple[list[str], list[float], list[str]]:
    """Validate what every simulator version needs; return (model ids, model params, benchmarks present).

    Query ids unique; models unique with their parameter counts; a target accuracy in [0, 1] for every
    (model, benchmark) present; an output-length distribution for every benchmark (when lengths are drawn).
    """
    n = len(ids)
    if n and len(np.unique(ids)) != n:
        uniq, counts = np.unique(ids, return_counts=True)
        raise InvalidValueError(f"query_ids must be unique; repeated: {uniq[counts > 1][:3].tolist()}")
    model_ids = [m.id if isinstance(m, ModelSpec) else str(m) for m in models]
    if model_params is None:
        if not all(isinstance(m, ModelSpec) for m in models):
            raise InvalidValueError("pass ModelSpecs, or model ids together with model_params")
        model_params = [m.params for m in models]
    if len(model_params) != len(model_ids) or len(set(model_ids)) != len(model_ids) or not model_ids:
        raise InvalidValueError(f"models {model_ids} must be unique and match model_params ({len(model_params)})")
    present = sorted(set(bench.tolist()))
    missing = [(m, b) for m in model_ids for b in present if (m, b) not in targets]
    if missing:
        raise InvalidValueError(f"no target accuracy for {missing[:4]}{' …' if len(missing) > 4 else ''}; "
                                "add them to the accuracy file or drop the benchmark")
    for key in [(m, b) for m in model_ids for b in present]:
        if not 0.0 <= float(targets[key]) <= 1.0 or not math.isfinite(float(targets[key])):
            raise InvalidValueError(f"target accuracy {key} = {targets[key]} must be a fraction in [0, 1] (not %)")
    no_len = [b for b in present if b not in spec.output_tokens] if with_output_tokens else []
    if no_len:
        raise InvalidValueError(f"labels.simulator.output_tokens has no entry for benchmark(s) {no_len}")
    return model_ids, list(model_params), present


def simulate_labels(
    query_ids: Sequence[str] | np.ndarray,
    benchmarks: Sequence[str] | np.ndarray,
    subsets: Sequence[str] | np.ndarray,
    texts: Sequence[str],
    models: Sequence[ModelSpec] | Sequence[str],
    targets: Mapping[tuple[str, str], float],
    spec: SimulatorSpec,
    model_params: Sequence[float] | None = None,
) -> SimulatedLabels:
    """Simulated correctness and output lengths whose accuracy per (model, benchmark) equals the target
    to within 1/(2·n_b) (see the module docstring and docs/labels.md).

    models: ModelSpecs in pool order (device first), or model ids with `model_params` beside them.
    targets: {(model_id, benchmark): accuracy in [0, 1]} (load_accuracy_targets).
    """
    ids = np.asarray(query_ids).astype(str)
    bench = np.asarray(benchmarks).astype(str)
    subs = np.asarray(subsets).astype(str)
    texts = list(texts)
    n = len(ids)
    if ids.ndim != 1 or bench.shape != (n,) or subs.shape != (n,) or len(texts) != n:
        raise InvalidValueError(f"query_ids ({n}), benchmarks {bench.shape}, subsets {subs.shape} and texts ({len(texts)}) "
                         "must all have one entry per query")
    model_ids, model_params, present = check_simulator_inputs(ids, bench, models, targets, spec, model_params)

    seed = spec.seed
    rho = spec.predictable_share
    # predictable part: subset effect μ_s and text score t(x), standardised within each benchmark
    mu = hash_normal("cr2-sim-subset", seed, keys=[f"{b}\x1f{s}" for b, s in zip(bench, subs)])
    t = text_scores(texts, seed) if n else np.zeros(0)
    z_pred = np.zeros(n)
    for b in present:
        rows = bench == b
        z_sub, z_txt = _standardise(mu[rows]), _standardise(t[rows])
        mixed = np.sqrt(SUBSET_SHARE) * z_sub + np.sqrt(1.0 - SUBSET_SHARE) * z_txt if z_sub.any() else z_txt
        z_pred[rows] = _standardise(mixed)
    eps = hash_normal("cr2-sim-item", seed, keys=list(ids))
    predictable = spec.difficulty_sd * np.sqrt(rho) * z_pred
    # δ_i = σ_d·(sqrt(ρ)·z_pred + sqrt(1 − ρ)·ε): a share ρ of Var(δ) is predictable from the query
    difficulty = predictable + spec.difficulty_sd * np.sqrt(1.0 - rho) * eps
    nu = np.stack([hash_normal("cr2-sim-model", seed, m, keys=list(ids)) for m in model_ids], axis=1)
    # η_m,i = −δ_i + σ_idio·ν_m,i  (θ_m,b is absorbed by the rank cut below)
    latent = -difficulty[:, None] + spec.idiosyncratic_sd * nu

    correct = np.zeros((n, len(model_ids)), dtype=bool)
    for b in present:
        rows = np.flatnonzero(bench == b)
        for j, m in enumerate(model_ids):
            k = int(math.floor(float(targets[(m, b)]) * len(rows) + 0.5))
            # exactly k correct: the k largest η (ties, probability 0, by query id for order independence)
            order = np.lexsort((ids[rows], -latent[rows, j]))
            correct[rows[order[:k]], j] = True

    output_tokens = _output_tokens(ids, bench, model_ids, model_params, spec)
    return SimulatedLabels(
        query_id=ids.astype(object), model_ids=tuple(model_ids), correct=correct, output_tokens=output_tokens,
        difficulty=difficulty, predictable=predictable, latent=latent, source=SOURCE, seed=seed,
    )


def _output_tokens(ids: np.ndarray, bench: np.ndarray, model_ids: list[str], model_params: Sequence[float],
                   spec: SimulatorSpec) -> np.ndarray:
    """L_out,m(x) = clip(round(median_b·f_m·exp(σ_b·(sqrt(a)·ζ_i + sqrt(1 − a)·ζ_m,i))), 1, max_tokens)."""
    n = len(ids)
    shared = hash_normal("cr2-sim-length", spec.seed, keys=list(ids))
    own = np.stack([hash_normal("cr2-sim-length", spec.seed, m, keys=list(ids)) for m in model_ids], axis=1)
    z = np.sqrt(LENGTH_SHARED) * shared[:, None] + np.sqrt(1.0 - LENGTH_SHARED) * own
    median = np.empty(n)
    sigma = np.empty(n)
    cap = np.empty(n)
    for b in set(bench.tolist()):
        rows = bench == b
        dist = spec.output_tokens[b]
        median[rows], sigma[rows], cap[rows] = dist.median_tokens, dist.sigma, dist.max_tokens
    factor = length_factors(model_params)
    tokens = np.rint(median[:, None] * factor[None, :] * np.exp(sigma[:, None] * z))
    return np.clip(tokens, 1, cap[:, None]).astype(np.int64)
