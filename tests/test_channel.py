"""Channel states ξ and rates: the distributions of Table I, the formulas of §IV-B, reproducibility."""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cr2.system.channel import (
    ChannelStates,
    channel_gain,
    fading_power,
    rates,
    sample_channel,
    sample_query_states,
    sample_states,
)
from cr2.config import load_config, load_state_distribution

CFG = load_config()
DEFAULT = CFG.channel.distribution
FAR = load_state_distribution("far-rician")
COMM = CFG.communication


def _ids(n: int, prefix: str = "mmlu/x/") -> np.ndarray:
    return np.array([f"{prefix}{i:05d}" for i in range(n)])


# ---------------------------------------------------------------- distributions
def test_default_distribution_matches_table_one():
    s = sample_states(DEFAULT, 200_000, seed=1)
    assert s.distance_m.min() >= 30.0 and s.distance_m.max() <= 150.0
    assert abs(s.distance_m.mean() - 90.0) < 0.5  # U(30,150): mean 90, sd of the mean 0.08
    for fading in (s.fading_ul, s.fading_dl):
        # Rayleigh: |z|² ~ Exp(1): mean 1, P(|z|² > 1) = e^-1 (sd of each estimate ≈ 0.002)
        assert abs(fading.mean() - 1.0) < 0.01
        assert abs((fading > 1.0).mean() - np.exp(-1.0)) < 0.01
    assert abs(np.corrcoef(s.fading_ul, s.fading_dl)[0, 1]) < 0.01  # independent links
    assert abs(np.corrcoef(s.distance_m, s.fading_ul)[0, 1]) < 0.01


def test_rician_fading_has_unit_mean_and_the_configured_k():
    k = FAR.fading.k_factor
    assert k == pytest.approx(10 ** 0.3)  # K = 3 dB, converted once at load
    s = sample_states(FAR, 200_000, seed=2)
    assert s.distance_m.min() >= 100.0 and s.distance_m.max() <= 300.0
    f = s.fading_ul
    assert abs(f.mean() - 1.0) < 0.01
    # Rician second moment: E|z|⁴ = (K² + 4K + 2)/(K + 1)²  (Rayleigh, K = 0: 2)
    assert abs((f**2).mean() - (k**2 + 4 * k + 2) / (k + 1) ** 2) < 0.03


def test_fading_power_rayleigh_is_the_k_zero_rician():
    u1, u2 = np.random.default_rng(0).random((2, 1000))
    np.testing.assert_allclose(fading_power(u1, u2, None), fading_power(u1, u2, 0.0), rtol=1e-12)
    np.testing.assert_allclose(fading_power(u1, u2, None), -np.log1p(-u1), rtol=1e-12)
    with pytest.raises(ValueError, match="K factor"):
        fading_power(u1, u2, -1.0)


def test_gain_follows_the_path_loss_law():
    d = np.array([1.0, 10.0, 100.0])
    g = channel_gain(d, np.ones(3), DEFAULT.path_loss)
    # g = K0·(d/d0)^-4 with K0 = -43.3 dB: each decade of distance costs 40 dB
    np.testing.assert_allclose(g, 10 ** (-4.33) * d**-4.0, rtol=1e-12)
    np.testing.assert_allclose(10 * np.log10(g[:-1] / g[1:]), 40.0)


# ---------------------------------------------------------------- rates
@settings(max_examples=100, deadline=None)
@given(st.floats(1.0, 1000.0), st.floats(1e-6, 50.0), st.floats(1e-6, 50.0))
def test_rates_are_positive_and_below_the_noiseless_bound(distance_m, f_ul, f_dl):
    g = channel_gain(np.array([distance_m]), np.array([f_ul, f_dl]), DEFAULT.path_loss)
    s = ChannelStates(np.array([distance_m]), np.array([f_ul]), np.array([f_dl]), g[:1], g[1:])
    r_ul, r_dl = rates(s, COMM)
    assert r_ul[0] > 0 and r_dl[0] > 0
    # R = B log2(1 + SNR) ≤ B·SNR/ln 2
    snr_ul = COMM.tx_power_ue_w * g[0] / (COMM.bandwidth_ul_hz * COMM.noise_psd_w_per_hz)
    assert r_ul[0] <= COMM.bandwidth_ul_hz * snr_ul / np.log(2) * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(st.floats(10.0, 300.0), st.floats(1.01, 3.0), st.floats(0.01, 10.0))
