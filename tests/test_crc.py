"""CRC threshold calibration: exactness (ties, ≥, dtype), degenerate cases, marginal validity, the table artifact."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cr2.config import LambdaGrid
from cr2.crc import (
    ThresholdTable,
    accept,
    calibrate_table,
    calibrate_threshold,
    calibrate_thresholds,
    empirical_threshold,
    false_acceptance_risk,
    fixed_threshold,
    rate_threshold,
)
from cr2.core.errors import DataValidationError, FingerprintMismatchError, InvalidValueError, UncalibratedOperatingPointError

F32 = np.float32
HAND_SCORES = np.array([0.9, 0.8, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2, 0.1], dtype=F32)
HAND_RISKS = np.array([0, 1, 0, 1, 0, 0, 1, 0, 0, 0], dtype=bool)  # risky scores: 0.8, 0.7, 0.4


def _d(scores: np.ndarray, risks: np.ndarray, tau) -> int:
    """d_τ = #{i : s_i ≥ τ, r_i = 1}, compared in the scores' dtype."""
    return int(np.sum(risks & (scores >= scores.dtype.type(tau))))


# ---------------------------------------------------------------- golden, by hand
def test_hand_computed_thresholds():
    # N = 10, so CRC(τ) = (d_τ + 1)/11.
    # α = 0.2: d + 1 ≤ 2.2 → d ≤ 1 → τ* just above the 2nd-largest risky score 0.7 (accepts 0.9, 0.8, 0.8; d = 1)
    assert calibrate_threshold(HAND_SCORES, HAND_RISKS, 0.2) == float(np.nextafter(F32(0.7), F32(1)))
    # α = 0.3: d ≤ 2 → just above 0.4 (accepts the six scores ≥ 0.5; d = 2)
    assert calibrate_threshold(HAND_SCORES, HAND_RISKS, 0.3) == float(np.nextafter(F32(0.4), F32(1)))
    # α = 0.05 < 1/11: no τ qualifies → accept nothing
    assert calibrate_threshold(HAND_SCORES, HAND_RISKS, 0.05) == np.inf
    # α = 0.4: d ≤ 3 = all risky points → every point can be accepted
    assert calibrate_threshold(HAND_SCORES, HAND_RISKS, 0.4) == -np.inf
    # boundary: α = 2/11 exactly → d ≤ 1, same as α = 0.2
    assert calibrate_threshold(HAND_SCORES, HAND_RISKS, 2 / 11) == float(np.nextafter(F32(0.7), F32(1)))
    assert accept(HAND_SCORES, calibrate_threshold(HAND_SCORES, HAND_RISKS, 0.2)).sum() == 3


def test_hand_computed_alternative_rules():
    # empirical: d/N ≤ α. α = 0.2 → d ≤ 2 → just above 0.4; α = 0.05 → d = 0 → just above 0.8
    assert empirical_threshold(HAND_SCORES, HAND_RISKS, 0.2) == float(np.nextafter(F32(0.4), F32(1)))
    assert empirical_threshold(HAND_SCORES, HAND_RISKS, 0.05) == float(np.nextafter(F32(0.8), F32(1)))
    assert fixed_threshold() == 0.5
    # fixed local rate f = 0.25 → at most ⌊2.5⌋ = 2 accepted; the tie at 0.8 would make 3, so only 0.9 goes
    tau = rate_threshold(HAND_SCORES, 0.25)
    assert accept(HAND_SCORES, tau).sum() == 1
    assert accept(HAND_SCORES, rate_threshold(HAND_SCORES, 0.5)).sum() == 5
    assert rate_threshold(HAND_SCORES, 1.0) == -np.inf
    assert rate_threshold(HAND_SCORES, 0.0) > HAND_SCORES.max()


