"""Label diagnostics of a pool: what the labels allow any router to gain, so a result can be explained.

- headroom: the full-information reference's fixed-accuracy saving vs KNN — the oracle that knows every y_m(x) and
  c_m(x, ξ) and picks argmax_m y_m − λ·c_m (cr2.method.utility.oracle_choice) over a λ sweep. No router can beat it, so its
  saving vs KNN at a target is the room any router has there;
- pairwise correctness correlations: the φ coefficient (Pearson on 0/1) of y_a and y_b over the queries; near 1
  means the two models fail on the same questions and routing between them gains little;
- P(device right | largest wrong): how often the device model answers a question m_ref gets wrong — the only
  rows where deferring to the largest model loses accuracy;
- predictability from the text: cross-validated ROC AUC of a k-nearest-neighbour classifier on the query
  embeddings e(x), predicting each model's correctness y_m and each pair's disagreement 1[y_a ≠ y_b]. 0.5 means
  the embedding says nothing about it; a router that reads e(x) cannot do better than what the text reveals.

Rows are tidy: subject (model or method), other (second model / reference, or None), metric, target, estimate,
lower, upper, n_resamples. Pure numpy; the same function serves every pool and scenario.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from cr2.core.errors import InvalidValueError

if TYPE_CHECKING:  # annotations only: the module imports pandas where it uses it
    import pandas as pd

HEADROOM_LAMS = np.concatenate([[0.0], np.geomspace(1e-3, 1e3, 121)])  # λ sweep of the full-information reference
DEFAULT_K = 20  # neighbours of the k-NN predictability probe
DEFAULT_FOLDS = 5


def correctness_correlation(correct: np.ndarray) -> np.ndarray:
    """[M, M] φ coefficient between the models' correctness columns (NaN where a column is constant)."""
    y = np.asarray(correct, dtype=np.float64)
    if y.ndim != 2:
        raise InvalidValueError(f"correct must be [n, M], got shape {y.shape}")
    yc = y - y.mean(axis=0)
    sd = np.sqrt((yc ** 2).sum(axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        return (yc.T @ yc) / np.outer(sd, sd)


def p_right_given_wrong(correct: np.ndarray, right: int, wrong: int) -> tuple[float, int]:
    """(P(y_right = 1 | y_wrong = 0), number of rows with y_wrong = 0); NaN when the `wrong` model is never wrong."""
    y = np.asarray(correct, dtype=bool)
    w = ~y[:, wrong]
    n = int(w.sum())
    return (float(y[w, right].mean()) if n else float("nan")), n


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (Mann–Whitney U / (n_pos · n_neg), ties count one half); NaN for one class."""
    from scipy.stats import rankdata

    y = np.asarray(labels, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    r = rankdata(np.asarray(scores, dtype=np.float64))
    return float((r[y].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def knn_cv_scores(embedding: np.ndarray, targets: np.ndarray, k: int = DEFAULT_K, n_folds: int = DEFAULT_FOLDS,
                  rng: np.random.Generator | None = None, block: int = 2048) -> np.ndarray:
    """Out-of-fold k-NN scores [n, T]: for each query, the mean of each target column over its k most similar
    training-fold queries (cosine similarity of the L2-normalised embeddings). One neighbour search serves all T."""
    e = np.asarray(embedding, dtype=np.float32)
    t = np.asarray(targets, dtype=np.float64)
    n = e.shape[0]
    if t.shape[0] != n:
        raise InvalidValueError(f"targets have {t.shape[0]} rows, embeddings {n}")
    if n_folds < 2 or n < n_folds or k < 1:
        raise InvalidValueError(f"k-NN cross-validation needs ≥ 2 folds, ≥ 1 neighbour and n ≥ folds (n={n}, "
                                f"folds={n_folds}, k={k})")
    rng = rng if rng is not None else np.random.default_rng(0)
    fold = rng.permutation(n) % n_folds
    out = np.empty_like(t)
    for f in range(n_folds):
        test_rows, train_rows = np.flatnonzero(fold == f), np.flatnonzero(fold != f)
        kk = min(k, train_rows.size)
        for s in range(0, test_rows.size, block):
            rows = test_rows[s:s + block]
            sim = e[rows] @ e[train_rows].T  # [b, n_train]
            nb = np.argpartition(-sim, kk - 1, axis=1)[:, :kk]
            out[rows] = t[train_rows][nb].mean(axis=1)
    return out


def predictability_rows(embedding: np.ndarray, correct: np.ndarray, model_ids: Sequence[str], k: int = DEFAULT_K,
                        n_folds: int = DEFAULT_FOLDS, seed: int = 0) -> list[dict[str, Any]]:
    """Cross-validated k-NN AUC for each model's correctness (metric knn_auc_correct) and each pair's disagreement
    (knn_auc_disagree)."""
    y = np.asarray(correct, dtype=bool)
    m = y.shape[1]
    pairs = [(a, b) for a in range(m) for b in range(a + 1, m)]
    cols = [y[:, j] for j in range(m)] + [y[:, a] != y[:, b] for a, b in pairs]
    targets = np.stack(cols, axis=1).astype(np.float64)
    scores = knn_cv_scores(embedding, targets, k, n_folds, np.random.default_rng(seed))
    rows = []
    for j in range(m):
        rows.append(_row(model_ids[j], None, "knn_auc_correct", roc_auc(targets[:, j], scores[:, j]), n=len(y)))
    for i, (a, b) in enumerate(pairs):
        c = m + i
        rows.append(_row(model_ids[a], model_ids[b], "knn_auc_disagree", roc_auc(targets[:, c], scores[:, c]),
                         n=len(y)))
        rows.append(_row(model_ids[a], model_ids[b], "disagree_rate", float(targets[:, c].mean()), n=len(y)))
    return rows


def _row(subject: str, other: str | None, metric: str, estimate: float, target: float | None = None,
         lower: float | None = None, upper: float | None = None, n: int = 0) -> dict[str, Any]:
    return {"subject": subject, "other": other, "metric": metric, "target": target, "estimate": float(estimate),
            "lower": lower, "upper": upper, "n": int(n)}


def label_rows(correct: np.ndarray, model_ids: Sequence[str], device: int = 0, largest: int = -1
               ) -> list[dict[str, Any]]:
    """Accuracy of each model, φ of each pair, P(device right | largest wrong) and P(largest right | device wrong)."""
    y = np.asarray(correct, dtype=bool)
    m = y.shape[1]
    largest = largest % m
    phi = correctness_correlation(y)
    rows = [_row(model_ids[j], None, "accuracy", float(y[:, j].mean()), n=len(y)) for j in range(m)]
    rows += [_row(model_ids[a], model_ids[b], "phi", float(phi[a, b]), n=len(y))
             for a in range(m) for b in range(a + 1, m)]
    p, n = p_right_given_wrong(y, device, largest)
    rows.append(_row(model_ids[device], model_ids[largest], "p_device_right_given_largest_wrong", p, n=n))
    p, n = p_right_given_wrong(y, largest, device)
    rows.append(_row(model_ids[largest], model_ids[device], "p_largest_right_given_device_wrong", p, n=n))
    rows.append(_row("any", None, "solvable_rate", float(y.any(axis=1).mean()), n=len(y)))
    return rows


def oracle_sweep(correct: np.ndarray, cost: np.ndarray, lams: np.ndarray = HEADROOM_LAMS) -> np.ndarray:
    """[n, k] chosen model of the full-information reference argmax_m y_m − λ·c_m at every λ (cheaper on ties)."""
    from cr2.method.utility import oracle_choice

    return np.asarray(oracle_choice(np.asarray(correct, dtype=bool), np.asarray(cost, dtype=np.float64),
                                    np.asarray(lams, dtype=np.float64)))


def reference_accuracy_gaps(correct: np.ndarray, names: list[str], pools: Sequence[Any], idx: np.ndarray,
                            level: float = 0.95) -> list[dict[str, Any]]:
    """Per pool and every other model of it: accuracy(m_ref) − accuracy(model) over the questions every pool model
    answered, with its paired-bootstrap percentile interval (`idx`: cr2.evaluation.statistics.resample_indices over all n
    questions, one index for every pool and model).

    correct: [n, K] float (1 right, 0 wrong, NaN no output); names: the K model names of its columns; pools:
    cr2.studies.pools.Pool (models, device, reference; not imported here: pools imports this module)."""
    from cr2.evaluation.statistics import percentile_interval, resample_counts, resampled_means

    col = {n: i for i, n in enumerate(names)}
    counts = resample_counts(idx, correct.shape[0])
    rows = []
    for pool in pools:
        y = correct[:, [col[m.name] for m in pool.models]]
        rows_ok = np.isfinite(y).all(axis=1)
        ref = [m.name for m in pool.models].index(pool.reference.name)
        d = np.nan_to_num(y[:, [ref]] - y)  # [n, M]: m_ref − each model (0 off the answered rows)
        samples = resampled_means(d, None, rows_ok, counts=counts)
        for j, m in enumerate(pool.models):
            if j == ref:
                continue
            iv = percentile_interval(samples[:, j], float(d[rows_ok, j].mean()), level)
            rows.append({"pool": pool.pool_id, "reference": pool.reference.name, "model": m.name,
                         "role": "device" if m is pool.device else "edge", "estimate": iv.estimate,
                         "lower": iv.lower, "upper": iv.upper, "n_resamples": iv.n_resamples, "p_value": iv.p_value})
    return rows


def reference_accuracy_gap_family(correct: np.ndarray, names: list[str], pools: Sequence[Any], n_resamples: int,
                                  rng: np.random.Generator, level: float = 0.95) -> "pd.DataFrame":
    """Is m_ref the most accurate model of its pool? The rows of reference_accuracy_gaps (accuracy(m_ref) −
    accuracy(other model) with its paired percentile interval and bootstrap p) on one index of n_resamples paired
    resamples of all the questions drawn from rng (shared by every pool and model), each with p, its Holm
    adjustment over all the rows (one family: every pool × other model, read together) and the word that Holm p
    allows (`verdict`: "dearer" where m_ref is detectably less accurate). Unit of resampling: the questions; the
    labels are the whole benchmark's, so nothing else varies."""
    import pandas as pd

    from cr2.evaluation.statistics import holm_of_stored, resample_indices, saving_verdict

    gaps = pd.DataFrame(reference_accuracy_gaps(correct, names, pools,
                                                resample_indices(correct.shape[0], n_resamples, rng), level))
    if gaps.empty:
        return pd.DataFrame(columns=["pool", "reference", "model", "role", "estimate", "lower", "upper",
                                     "n_resamples", "p_value", "p", "p_holm", "verdict"])
    gaps["p"] = gaps["p_value"].astype(float)
    gaps["p_holm"] = holm_of_stored(gaps["p"])
    gaps["verdict"] = [saving_verdict(lo, hi, q, level) for lo, hi, q in zip(gaps["lower"], gaps["upper"],
                                                                              gaps["p_holm"])]
    return gaps
