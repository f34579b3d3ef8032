"""The level of the equal-risk bootstrap test, measured: an A/A simulation over a pool's stored decisions.

Each equal-risk comparison (cr2.evaluation.equal_risk) is a paired bootstrap over the test queries of a non-smooth
statistic — a running-max frontier per resample, interpolation between its points, a switch to the Always-model where
it is cheaper — whose two-sided p (2·min(#{D ≤ 0}, #{D ≥ 0}) / B) is Holm-adjusted over its family (question × rule
× α). Nothing guarantees that such a test keeps its 5 % level, so this module measures it.

Design: label-permuted sides (a paired sign-flip null). For every comparison (a, b) of a family, one replicate draws
a fair coin per test query, s_i ~ Bernoulli(1/2) independently; side A takes b's outcomes (correct and cost at every
operating point of the λ sweep) on the queries with s_i = 1 and a's elsewhere, side B the complement. A and B are
then exchangeable: each query's pair of outcome vectors is (a_i, b_i) or (b_i, a_i) with probability 1/2 each, so
over the coin flips (and over queries drawn from any population) A's outcomes have exactly the law of B's, both
frontiers are the same population frontier and the true saving of A against B is 0 at every target — the null is
exactly true, while A and B remain two real, different routers query by query (the test's difficulty: its
dependence, ties, frontier shapes and fallback switching are the pool's own). The page's test is then applied
unchanged (equal_risk_rows: the same targets, grid, Always-model charge, Holm family, level), on a fresh stratified
bootstrap index per replicate of `n_resamples` rows, and a family rejects where any of its mean savings gets a
direction word ("cheaper" / "dearer"): the family-wise error rate under the complete null, which Holm promises to
keep ≤ 5 %. The rate's Monte-Carlo SE is binomial, √(r(1 − r)/R) over R replicates; the verdict
(`level_verdict`) is an exact one-sided binomial test of "rate ≤ 5 %".

What it does not cover: the level is conditional on this pool's test queries (the randomness is the coin flips and
the bootstrap), at a smaller B than the page's 10,000 (for the rate); the Monte-Carlo error of the page's own p at
B = 10,000 near the Holm thresholds is analytic (`p_mc_error`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from cr2.core.errors import InvalidValueError
from cr2.evaluation.statistics import CHEAPER, DEARER, Verdict, resample_counts, resample_indices

NOMINAL = 0.05  # the level every family promises (a direction word needs the Holm p < 0.05)
WITHIN, ABOVE = "not detectably above the nominal 5 %", "above the nominal 5 %"  # the words of `level_verdict`
PAGE_RESAMPLES = 10_000  # evaluation.bootstrap.n_resamples_compare: the B the page's p rests on
# B of an A/A replicate: p = 2X/B moves in steps of 2/B, so a Holm threshold 0.05/k that falls between two steps
# rejects more often than 0.05/k (effective_level). 2,400 puts every threshold of a family of up to 6 tests on a step
# (B/(40k) resamples for k = 1…6): the replicate tests at the page's level, not above it. At B = 500 the first step of
# a 6-test family rejected at 0.012 instead of 0.0083.
AA_RESAMPLES = 2_400


@dataclass(frozen=True)
class NullPair:
    """One comparison of a family as the page runs it: the two real sides' outcomes over the same λ sweep."""

    name: str  # 'a vs b' (the page's method names)
    a: object  # cr2.evaluation.fixed_accuracy.MethodOutcomes [n, k]
    b: object  # MethodOutcomes [n, k], the same rows and k as a

    def __post_init__(self) -> None:
        if np.shape(self.a.correct) != np.shape(self.b.correct):
            raise InvalidValueError(f"the sides of {self.name} must have the same [n, k] outcomes to be exchanged, got "
                                    f"{np.shape(self.a.correct)} and {np.shape(self.b.correct)}")


@dataclass(frozen=True)
class FamilyLevel:
    """The A/A result of one family: how often the complete null got a direction word."""

    question: str
    rule: str | None
    alpha: float | None
    n_tests: int  # m, the family's size (its Holm correction)
    n_replicates: int  # R
    n_rejections: int  # replicates where some test of the family said "cheaper" or "dearer" (family-wise)
    n_test_rejections: int  # tests (over replicates × m) that did, before looking at the family
    n_resamples: int  # B of each replicate's bootstrap

    @property
    def rate(self) -> float:
        """Family-wise rejection rate under the null."""
        return self.n_rejections / self.n_replicates

    @property
    def se(self) -> float:
        """Binomial Monte-Carlo SE of the rate, √(r(1 − r)/R)."""
        return math.sqrt(self.rate * (1.0 - self.rate) / self.n_replicates)

    @property
    def upper(self) -> float:
        """One-sided 95 % Clopper–Pearson upper bound of the rate."""
        return binomial_upper(self.n_rejections, self.n_replicates)