def test_threshold_on_a_risky_score_excludes_it_under_python_float_comparison():
    # the deciding risky score itself must be rejected: τ* is the next float32 above it, and a Python-float
    # τ* compares against float32 scores in float32 (NumPy 2) without rounding back onto the score
    scores = np.array([0.3, 0.7], dtype=F32)
    risks = np.array([False, True])
    tau = calibrate_threshold(scores, risks, 0.5)  # N = 2: (0 + 1)/3 ≤ 0.5 < (1 + 1)/3 → d ≤ 0
    assert isinstance(tau, float)
    assert F32(0.7) < tau
    assert (scores >= tau).tolist() == [False, False]
    assert (scores >= F32(tau)).tolist() == (scores.astype(np.float64) >= tau).tolist() == [False, False]
    # a float64 step above the float32 score would round back onto it — the bug the rule avoids
    naive = float(np.nextafter(np.float64(F32(0.7)), np.inf))
    assert (scores >= naive).tolist() == [False, True]


def test_degenerate_sets():
    one = np.array([0.4], dtype=F32)
    # N = 1: CRC = (d + 1)/2 ≤ α needs α ≥ 1/2
    assert calibrate_threshold(one, np.array([True]), 0.49) == np.inf
    assert calibrate_threshold(one, np.array([True]), 0.5) == float(np.nextafter(F32(0.4), F32(1)))
    assert calibrate_threshold(one, np.array([False]), 0.5) == -np.inf
    scores = np.linspace(0, 1, 50).astype(F32)
    assert calibrate_threshold(scores, np.zeros(50, bool), 0.02) == -np.inf  # none risky: accept all
    all_risky = calibrate_threshold(scores, np.ones(50, bool), 0.05)  # d ≤ 1: only the top score
    assert accept(scores, all_risky).sum() == 1
    with pytest.raises(DataValidationError, match="empty"):
        calibrate_threshold(np.array([], dtype=F32), np.array([], dtype=bool), 0.1)
    with pytest.raises(DataValidationError, match="NaN"):
        calibrate_threshold(np.array([np.nan], dtype=F32), np.array([True]), 0.5)


def test_thresholds_do_not_increase_with_alpha():
    rng = np.random.default_rng(3)
    scores = rng.random(500).astype(F32)
    risks = rng.random(500) < 0.4
    taus = calibrate_thresholds(scores, risks, [0.002, 0.005, 0.01, 0.02, 0.05, 0.2])
    assert np.all(np.diff(taus) <= 0)


# ---------------------------------------------------------------- properties
@st.composite
def calibration_sets(draw):
    n = draw(st.integers(1, 40))
    pool = st.sampled_from([0.0, 0.1, 0.5, float(np.nextafter(F32(0.5), F32(1))), 0.9, 1.0])  # many ties
    value = st.one_of(pool, st.floats(0.0, 1.0, width=32))
    scores = np.array(draw(st.lists(value, min_size=n, max_size=n)), dtype=F32)
    risks = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    alpha = draw(st.one_of(st.floats(0.0, 1.0), st.integers(0, n + 1).map(lambda k: k / (n + 1))))
    return scores, risks, alpha


def _brute_force(scores: np.ndarray, risks: np.ndarray, alpha: float) -> float:
    """Smallest feasible τ among −inf and the next float32 above each distinct score; +inf if none."""
    n = len(scores)
    candidates = [-np.inf] + sorted(float(np.nextafter(v, F32(np.inf))) for v in np.unique(scores))
    for tau in candidates:
        if (_d(scores, risks, tau) + 1) / (n + 1) <= alpha:
            return tau
    return np.inf


@settings(max_examples=400, deadline=None)
@given(calibration_sets())
def test_crc_threshold_is_valid_minimal_and_exact(case):
    scores, risks, alpha = case
    n = len(scores)
    tau = calibrate_threshold(scores, risks, alpha)
    assert tau == _brute_force(scores, risks, alpha)
    if tau == np.inf:
        assert 1 / (n + 1) > alpha  # no τ qualifies only when α < 1/(N + 1)
    else:
        # validity on the calibration set, compared in the scores' dtype: (d + 1)/(N + 1) ≤ α at τ*
        assert (_d(scores, risks, tau) + 1) / (n + 1) <= alpha
        assert F32(tau) == tau  # exactly representable in float32
    if tau != -np.inf:
        # minimality: the next float32 below τ* is infeasible (and so is every lower τ, d being monotone)
        below = np.nextafter(F32(tau), F32(-np.inf))
        assert (_d(scores, risks, below) + 1) / (n + 1) > alpha
    # a Python-float τ* gives the same decisions as a float32 or an exact float64 comparison
    np.testing.assert_array_equal(scores >= tau, scores >= F32(tau))
    np.testing.assert_array_equal(scores >= tau, accept(scores, tau))


