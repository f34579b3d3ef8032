"""Drift detection: no false alarm on the calibration distribution, clear detection of a shifted one, Holm by hand."""
from __future__ import annotations

import numpy as np
import pytest

from cr2.system.channel import sample_states
from cr2.config import load_config, load_state_distribution
from cr2.evaluation.statistics import holm_adjust
from cr2.deploy.drift import DriftReport, drift_test, state_features
from cr2.core.errors import DataValidationError, UnknownNameError

N = 2000  # states per sample: a few seconds of a deployment's traffic, a realistic monitoring window


@pytest.fixture(scope="module")
def comm():
    return load_config().communication


@pytest.fixture(scope="module")
def dists():
    return {name: load_state_distribution(name) for name in ("default", "far-rician")}


def _features(dist, comm, seed, n=N):
    return state_features(sample_states(dist, n, np.random.default_rng(seed)), comm)


def test_the_calibration_distribution_raises_no_alarm(dists, comm):
    reference = _features(dists["default"], comm, seed=0)
    for seed in range(1, 9):  # fixed seeds: deterministic; each is a fresh sample of the same distribution
        report = drift_test(reference, _features(dists["default"], comm, seed=seed))
        assert not report.drifted, report.lines()
        assert report.recommendation.startswith("no drift detected")
        assert [f.feature for f in report.features] == ["distance_m", "rate_ul_bps", "rate_dl_bps"]


def test_false_alarm_rate_stays_at_alpha_over_many_samples(dists, comm):
    # Under no drift Holm keeps P(any alarm) ≤ α whatever the dependence between the three features.
    # 300 independent repetitions: the alarm count is ≤ Binomial(300, 0.05), mean 15, sd 3.8; the bound
    # below is mean + 3.5 sd (one-sided, stated here so the test is not flaky by design).
    alarms = sum(
        drift_test(_features(dists["default"], comm, seed=1000 + 2 * r, n=500),
                   _features(dists["default"], comm, seed=1001 + 2 * r, n=500)).drifted
        for r in range(300)
    )
    assert alarms <= 28


def test_far_rician_states_are_detected_with_tiny_p_values(dists, comm):
    report = drift_test(_features(dists["default"], comm, seed=0), _features(dists["far-rician"], comm, seed=1),
                        states="configs/states/far-rician.yaml")
    assert report.drifted
    for name in ("distance_m", "rate_ul_bps", "rate_dl_bps"):
        f = report[name]
        assert f.drifted and f.p_adjusted < 1e-12 and f.statistic > 0.5, f
    # distance moves from U(30, 150) to U(100, 300): D = P_default(d ≤ 150) − P_far(d ≤ 150) = 1 − 0.25
    assert report["distance_m"].statistic == pytest.approx(0.75, abs=0.03)
    assert report.recommendation.startswith("re-calibrate: cr2 recalibrate --states configs/states/far-rician.yaml")
    assert "distance_m" in report.recommendation
    assert len(report.lines()) == 4 and "DRIFT" in report.lines()[0]


def test_a_small_sample_of_the_shift_is_still_detected(dists, comm):
    report = drift_test(_features(dists["default"], comm, seed=0), _features(dists["far-rician"], comm, seed=5, n=50))
    assert report.drifted and report["distance_m"].n_sample == 50


def test_gate_scores_are_a_feature_like_any_other():
    rng = np.random.default_rng(3)
    ref = {"score@lam=2": rng.beta(2, 5, 3000).astype(np.float32)}
    same = drift_test(ref, {"score@lam=2": rng.beta(2, 5, 1000).astype(np.float32)})
    moved = drift_test(ref, {"score@lam=2": rng.beta(3, 4, 1000).astype(np.float32)})
    assert not same.drifted and moved.drifted and moved["score@lam=2"].p_value < 1e-10
    feats = state_features(sample_states(load_state_distribution("default"), 10, np.random.default_rng(0)),
                           load_config().communication, scores={2.0: np.zeros(7)})
    assert feats["score@lam=2"].shape == (7,) and feats["distance_m"].shape == (10,)


def test_holm_adjustment_by_hand_and_against_bonferroni():
    # sorted p: 0.01 (×3 = 0.03), 0.03 (×2 = 0.06), 0.04 (×1 = 0.04 → running max 0.06)
    np.testing.assert_allclose(holm_adjust(np.array([0.01, 0.04, 0.03])), [0.03, 0.06, 0.06])
    np.testing.assert_allclose(holm_adjust(np.array([0.5, 0.9])), [1.0, 1.0])
    # Holm rejects whatever Bonferroni rejects, and more: with p = (0.001, 0.04) at α = 0.05 Bonferroni
    # gives (0.002, 0.08) and keeps the second feature, Holm gives (0.002, 0.04) and flags it
    np.testing.assert_allclose(holm_adjust(np.array([0.001, 0.04])), [0.002, 0.04])
    rng = np.random.default_rng(0)
    ref = {"a": rng.normal(0, 1, 400), "b": rng.normal(0, 1, 400)}
    new = {"a": rng.normal(0.4, 1, 400), "b": rng.normal(0.17, 1, 400)}
    holm, bonf = drift_test(ref, new, correction="holm"), drift_test(ref, new, correction="bonferroni")
    for f_h, f_b in zip(holm.features, bonf.features):
        assert f_h.p_adjusted <= f_b.p_adjusted and f_h.p_value == f_b.p_value
    assert bonf["b"].p_adjusted == pytest.approx(2 * bonf["b"].p_value)
    assert isinstance(holm, DriftReport) and holm.to_records()[0]["correction"] == "holm"


def test_input_errors_name_the_feature_and_the_fix():
    ok = {"distance_m": np.linspace(30, 150, 10)}
    with pytest.raises(DataValidationError, match=r"α must lie in \(0, 1\)"):
        drift_test(ok, ok, alpha=1.5)
    with pytest.raises(DataValidationError, match=r"missing from the sample \['distance_m'\], not in the reference \['d'\]"):
        drift_test(ok, {"d": ok["distance_m"]})
    with pytest.raises(DataValidationError, match="no features"):
        drift_test({}, {})
    with pytest.raises(DataValidationError, match=r"sample\['distance_m'\] is empty"):
        drift_test(ok, {"distance_m": np.array([])})
    with pytest.raises(DataValidationError, match=r"sample\['distance_m'\] contains 1 NaN"):
        drift_test(ok, {"distance_m": np.array([1.0, np.nan])})
    with pytest.raises(DataValidationError, match=r"reference\['distance_m'\] has shape \(2, 5\)"):
        drift_test({"distance_m": np.zeros((2, 5))}, ok)
    with pytest.raises(DataValidationError, match="dtype <U1"):
        drift_test(ok, {"distance_m": np.array(["a"])})
    with pytest.raises(DataValidationError, match="unknown correction 'bh'"):
        drift_test(ok, ok, correction="bh")
    with pytest.raises(UnknownNameError, match="no feature 'rate'"):  # a Cr2Error and a LookupError
        drift_test(ok, ok)["rate"]
