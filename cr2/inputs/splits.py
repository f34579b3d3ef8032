"""Train/val/test splits and the dev slice of train, seeded, stratified, and stable as queries are added.

[cr2 decision] The split of a query is a pure function of (seed, query_id). That is the only way to
promise that adding queries later never moves an existing one: if a query's split could depend on the
other queries present, some addition would move it. Within that constraint the rule is made as
balanced as a stateless rule can be:

- Block rule (ids ending in an integer: mmlu/<subject>/00042, bbh/<task>/00007, gpqa/main/00447,
  mbpp/123 — every shipped benchmark). Write the id as prefix + i. The ids i = b·k … b·k + b − 1 of one
  prefix form a block of b slots (b = 10 for 80/10/10: the smallest size with integer counts). Each
  block holds exactly round(b·fraction) slots of each split — 8 train, 1 val, 1 test — in an order
  permuted by a generator seeded with a stable hash of (seed, prefix, k). A query takes the split of its
  slot i mod b. Consecutive ids (a subject's rows, in file order) are therefore split exactly 80/10/10
  in every full block; only the last, partial block of each prefix deviates, by less than one query
  per split. New rows appended to a subject fill new slots; no existing slot changes.
- Hash rule (any other id): u = blake2b(seed, query_id) → [0, 1); train if u < 0.8, val if u < 0.9,
  else test. Unbiased, but the counts of a stratum of n queries deviate by O(sqrt(n)) (binomial).

Trade-off: exact per-stratum counts computed by ranking within a stratum would move queries across
the cut points whenever a query is added; the block rule keeps both stability and near-exact
stratification, but only for ids with a running integer (the shipped data's ids); others fall back to
binomial balance. Shuffling ids or renumbering a file moves queries, as it changes the ids themselves.

Strata. A query's stratum is '<benchmark>/<subset>', or '<benchmark>/*' when its subset has fewer than
spec.min_stratum queries (those pool into their benchmark). Because every prefix (one subset's run of
ids) is balanced on its own, every stratum — and every benchmark — is balanced; the stratum label does
not enter the assignment, so a subset growing past min_stratum relabels its stratum but moves nobody.

Dev. dev ⊂ train is chosen by a second hash: v = blake2b(seed, 'dev', query_id) < spec.dev_fraction.
It is used only for checkpoint selection, so its binomial size deviation (±6 of ≈ 36 on GPQA) is harmless.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cr2.config import SplitSpec
from cr2.core.boundary import shown
from cr2.core.hashing import stable_u64
from cr2.core.errors import InvalidValueError

SPLITS = ("train", "val", "test")
_TRAILING_INT = re.compile(r"^(.*?)(\d+)$", re.DOTALL)
_MAX_BLOCK = 1000



def stable_uniform(*parts: object) -> float:
    """A uniform number in [0, 1) that depends only on the parts (53 bits of a blake2b hash)."""
    return (stable_u64(*parts) >> 11) * 2.0**-53


@dataclass(frozen=True)
class SplitAssignment:
    """The split of every query: train/val/test, the dev flag (dev ⊂ train) and the stratum."""

    query_id: np.ndarray  # [n] str
    split: np.ndarray  # [n] str, 'train' | 'val' | 'test'
    dev: np.ndarray  # [n] bool, True for the dev slice of train (checkpoint selection)
    stratum: np.ndarray  # [n] str, '<benchmark>/<subset>' or '<benchmark>/*' (pooled small subsets)
    seed: int

    def __post_init__(self) -> None:
        n = len(self.query_id)
        for name in ("split", "dev", "stratum"):
            if np.shape(getattr(self, name)) != (n,):
                raise InvalidValueError(f"SplitAssignment.{name} has shape {np.shape(getattr(self, name))}, expected ({n},)")
        if np.any(self.dev & (self.split != "train")):
            raise InvalidValueError("SplitAssignment.dev marks queries outside train")

    def __len__(self) -> int:
        return len(self.query_id)

    def table_split(self) -> np.ndarray:
        """The warehouse's `splits.split` column: 'train' | 'dev' | 'val' | 'test' (dev taken out of train)."""
        return np.where(self.dev, "dev", self.split)

    def mask(self, name: str) -> np.ndarray:
        """Boolean [n] mask of 'train' (without dev), 'dev', 'train+dev', 'val' or 'test'."""
        if name == "train":
            return (self.split == "train") & ~self.dev
        if name == "dev":
            return self.dev.copy()
        if name == "train+dev":
            return self.split == "train"
        if name in ("val", "test"):
            return self.split == name
        raise InvalidValueError(f"unknown split '{name}'; use one of train, dev, train+dev, val, test")