@settings(max_examples=200, deadline=None)
@given(calibration_sets())
def test_empirical_threshold_is_valid_and_minimal(case):
    scores, risks, alpha = case
    n = len(scores)
    tau = empirical_threshold(scores, risks, alpha)
    assert tau != np.inf  # d = 0 always qualifies
    assert _d(scores, risks, tau) / n <= alpha
    if tau != -np.inf:
        assert _d(scores, risks, np.nextafter(F32(tau), F32(-np.inf))) / n > alpha


@settings(max_examples=100, deadline=None)
@given(calibration_sets())
def test_float64_scores_keep_their_own_precision(case):
    scores, risks, alpha = case
    s64 = scores.astype(np.float64) + 1e-12  # values no float32 can hold
    tau = calibrate_threshold(s64, risks, alpha)
    if np.isfinite(tau):
        assert (_d(s64, risks, tau) + 1) / (len(s64) + 1) <= alpha
        assert (_d(s64, risks, np.nextafter(tau, -np.inf)) + 1) / (len(s64) + 1) > alpha


# ---------------------------------------------------------------- marginal validity (the CRC guarantee)
ALPHAS = (0.002, 0.005, 0.01, 0.02, 0.05)


def test_marginal_false_acceptance_risk_is_controlled_over_resplits():
    """E[r·1[s ≥ τ*]] ≤ α on exchangeable data with a fixed score.

    One synthetic pool of 5,000 queries with a fixed float32 score and P(r = 1 | s) = 0.9 − 0.8·s is
    re-split 300 times (seeded) into 1,000 calibration and 4,000 test queries. Random splits of one pool
    are exchangeable, so the guarantee applies exactly. One-sided tolerance: the mean test risk over the
    splits may exceed α by at most 3 Monte-Carlo standard errors. A lower check, α − 2/(N + 1) − 3 SE
    (CRC's tightness for continuous scores), shows the control is not vacuous.
    """
    rng = np.random.default_rng(20240601)
    n_pool, n_calib, n_splits = 5_000, 1_000, 300
    scores = rng.random(n_pool).astype(F32)
    risks = rng.random(n_pool) < (0.9 - 0.8 * scores.astype(np.float64))
    test_risk = np.empty((n_splits, len(ALPHAS)))
    for b in range(n_splits):
        perm = rng.permutation(n_pool)
        cal, test = perm[:n_calib], perm[n_calib:]
        taus = calibrate_thresholds(scores[cal], risks[cal], ALPHAS)
        for j, tau in enumerate(taus):
            test_risk[b, j] = false_acceptance_risk(scores[test], risks[test], tau)
    mean = test_risk.mean(axis=0)
    se = test_risk.std(axis=0, ddof=1) / np.sqrt(n_splits)
    for j, alpha in enumerate(ALPHAS):
        assert mean[j] <= alpha + 3 * se[j], f"α={alpha}: mean risk {mean[j]:.5f} > α + 3 SE ({se[j]:.5f})"
        assert mean[j] >= alpha - 2 / (n_calib + 1) - 3 * se[j], f"α={alpha}: mean risk {mean[j]:.5f} is vacuous"


# ---------------------------------------------------------------- the table
GRID = LambdaGrid(min=0.1, max=20.0, n_log=24, extra=[0.5, 1.0, 2.0, 8.0]).values()
ALPHA_GRID = list(ALPHAS)


def _table(fp: str = "abcd1234abcd1234") -> ThresholdTable:
    rng = np.random.default_rng(7)
    scores = rng.random((300, len(GRID))).astype(F32)
    risks = rng.random((300, len(GRID))) < 0.3
    return calibrate_table(scores, risks, GRID, ALPHA_GRID, gate_fingerprint=fp, dist_id="default@v1-x", label_source="sim")