def binomial_upper(k: int, n: int, level: float = 0.95) -> float:
    """The one-sided Clopper–Pearson upper bound of a binomial rate with k successes in n trials."""
    from scipy.stats import beta

    return 1.0 if k >= n else float(beta.ppf(level, k + 1, n - k))


def above_p(n_rejections: int, n_replicates: int, nominal: float = NOMINAL) -> float:
    """The exact one-sided binomial p of "rate ≤ nominal": P(X ≥ k | nominal)."""
    from scipy.stats import binom

    if n_replicates < 1 or not 0 <= n_rejections <= n_replicates:
        raise InvalidValueError(f"a rejection rate needs 0 ≤ rejections ≤ replicates ≥ 1, got {n_rejections} of "
                                f"{n_replicates}")
    return float(binom.sf(n_rejections - 1, n_replicates, nominal))


def level_verdict(n_rejections: int, n_replicates: int, nominal: float = NOMINAL,
                  p_adjusted: float | None = None) -> Verdict:
    """'above the nominal 5 %' where the exact one-sided binomial test rejects "rate ≤ nominal" at 5 % — with
    `p_adjusted` (its Holm p over the families read together) that p, else the test's own — and 'not detectably above
    the nominal 5 %' otherwise (never a claim that the rate is at most 5 %)."""
    p = above_p(n_rejections, n_replicates, nominal) if p_adjusted is None else float(p_adjusted)
    return Verdict(ABOVE if p < 0.05 else WITHIN)


def stored_level_verdicts(rows) -> list[Verdict]:
    """The verdict of each stored level row (table level_study: n_rejections, n_replicates and the Holm p over the
    scenario's families, p_above_holm), in row order."""
    return [level_verdict(int(r.n_rejections), int(r.n_replicates), p_adjusted=float(r.p_above_holm))
            for r in rows.itertuples(index=False)]


@dataclass(frozen=True)
class PError:
    """The Monte-Carlo error of the page's bootstrap p at its Holm threshold for a family of m tests."""

    m: int
    n_resamples: int  # B
    threshold: float  # 0.05 / m: the smallest p Holm's first step compares
    se: float  # SE(p̂) at p = threshold
    relative_se: float  # se / threshold
    tail_resamples: float  # B · threshold / 2: the resamples on the minority side of 0 at the threshold


def effective_level(threshold: float, n_resamples: int) -> float:
    """The probability that the two-sided bootstrap p = 2·min(#{D ≤ 0}, #{D ≥ 0})/B falls below `threshold` when the
    share of resamples on one side is uniform (the null, at B = ∞ exactly `threshold`): 2·⌈threshold·B/2⌉/(B + 1)."""
    if n_resamples < 1 or not 0.0 < threshold <= 1.0:
        raise InvalidValueError(f"effective_level needs B ≥ 1 and a threshold in (0, 1], got {n_resamples}, {threshold}")
    return 2.0 * math.ceil(round(threshold * n_resamples / 2.0, 9)) / (n_resamples + 1)


def p_mc_error(m: int, n_resamples: int = PAGE_RESAMPLES, nominal: float = NOMINAL) -> PError:
    """SE of the bootstrap p at the first Holm threshold p* = nominal / m. The page's p̂ = 2·X / B with X the
    resamples on the minority side of 0, X ~ Binomial(B, q) given the data, q = p/2 the one-sided tail; so
    SE(p̂) = 2·√(q(1 − q)/B) = √(p(2 − p)/B), and a decision at p* rests on about B·p*/2 resamples."""
    if int(m) < 1 or int(n_resamples) < 1:
        raise InvalidValueError(f"p's Monte-Carlo error needs m ≥ 1 and B ≥ 1, got m={m}, B={n_resamples}")
    p = nominal / int(m)
    se = math.sqrt(p * (2.0 - p) / int(n_resamples))
    return PError(int(m), int(n_resamples), p, se, se / p, int(n_resamples) * p / 2.0)


def _flipped(pair: NullPair, flip: np.ndarray) -> tuple:
    from cr2.evaluation.fixed_accuracy import MethodOutcomes

    f = flip[:, None]
    a, b = pair.a, pair.b
    ca, cb = np.asarray(a.correct, dtype=bool), np.asarray(b.correct, dtype=bool)
    xa, xb = np.asarray(a.cost, dtype=np.float64), np.asarray(b.cost, dtype=np.float64)
    return (MethodOutcomes(np.where(f, cb, ca), np.where(f, xb, xa), rows=a.rows),
            MethodOutcomes(np.where(f, ca, cb), np.where(f, xa, xb), rows=a.rows))