def block_pattern(spec: SplitSpec) -> np.ndarray:
    """The b slots of one block, as split indices (0 train, 1 val, 2 test): 8/1/1 of 10 for 80/10/10.

    b is the smallest block size ≤ 1000 whose split counts b·fraction are all integers; when none is,
    b = 1000 with largest-remainder rounding.
    """
    fractions = np.array([spec.train, spec.val, spec.test])
    size = _MAX_BLOCK
    for b in range(1, _MAX_BLOCK + 1):
        if np.all(np.abs(fractions * b - np.round(fractions * b)) < 1e-9):
            size = b
            break
    exact = fractions * size
    counts = np.floor(exact + 1e-9).astype(int)
    short = size - counts.sum()
    if short > 0:  # largest remainder
        counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
    return np.repeat(np.arange(3), counts)


def _strata(benchmarks: np.ndarray, subsets: np.ndarray, min_stratum: int) -> np.ndarray:
    keys = np.char.add(np.char.add(benchmarks, "/"), subsets)
    uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
    small = counts[inverse] < min_stratum
    return np.where(small, np.char.add(benchmarks, "/*"), keys).astype(object)


def assign_splits(
    query_ids: Sequence[str] | np.ndarray,
    benchmarks: Sequence[str] | np.ndarray,
    subsets: Sequence[str] | np.ndarray,
    spec: SplitSpec,
) -> SplitAssignment:
    """The seeded train/val/test split and dev flag of every query (see the module docstring for the rule).

    Deterministic in (spec, query_id) alone: the same query gets the same split whatever other queries
    are passed, in whatever order.
    """
    ids = np.asarray(query_ids).astype(str)
    bench = np.asarray(benchmarks).astype(str)
    subs = np.asarray(subsets).astype(str)
    n = len(ids)
    if ids.ndim != 1 or bench.shape != (n,) or subs.shape != (n,):
        raise InvalidValueError(f"query_ids {ids.shape}, benchmarks {bench.shape} and subsets {subs.shape} must all be [n]")
    if n and len(np.unique(ids)) != n:
        uniq, counts = np.unique(ids, return_counts=True)
        repeated = [shown(q, quoted=False) for q in uniq[counts > 1][:3]]  # ids come from the benchmark files
        raise InvalidValueError(f"query_ids must be unique; repeated: {repeated}")

    pattern = block_pattern(spec)
    size = len(pattern)
    cum = np.cumsum([spec.train, spec.val, spec.test])
    split_idx = np.empty(n, dtype=np.int64)
    block_of: dict[tuple[str, int], list[int]] = {}
    for row, q in enumerate(ids):
        m = _TRAILING_INT.match(q)
        if m is None:
            u = stable_uniform("cr2-split", spec.seed, q)
            split_idx[row] = min(int(np.searchsorted(cum, u, side="right")), 2)
        else:
            i = int(m.group(2))
            block_of.setdefault((m.group(1), i // size), []).append(row)
            split_idx[row] = i % size  # the slot; replaced by the slot's split below
    for (prefix, block), rows in block_of.items():
        order = np.random.default_rng(stable_u64("cr2-split-block", spec.seed, prefix, block)).permutation(size)
        slots = pattern[order]
        split_idx[rows] = slots[split_idx[rows]]

    split = np.asarray(SPLITS, dtype=object)[split_idx]
    dev_u = np.array([stable_uniform("cr2-dev", spec.seed, q) for q in ids], dtype=np.float64)
    dev = (split_idx == 0) & (dev_u < spec.dev_fraction)
    return SplitAssignment(
        query_id=ids.astype(object),
        split=split,
        dev=dev,
        stratum=_strata(bench, subs, spec.min_stratum) if n else np.array([], dtype=object),
        seed=spec.seed,
    )


def split_fractions(assignment: SplitAssignment, groups: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """Share of train/val/test (and dev within all queries) per group (e.g. benchmark); None: overall."""
    groups = np.full(len(assignment), "all", dtype=object) if groups is None else np.asarray(groups, dtype=object)
    out: dict[str, dict[str, float]] = {}
    for g in sorted(set(groups.tolist())):
        sel = groups == g
        k = int(sel.sum())
        out[g] = {s: float((assignment.split[sel] == s).sum()) / k for s in SPLITS}
        out[g]["dev"] = float(assignment.dev[sel].sum()) / k
        out[g]["n"] = k
    return out