def test_table_lookup_matches_per_lambda_calibration_and_sorts_its_grid():
    rng = np.random.default_rng(11)
    lams = [2.0, 0.5, 1.0]  # deliberately unsorted
    scores = rng.random((200, 3)).astype(F32)
    risks = rng.random((200, 3)) < 0.4
    table = calibrate_table(lambda lam: scores, risks, lams, [0.05, 0.01], gate_fingerprint="fp", dist_id="d", label_source="s")
    assert table.lams == (0.5, 1.0, 2.0) and table.alphas == (0.01, 0.05)
    assert table.n_calib == 200 and table.score_dtype == "float32"
    for j, lam in enumerate(lams):
        for alpha in (0.01, 0.05):
            assert table.tau(lam, alpha, "fp") == calibrate_threshold(scores[:, j], risks[:, j], alpha)


def test_table_refuses_another_gate():
    table = _table()
    with pytest.raises(FingerprintMismatchError, match="abcd1234abcd1234"):
        table.tau(1.0, 0.01, "ffff0000ffff0000")


def test_table_refuses_an_off_grid_operating_point_naming_the_grid():
    table = _table()
    assert len(GRID) == 28
    with pytest.raises(UncalibratedOperatingPointError) as err:
        table.tau(0.37, 0.01, "abcd1234abcd1234")
    assert str(err.value) == (
        "λ=0.37 is not on the calibrated grid [0.1 … 20, 28 points]; run `cr2 calibrate --lam 0.37` or pick a grid value"
    )
    with pytest.raises(UncalibratedOperatingPointError, match=r"α=0.03 .*\[0.002, 0.005, 0.01, 0.02, 0.05\]"):
        table.tau(1.0, 0.03, "abcd1234abcd1234")
    # relative tolerance 1e-9: a λ that differs in the 12th digit is on the grid, one in the 7th is not
    assert table.tau(GRID[5] * (1 + 1e-12), 0.01, "abcd1234abcd1234") == table.tau(GRID[5], 0.01, "abcd1234abcd1234")
    with pytest.raises(UncalibratedOperatingPointError):
        table.tau(GRID[5] * (1 + 1e-6), 0.01, "abcd1234abcd1234")


def test_table_records_round_trip_and_reject_gaps():
    table = _table()
    records = table.to_records()
    assert len(records) == 28 * 5
    assert set(records[0]) == {"lam", "alpha", "tau", "n_calib", "gate_fingerprint", "dist_id", "label_source", "rule", "score_dtype",
                              "delta", "group"}
    back = ThresholdTable.from_records(records[::-1])
    assert back.lams == table.lams and back.alphas == table.alphas
    np.testing.assert_array_equal(back.taus, table.taus)
    assert (back.n_calib, back.gate_fingerprint, back.dist_id, back.label_source) == (300, table.gate_fingerprint, "default@v1-x", "sim")
    with pytest.raises(DataValidationError, match="miss"):
        ThresholdTable.from_records(records[1:])
    with pytest.raises(ValueError, match="read-only"):
        table.taus[0, 0] = 0.0  # the shipped artifact is read-only


def test_table_merge_adds_a_lambda_row():
    table = _table()
    rng = np.random.default_rng(5)
    extra = calibrate_table(
        rng.random((300, 1)).astype(F32), rng.random((300, 1)) < 0.3, [0.37], ALPHA_GRID,
        gate_fingerprint=table.gate_fingerprint, dist_id=table.dist_id, label_source=table.label_source,
    )
    merged = table.merge(extra)
    assert len(merged.lams) == 29 and merged.has_lam(0.37)
    assert merged.tau(0.37, 0.01, table.gate_fingerprint) == extra.tau(0.37, 0.01, table.gate_fingerprint)
    other_gate = calibrate_table(
        rng.random((300, 1)).astype(F32), rng.random((300, 1)) < 0.3, [0.37], ALPHA_GRID,
        gate_fingerprint="other", dist_id=table.dist_id, label_source=table.label_source,
    )
    with pytest.raises(InvalidValueError, match="gate_fingerprint"):  # an argument mistake, not bad data
        table.merge(other_gate)


# ================================================================ Learn-then-Test
from fractions import Fraction  # noqa: E402
from math import comb  # noqa: E402

