"""Counts of verdicts and of where intervals lie: how a results page summarises a family of tests it prints, without
deciding anything itself (every verdict counted is a verdict function's, or the stored word of its test)."""
from __future__ import annotations

from collections import Counter
from typing import Callable, Iterable

import numpy as np

from cr2.evaluation.statistics import Verdict

NOT_REACHED = "not reached"  # a cell whose estimate is undefined (a target the router's frontier does not reach)


def word_counts(verdicts: Iterable) -> Counter:
    """How many times each verdict occurs (None left out); a missing word counts 0."""
    return Counter(str(v) for v in verdicts if v is not None)


def interval_sides(lower, upper) -> tuple[int, int]:
    """(intervals wholly below 0, intervals wholly above 0): where a set of 95 % intervals lies, beside the corrected
    words, so a set whose every interval points one way can say so where a correction leaves the words neutral."""
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    return int((hi < 0).sum()), int((lo > 0).sum())


def cell_verdict_counts(estimate, lower, upper, p_adjusted,
                        verdict: Callable[[float, float, float | None], Verdict]) -> dict[str, int]:
    """Per verdict word, how many cells get it from `verdict(lower, upper, p_adjusted)` (a saving's or a change's
    verdict over the cell's interval and its family-wise p; p_adjusted None: uncorrected); a cell whose estimate is
    undefined counts as NOT_REACHED. Keys in the order they first occur."""
    out: dict[str, int] = {}
    ps = [None] * len(estimate) if p_adjusted is None else list(p_adjusted)
    for e, lo, hi, p in zip(estimate, lower, upper, ps):
        w = NOT_REACHED if e is None or np.isnan(float(e)) else str(verdict(lo, hi, p))
        out[w] = out.get(w, 0) + 1
    return out
