"""The exact expectation of a calibrated rule's test risk over re-splits (cr2.crc.exact), and the two-sided check of
the Monte-Carlo means against it (cr2.evaluation.validity.exactness_verdict)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from cr2.crc import accept, calibrate_thresholds, expected_resplit_risk
from cr2.crc.rules import allowed_risky_count, thresholds_from_risky
from cr2.evaluation.metrics import resplit_risk
from cr2.evaluation.validity import DIFFERS_EXACT, MATCHES_EXACT, NO_VIOLATION, exactness_verdict, validity_verdict


def _enumerate(scores, risks, n_calib, alphas, rule, delta=None) -> np.ndarray:
    """The mean test risk over EVERY calibration subset of size n_calib: calibrate with cr2.crc, accept with `≥`."""
    n = len(scores)
    total = np.zeros(len(alphas))
    subsets = list(itertools.combinations(range(n), n_calib))
    for cal in subsets:
        test = np.setdiff1d(np.arange(n), cal)
        taus = calibrate_thresholds(scores[list(cal)], risks[list(cal)], alphas, rule=rule, delta=delta)
        total += [np.mean(risks[test] & accept(scores[test], t)) for t in taus]
    return total / len(subsets)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rule,delta", [("crc", None), ("crc-oracle", None), ("empirical", None), ("ltt", 0.5)])
def test_the_exact_expectation_equals_enumeration_of_every_split(seed, rule, delta):
    rng = np.random.default_rng(seed)
    n, n_calib = 10, 5
    # few distinct float32 scores: ties between risky rows, and between risky and safe rows, on most pools
    scores = rng.integers(0, 4, n).astype(np.float32) / 4
    risks = rng.random(n) < 0.5
    alphas = np.array([0.05, 0.2, 0.34, 0.5, 0.7, 1.0])
    exact = expected_resplit_risk(scores, risks, n_calib, alphas, rule=rule, delta=delta)
    np.testing.assert_allclose(exact, _enumerate(scores, risks, n_calib, alphas, rule, delta), rtol=0, atol=1e-12)


def test_the_exact_expectation_of_crc_is_at_most_alpha_and_its_edges_are_zero_and_the_pool_risk():
    rng = np.random.default_rng(4)
    scores = rng.random(300).astype(np.float32)
    risks = rng.random(300) < 0.3
    alphas = np.array([0.001, 0.01, 0.05, 0.1, 0.2])
    exact = expected_resplit_risk(scores, risks, 100, alphas)
    assert (exact <= alphas + 1e-15).all()  # CRC's promise, exactly
    assert exact[0] == 0.0  # α < 1/(N + 1): τ = +∞ accepts nothing
    assert expected_resplit_risk(scores, risks, 100, [1.0])[0] == pytest.approx(risks.mean())  # accepts everything


def test_monte_carlo_means_match_the_exact_expectation():
    rng = np.random.default_rng(11)
    scores = rng.random(1500).astype(np.float32)
    risks = rng.random(1500) < 0.6 * (1 - scores)  # risk falls with the score, as a gate's should
    alphas = np.array([0.02, 0.05, 0.1])
    draws = resplit_risk(scores, risks, 500, alphas, 2000, np.random.default_rng(12))
    exact = expected_resplit_risk(scores, risks, 500, alphas)
    v = exactness_verdict(draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(len(draws)), exact)
    assert v.verdict == MATCHES_EXACT and v.n_cells == 3


def test_a_threshold_one_risky_point_too_strict_passes_the_promise_test_but_not_the_exact_test():
    """A deliberately biased rule (k − 1 risky calibration points instead of k): its mean stays under α, so the
    one-sided promise test says nothing, but its mean sits below the exact expectation of the rule it claims to be."""
    rng = np.random.default_rng(11)
    scores = rng.random(1500).astype(np.float32)
    risks = rng.random(1500) < 0.6 * (1 - scores)
    alphas = np.array([0.02, 0.05, 0.1])
    n_calib, n_test, b_count = 500, 1000, 2000
    k = allowed_risky_count(n_calib, alphas, "crc") - 1  # the bug
    draw = np.random.default_rng(12)
    biased = np.empty((b_count, len(alphas)))
    for b in range(b_count):
        perm = draw.permutation(len(scores))
        cal, test = perm[:n_calib], perm[n_calib:]
        taus = thresholds_from_risky(np.sort(scores[cal][risks[cal]])[::-1], k, scores.dtype)
        biased[b] = [np.sum(risks[test] & accept(scores[test], t)) / n_test for t in taus]
    mean, se = biased.mean(axis=0), biased.std(axis=0, ddof=1) / np.sqrt(b_count)
    assert validity_verdict(mean, se, alphas).verdict == NO_VIOLATION  # the promise test cannot see it
    v = exactness_verdict(mean, se, expected_resplit_risk(scores, risks, n_calib, alphas))
    assert v.verdict == DIFFERS_EXACT and v.value < v.bound  # below its exact expectation, not above α


def test_the_exact_test_is_two_sided_and_skips_cells_without_an_exact_value():
    above = exactness_verdict([0.011, 0.01], [0.0002, 0.0002], [0.01, 0.01])
    below = exactness_verdict([0.009, 0.01], [0.0002, 0.0002], [0.01, 0.01])
    assert above.verdict == below.verdict == DIFFERS_EXACT and above.worst == below.worst == 0
    v = exactness_verdict([0.009, 0.01], [0.0002, 0.0002], [np.nan, 0.01])
    assert v.verdict == MATCHES_EXACT and v.n_cells == 1
    assert exactness_verdict([0.01], [0.001], [np.nan]).verdict is None


def test_a_run_of_zero_risks_matches_a_tiny_exact_expectation_and_not_a_large_one():
    """Re-splits that all gave risk 0 have se = 0 and no z: a risk in [0, 1] with mean μ is positive with probability
    at least μ, so n zeros have probability ≤ (1 − μ)^n — a μ of 2e-6 over 2,000 zeros matches, 0.01 does not."""
    from cr2.evaluation.validity import exactness_verdict

    tiny = exactness_verdict([0.0, 0.01], [0.0, 0.0002], [2e-6, 0.01], n=[2000, 2000])
    assert tiny.verdict == MATCHES_EXACT and tiny.n_cells == 2
    large = exactness_verdict([0.0, 0.01], [0.0, 0.0002], [0.01, 0.01], n=[2000, 2000])
    assert large.verdict == DIFFERS_EXACT and large.worst == 0 and large.p < 2 * 0.99 ** 2000 * 1.0001
    ones = exactness_verdict([1.0], [0.0], [1.0 - 1e-7], n=[2000])
    assert ones.verdict == MATCHES_EXACT
    # without the count the flat cell is compared exactly, as before
    assert exactness_verdict([0.0], [0.0], [2e-6]).verdict == DIFFERS_EXACT
    # the bound is attained by a risk that is 1 with probability μ, else 0: its n zeros then occur with (1 − μ)^n
    mu, n = 0.002, 500
    assert exactness_verdict([0.0], [0.0], [mu], n=[n]).p == pytest.approx(min(1.0, 2 * (1 - mu) ** n))