from cr2.crc import (  # noqa: E402
    GroupedThresholdTable,
    binomial_cdf,
    binomial_tail_pvalue,
    calibrate_group_tables,
    hoeffding_bentkus_pvalue,
    ltt_delta_per_lam,
    ltt_max_risky_count,
    ltt_min_n_calib,
    ltt_threshold,
    table_from_records,
)
from cr2.core.errors import GroupTooSmallError  # noqa: E402


def _exact_cdf(k: int, n: int, p: Fraction) -> Fraction:
    return sum((comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k + 1)), Fraction(0))


def test_hand_computed_ltt_thresholds():
    # N = 10, risky scores 0.8, 0.7, 0.4. p(τ) = P(Bin(10, α) ≤ d_τ).
    # α = 0.2, δ = 0.1: P(Bin ≤ 0) = 0.8^10 = 0.107 > 0.1 → nothing certified → +inf
    assert ltt_threshold(HAND_SCORES, HAND_RISKS, 0.2, 0.1) == np.inf
    # α = 0.2, δ = 0.2: P(≤ 0) = 0.107 ≤ 0.2 < P(≤ 1) = 0.376 → d ≤ 0 → just above the top risky score 0.8
    assert ltt_threshold(HAND_SCORES, HAND_RISKS, 0.2, 0.2) == float(np.nextafter(F32(0.8), F32(1)))
    # α = 0.4, δ = 0.1: P(≤ 1) = 0.046 ≤ 0.1 < P(≤ 2) = 0.167 → d ≤ 1 → just above 0.7
    assert ltt_threshold(HAND_SCORES, HAND_RISKS, 0.4, 0.1) == float(np.nextafter(F32(0.7), F32(1)))
    # CRC at α = 0.4 accepts everything (d ≤ 3); LTT's high-probability bound is the price
    assert calibrate_threshold(HAND_SCORES, HAND_RISKS, 0.4) == -np.inf
    assert binomial_tail_pvalue(1, 10, 0.2) == pytest.approx(0.8**10 + 10 * 0.2 * 0.8**9, rel=1e-12)
    assert ltt_min_n_calib(0.01, 0.1) == 230  # 0.99^229 = 0.1003 > 0.1 ≥ 0.99^230 = 0.0993
    assert ltt_delta_per_lam(0.1, 28) == pytest.approx(0.1 / 28)


def test_hoeffding_bentkus_p_value_by_hand():
    # n = 100, mean loss 0.1, α = 0.2: Hoeffding exp(−100·KL(0.1 ‖ 0.2)) = 0.0255; Bentkus e·P(Bin(100, 0.2) ≤ 10)
    kl = 0.1 * np.log(0.1 / 0.2) + 0.9 * np.log(0.9 / 0.8)
    bentkus = np.e * float(_exact_cdf(10, 100, Fraction(1, 5)))
    assert hoeffding_bentkus_pvalue(0.1, 100, 0.2) == pytest.approx(min(np.exp(-100 * kl), bentkus), rel=1e-9)
    assert bentkus < np.exp(-100 * kl)  # here the Bentkus term decides
    assert hoeffding_bentkus_pvalue(0.25, 100, 0.2) == 1.0  # a mean above α never rejects


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 60), st.fractions(Fraction(1, 1000), Fraction(999, 1000), max_denominator=1000))
def test_binomial_cdf_matches_exact_rational_arithmetic(n, p):
    got = binomial_cdf(np.arange(-1, n + 2), n, float(p))
    want = [0.0] + [float(_exact_cdf(k, n, p)) for k in range(n + 1)] + [1.0]
    np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-15)


