"""Decisions in both directions: an Evaluation's per-query decisions as rows of the `decisions` table
(`decision_frame`, what the evaluate, certify and re-calibrate stages write) and the stored rows back as one
OperatingPoint per (method, λ, α) (`operating_points`, what the intervals, equal-risk, pool and level stages read).
One mapping, one home: a column added to one direction is added to the other here."""
from __future__ import annotations

import numpy as np
import pandas as pd


def decision_frame(ev) -> pd.DataFrame:
    """The per-query decisions of an Evaluation as rows of the `decisions` table (one block of test rows per
    operating point, in the order they were recorded)."""
    model_ids = np.asarray(ev.test.model_ids)
    n, points = len(ev.test), ev.decisions
    if not points:
        return pd.DataFrame(columns=["run_id", "method", "lam", "alpha", "query_id", "chosen_model", "accepted_local",
                                     "gate_accept"])
    gate = np.zeros(n * len(points), dtype=bool)
    gate_missing = np.zeros(n * len(points), dtype=bool)
    for i, (_, _, _, dec) in enumerate(points):
        g = dec.extra.get("gate_accept")
        if g is None:
            gate_missing[i * n:(i + 1) * n] = True
        else:
            gate[i * n:(i + 1) * n] = np.asarray(g, dtype=bool)
    # string columns as categoricals (codes repeated, each string stored once): the same rows in the warehouse
    method_codes, methods = pd.factorize(np.array([p[0] for p in points], dtype=object))
    query_codes, query_ids = pd.factorize(np.asarray(ev.test.query_id))
    return pd.DataFrame({
        "run_id": ev.run_id,
        "method": pd.Categorical.from_codes(np.repeat(method_codes, n), methods),
        "lam": np.repeat(np.array([p[1] for p in points], dtype=np.float64), n),
        "alpha": pd.arrays.FloatingArray(np.repeat(np.array([0.0 if p[2] is None else p[2] for p in points]), n),
                                         np.repeat(np.array([p[2] is None for p in points]), n)),  # NULL, never NaN
        "query_id": pd.Categorical.from_codes(np.tile(query_codes, len(points)), query_ids),
        "chosen_model": pd.Categorical.from_codes(np.concatenate([p[3].chosen for p in points]), model_ids),
        "accepted_local": np.concatenate([np.asarray(p[3].accepted_local, dtype=bool) for p in points]),
        "gate_accept": pd.arrays.BooleanArray(gate, gate_missing),
    })


def _positions(index: pd.Index, column: pd.Series) -> np.ndarray:
    """Position in `index` of each value of `column` (−1: absent); a Categorical column is looked up once per
    category, not once per row."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        at = index.get_indexer(column.cat.categories)
        codes = column.cat.codes.to_numpy()
        return np.where(codes >= 0, at[codes], -1)
    return index.get_indexer(column)


def operating_points(decisions: pd.DataFrame, query_id: np.ndarray, model_ids: tuple[str, ...]) -> list:
    """The run's decisions as one OperatingPoint per (method, λ, α), rows in test order."""
    from cr2.core.errors import DataValidationError
    from cr2.evaluation.intervals import OperatingPoint

    row = _positions(pd.Index(query_id), decisions["query_id"])
    model = _positions(pd.Index(model_ids), decisions["chosen_model"])
    if (row < 0).any() or (model < 0).any():
        raise DataValidationError("the run's decisions name queries or models outside its test split; re-run `cr2 run`")
    method = decisions["method"]
    lam = decisions["lam"].astype("float64").to_numpy()
    alpha = decisions["alpha"].astype("float64").fillna(-1.0).to_numpy()
    # one code per (method, λ, α) in first-seen order: each column factorised alone and the code triples
    # combined (a MultiIndex over millions of rows gives the same groups several times slower)
    combined = np.zeros(len(decisions), dtype=np.int64)
    for column in (method, lam, alpha):
        column_codes, column_keys = pd.factorize(column)
        combined = combined * len(column_keys) + column_codes
    codes, _ = pd.factorize(combined)
    first = np.unique(codes, return_index=True)[1]  # the first row of each group, in code order
    keys = list(zip(method.iloc[first].to_numpy(dtype=object), lam[first], alpha[first]))
    chosen = np.full((len(keys), len(query_id)), -1, dtype=np.int64)
    chosen[codes, row] = model
    gate = decisions["gate_accept"].astype("boolean").fillna(decisions["chosen_model"] == model_ids[0]).to_numpy(bool)
    accept = np.zeros(chosen.shape, dtype=bool)
    accept[codes, row] = gate
    if (chosen < 0).any():
        raise DataValidationError("some operating point of the run lacks decisions for part of the test split; "
                                  "re-run `cr2 run`")
    return [OperatingPoint(method=m, lam=float(lam), alpha=None if a < 0 else float(a), chosen=chosen[g],
                           gate_accept=accept[g]) for g, (m, lam, a) in enumerate(keys)]


__all__ = ["decision_frame", "operating_points"]