def test_rates_fall_with_distance_at_fixed_fading(d, ratio, fading):
    dist = np.array([d, d * ratio])
    g = channel_gain(dist, np.full(2, fading), DEFAULT.path_loss)
    r_ul, r_dl = rates(ChannelStates(dist, np.full(2, fading), np.full(2, fading), g, g), COMM)
    assert r_ul[1] < r_ul[0] and r_dl[1] < r_dl[0]


# ---------------------------------------------------------------- reproducibility
def test_same_seed_same_states_and_another_seed_other_states():
    a, b, c = (sample_states(DEFAULT, 1000, seed=s) for s in (7, 7, 8))
    for name in ("distance_m", "fading_ul", "fading_dl", "gain_ul", "gain_dl"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.allclose(a.distance_m, c.distance_m)
    ids = _ids(300)
    q1, q2 = sample_query_states(DEFAULT, ids, 2, seed=0), sample_query_states(DEFAULT, ids, 2, seed=0)
    np.testing.assert_array_equal(q1.gain_ul, q2.gain_ul)
    assert not np.allclose(q1.distance_m, sample_query_states(DEFAULT, ids, 2, seed=1).distance_m)


def test_a_querys_states_do_not_depend_on_the_other_queries():
    ids = _ids(500)
    base = sample_states(DEFAULT, ids, seed=3, draws_per_query=3)
    extra = np.concatenate([ids, _ids(200, prefix="bbh/new/")])
    order = np.random.default_rng(0).permutation(len(extra))
    grown = sample_states(DEFAULT, extra[order], seed=3, draws_per_query=3)
    key = {(q, d): i for i, (q, d) in enumerate(zip(grown.query_id, grown.draw))}
    rows = np.array([key[(q, d)] for q, d in zip(base.query_id, base.draw)])
    for name in ("distance_m", "fading_ul", "fading_dl", "gain_ul", "gain_dl"):
        np.testing.assert_array_equal(getattr(grown, name)[rows], getattr(base, name))


def test_more_draws_keep_the_existing_draws():
    ids = _ids(50)
    one = sample_query_states(DEFAULT, ids, 1, seed=0)
    four = sample_query_states(DEFAULT, ids, 4, seed=0)
    assert list(four.draw[:5]) == [0, 1, 2, 3, 0] and list(four.query_id[:5]) == [ids[0]] * 4 + [ids[1]]
    np.testing.assert_array_equal(four.subset(four.draw == 0).distance_m, one.distance_m)
    assert len(np.unique(four.distance_m)) == 200  # the draws of one query differ


def test_another_distribution_gives_other_states():
    ids = _ids(100)
    a = sample_query_states(DEFAULT, ids, 1, seed=0)
    b = sample_query_states(FAR, ids, 1, seed=0)
    assert a.dist_id != b.dist_id and b.dist_id.startswith("far-rician@v1-")
    assert np.all(b.distance_m >= 100.0)


def test_config_states_use_the_channel_section():
    ids = _ids(20)
    s = sample_channel(CFG.channel, ids)
    assert s.dist_id == DEFAULT.dist_id and len(s) == 20 * CFG.channel.draws_per_query
    np.testing.assert_array_equal(s.gain_dl, sample_query_states(DEFAULT, ids, CFG.channel.draws_per_query, 0).gain_dl)


def test_the_default_set_is_sampled_with_positive_rates():
    # speed is a benchmark's business (benchmarks/), not a timed unit test's
    ids = _ids(21_501)
    s = sample_states(DEFAULT, ids, seed=0)
    r_ul, r_dl = rates(s, COMM)
    assert len(s) == 21_501 and np.all(r_ul > 0) and np.all(r_dl > 0)


# ---------------------------------------------------------------- bad input
def test_bad_inputs_fail_clearly():
    with pytest.raises(ValueError, match="unique"):
        sample_query_states(DEFAULT, ["a/1", "a/1"], 1, seed=0)
    with pytest.raises(ValueError, match="draws_per_query"):
        sample_query_states(DEFAULT, ["a/1"], 0, seed=0)
    with pytest.raises(ValueError, match="non-negative"):
        sample_states(DEFAULT, -1, seed=0)
    with pytest.raises(ValueError, match="distance_m"):
        ChannelStates(np.ones(3), np.ones(2), np.ones(3), np.ones(3), np.ones(3))
    assert len(sample_query_states(DEFAULT, [], 2, seed=0)) == 0