@settings(max_examples=300, deadline=None)
@given(calibration_sets(), st.sampled_from([0.01, 0.05, 0.1, 0.2, 0.5]))
def test_ltt_threshold_is_certified_minimal_and_exact(case, delta):
    scores, risks, alpha = case
    n = len(scores)
    alpha = min(max(alpha, 1e-3), 0.999)
    tau = ltt_threshold(scores, risks, alpha, delta)
    k = int(ltt_max_risky_count(n, np.array([alpha]), delta)[0])
    exact = lambda d: _exact_cdf(d, n, Fraction(alpha))  # noqa: E731
    # k is the last risky count whose exact p-value is ≤ δ (fixed-sequence stops at the next one)
    assert k == -1 or exact(k) <= Fraction(delta)
    # … and the next one's is > δ, up to float rounding of the CDF at an exact tie p = δ (then the float rule may
    # stop one count early: conservative, never invalid)
    assert k == n or exact(k + 1) > Fraction(delta) or abs(float(exact(k + 1)) - delta) <= 1e-12 * delta
    if tau == np.inf:
        assert k == -1 or _d(scores, risks, np.nextafter(F32(scores.max()), F32(np.inf))) > k
    else:
        assert _d(scores, risks, tau) <= k  # every accepted risky count is certified
        assert F32(tau) == tau or tau == -np.inf
    if np.isfinite(tau):
        assert _d(scores, risks, np.nextafter(F32(tau), F32(-np.inf))) > k  # minimal
    # more δ never makes LTT more conservative
    assert ltt_threshold(scores, risks, alpha, min(2 * delta, 0.9)) <= tau


def test_ltt_table_records_delta_and_refuses_misuse():
    rng = np.random.default_rng(2)
    scores = rng.random((800, len(GRID))).astype(F32)
    risks = rng.random((800, len(GRID))) < 0.3
    kw = dict(gate_fingerprint="fp", dist_id="d", label_source="s")
    ltt = calibrate_table(scores, risks, GRID, ALPHA_GRID, rule="ltt", delta=0.1, **kw)
    assert ltt.rule == "ltt" and ltt.delta == 0.1
    for j, lam in enumerate(GRID):  # each λ tested at δ / 28 (Bonferroni over the λ grid)
        np.testing.assert_array_equal(
            ltt.taus[ltt.lam_index(lam)], calibrate_thresholds(scores[:, j], risks[:, j], ALPHA_GRID, "ltt", 0.1 / 28)
        )
    crc = calibrate_table(scores, risks, GRID, ALPHA_GRID, **kw)
    assert np.all(ltt.taus >= crc.taus)  # here (N = 800, δ/28) LTT is the more conservative rule everywhere
    back = table_from_records(ltt.to_records())
    assert isinstance(back, ThresholdTable) and back.delta == 0.1 and back.rule == "ltt"
    np.testing.assert_array_equal(back.taus, ltt.taus)
    old = [{k: v for k, v in r.items() if k not in ("delta", "group")} for r in crc.to_records()]  # schema v1 rows
    assert ThresholdTable.from_records(old).delta is None
    nan_rows = [{**r, "delta": float("nan"), "group": None} for r in crc.to_records()]  # what DuckDB NULL reads as
    assert ThresholdTable.from_records(nan_rows).delta is None
    with pytest.raises(InvalidValueError, match="needs δ"):
        calibrate_table(scores, risks, GRID, ALPHA_GRID, rule="ltt", **kw)
    with pytest.raises(InvalidValueError, match="δ applies to the ltt rules only"):
        calibrate_table(scores, risks, GRID, ALPHA_GRID, delta=0.1, **kw)
    with pytest.raises(InvalidValueError, match="cannot be merged"):
        ltt.merge(ltt)
    with pytest.raises(DataValidationError, match="mix delta"):
        ThresholdTable.from_records(ltt.to_records()[:3] + [{**r, "delta": 0.2} for r in ltt.to_records()[3:]])