def aa_simulation(families: Mapping[tuple, Sequence[NullPair]], always, targets: np.ndarray, grid: np.ndarray,
                  keep: np.ndarray, n_replicates: int, n_resamples: int, rng: np.random.Generator,
                  level: float = 0.95) -> list[FamilyLevel]:
    """The family-wise rejection rate of the page's test under the label-permuted null, per family.

    families: (question, rule, α) → its comparisons (the page's family, every pair of real sides); always: the
    Always-models' MethodOutcomes [n, M] on the test rows (the charge); targets, grid: the page's (VIEW_TARGETS and
    the validation grid); keep: [n] bool, the counted rows (the bootstrap is stratified by them, as the page's);
    level: the test's level (the page's 0.95; a lower one makes an anti-conservative test, for checking the check).
    Each replicate draws one coin per query per comparison and one bootstrap index, shared by every family."""
    from cr2.evaluation.equal_risk import MEAN_SAVING, Comparison, Side, equal_risk_rows
    from cr2.evaluation.families import equal_risk_family

    def family_key(row: dict) -> str:  # the page's family of a mean saving (the one family rule)
        return equal_risk_family({**row, "metric": MEAN_SAVING})
    from cr2.evaluation.fixed_accuracy import FallbackCost

    if int(n_replicates) < 1 or int(n_resamples) < 1:
        raise InvalidValueError(f"an A/A simulation needs ≥ 1 replicate and ≥ 1 resample, got {n_replicates}, "
                                f"{n_resamples}")
    keys = list(families)
    if not keys or any(not families[k] for k in keys):
        raise InvalidValueError("an A/A simulation needs at least one family, each with at least one comparison")
    keep = np.asarray(keep, dtype=bool)
    n = keep.size
    t = np.asarray(targets, dtype=np.float64)
    comparisons, pairs = [], []
    for key in keys:
        question, rule, alpha = key
        for j, pair in enumerate(families[key]):
            tag = f"{question}|{rule}|{alpha}|{j}"
            comparisons.append(Comparison(question, f"A:{tag}", f"B:{tag}", rule, alpha,
                                          Side(f"A:{tag}", alpha), Side(f"B:{tag}", alpha)))
            pairs.append(pair)
    fam_of = {c.a.method: family_key({"question": c.question, "rule": c.rule, "alpha": c.alpha}) for c in comparisons}
    hits = {family_key({"question": q, "rule": r, "alpha": a}): [0, 0] for q, r, a in keys}
    for _ in range(int(n_replicates)):
        counts = resample_counts(resample_indices(n, int(n_resamples), rng, strata=keep), n)
        flips = rng.random((len(pairs), n)) < 0.5
        outcomes = {}
        for c, pair, flip in zip(comparisons, pairs, flips):
            outcomes[c.a], outcomes[c.b] = _flipped(pair, flip)
        fallback = FallbackCost.of_always(always, t, counts)
        rows = equal_risk_rows(outcomes, comparisons, {}, t, counts, fallback, grid, level)
        said = {}
        for r in rows:
            if r["metric"] == MEAN_SAVING:
                key = fam_of[r["method_a"]]
                said.setdefault(key, []).append(r["verdict"] in (CHEAPER, DEARER))
        for key, words in said.items():
            hits[key][0] += int(any(words))
            hits[key][1] += int(sum(words))
    out = []
    for q, r, a in keys:
        k = family_key({"question": q, "rule": r, "alpha": a})
        out.append(FamilyLevel(q, r, a, len(families[(q, r, a)]), int(n_replicates), hits[k][0], hits[k][1],
                               int(n_resamples)))
    return out


def level_rows(results: Sequence[FamilyLevel], page_resamples: int = PAGE_RESAMPLES) -> list[dict]:
    """Tidy rows of the A/A result (one per family), with the verdict — the binomial test of "rate ≤ 5 %", Holm over
    the study's families, which are read together — and the Monte-Carlo error of the page's p (B = page_resamples,
    evaluation.bootstrap.n_resamples_compare) at the family's Holm threshold."""
    from cr2.evaluation.statistics import holm_adjust

    ps = [above_p(f.n_rejections, f.n_replicates) for f in results]
    holm = holm_adjust(np.array(ps, dtype=np.float64)) if ps else np.array([])
    rows = []
    for f, p, q in zip(results, ps, holm):
        err = p_mc_error(f.n_tests, int(page_resamples))
        rows.append({"question": f.question, "rule": f.rule, "alpha": f.alpha, "n_tests": f.n_tests,
                     "n_replicates": f.n_replicates, "n_resamples": f.n_resamples, "n_rejections": f.n_rejections,
                     "n_test_rejections": f.n_test_rejections, "rate": f.rate, "rate_se": f.se,
                     "rate_upper": f.upper, "p_above": p, "p_above_holm": float(q),
                     "verdict": str(level_verdict(f.n_rejections, f.n_replicates, p_adjusted=float(q))),
                     "page_resamples": err.n_resamples, "p_threshold": err.threshold, "p_se": err.se,
                     "p_relative_se": err.relative_se, "p_tail_resamples": err.tail_resamples})
    return rows


__all__ = ["ABOVE", "FamilyLevel", "above_p", "NOMINAL", "NullPair", "PAGE_RESAMPLES", "PError", "WITHIN", "aa_simulation",
           "binomial_upper", "level_rows", "level_verdict", "p_mc_error"]