# ================================================================ Mondrian
def test_mondrian_thresholds_are_per_group_calibrations():
    scores = np.concatenate([HAND_SCORES, HAND_SCORES[::-1]])
    risks = np.concatenate([HAND_RISKS, ~HAND_RISKS[::-1]])
    groups = np.array(["a"] * 10 + ["b"] * 10)
    g = calibrate_group_tables(scores[:, None], risks[:, None], groups, [1.0], [0.2, 0.3], gate_fingerprint="fp", dist_id="d",
                               label_source="s")
    assert g.groups == ("a", "b") and g.group_by == "benchmark" and g.too_small == ()
    # group a is the hand set: α = 0.2 → just above 0.7, α = 0.3 → just above 0.4
    assert g.tau(1.0, 0.2, "fp", "a") == float(np.nextafter(F32(0.7), F32(1)))
    assert g.tau(1.0, 0.3, "fp", "a") == float(np.nextafter(F32(0.4), F32(1)))
    # group b: risky are the 7 non-risky of the hand set: 0.9 0.8 0.6 0.5 0.3 0.2 0.1 → α = 0.2, d ≤ 1 → above 0.8
    assert g.tau(1.0, 0.2, "fp", "b") == float(np.nextafter(F32(0.8), F32(1)))
    assert g.table("b").group == "benchmark=b"
    with pytest.raises(UncalibratedOperatingPointError, match="benchmark='gpqa' has no Mondrian thresholds; calibrated groups: a, b"):
        g.tau(1.0, 0.2, "fp", "gpqa")
    np.testing.assert_array_equal(g.taus_for(np.array(["b", "a", "b"]), 1.0, 0.2, "fp"),
                                  [g.tau(1.0, 0.2, "fp", "b"), g.tau(1.0, 0.2, "fp", "a"), g.tau(1.0, 0.2, "fp", "b")])
    with pytest.raises(UncalibratedOperatingPointError, match=r"per benchmark \(Mondrian\).*taus_for"):
        g.tau(1.0, 0.2, "fp")  # code that routes with one τ per (λ, α) gets a clear error, not a wrong threshold
    back = table_from_records(g.to_records())
    assert isinstance(back, GroupedThresholdTable) and back.groups == ("a", "b")
    assert back.tau(1.0, 0.2, "fp", "b") == g.tau(1.0, 0.2, "fp", "b")
    with pytest.raises(DataValidationError, match="table_from_records"):
        ThresholdTable.from_records(g.to_records())


def test_mondrian_small_group_is_an_error_or_an_explicit_deferral():
    rng = np.random.default_rng(4)
    scores = rng.random(300).astype(F32)
    risks = rng.random(300) < 0.3
    groups = np.array(["mmlu"] * 260 + ["gpqa"] * 40)
    kw = dict(gate_fingerprint="fp", dist_id="d", label_source="s")
    # CRC needs N ≥ 1/α − 1: 99 at α = 0.01, 19 at α = 0.05 — gpqa (40) reaches only α = 0.05
    with pytest.raises(GroupTooSmallError, match=r"benchmark='gpqa' has N=40 < 99 needed at α=0.01.*small_group: defer"):
        calibrate_group_tables(scores[:, None], risks[:, None], groups, [1.0], [0.01, 0.05], **kw)
    g = calibrate_group_tables(scores[:, None], risks[:, None], groups, [1.0], [0.01, 0.05], small_group="defer", **kw)
    assert g.too_small == (("gpqa", 0.01, 40, 99),)
    assert g.tau(1.0, 0.01, "fp", "gpqa") == np.inf  # always defers at α = 0.01, and says so in too_small
    assert np.isfinite(g.tau(1.0, 0.05, "fp", "gpqa")) and np.isfinite(g.tau(1.0, 0.01, "fp", "mmlu"))
    assert table_from_records(g.to_records()).too_small == g.too_small
    # LTT, δ = 0.1 over 1 λ: (1 − 0.05)^N ≤ 0.1 needs N ≥ 45
    with pytest.raises(GroupTooSmallError, match="N=40 < 45 needed at α=0.05"):
        calibrate_group_tables(scores[:, None], risks[:, None], groups, [1.0], [0.05], rule="ltt", delta=0.1, **kw)


@settings(max_examples=50, deadline=None)
@given(calibration_sets(), st.lists(st.sampled_from(["x", "y", "z"]), min_size=40, max_size=40))
def test_mondrian_equals_calibrating_each_group_alone(case, labels):
    scores, risks, alpha = case
    groups = np.array(labels[: len(scores)])
    g = calibrate_group_tables(scores[:, None], risks[:, None], groups, [2.0], [max(alpha, 1e-3)], small_group="defer",
                               gate_fingerprint="fp", dist_id="d", label_source="s")
    small = {c[0] for c in g.too_small}
    for name in set(groups.tolist()):
        rows = groups == name
        assert g.tau(2.0, max(alpha, 1e-3), "fp", name) == calibrate_threshold(scores[rows], risks[rows], max(alpha, 1e-3))
        # listed as too small exactly when no data could have given it a finite threshold: (0 + 1)/(N_g + 1) > α
        assert (name in small) == (1 / (rows.sum() + 1) > max(alpha, 1e-3))
