"""The cost model of paper §IV-B..F: a hand-computed golden query, invariants, normalisation, bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cr2.system.channel import ChannelStates, channel_gain, rates
from cr2.config import load_config
from cr2.system.cost import (
    beta_decode_s_per_flop,
    beta_prefill_s_per_flop,
    compute_costs,
    costs_from_config,
    fill_output_tokens,
)

CFG = load_config()
MODELS = CFG.models  # qwen3-1.7b (device), qwen3-4b, qwen3-8b, qwen3-14b (= m_ref)


def _rates_at(distance_m, fading_ul, fading_dl):
    d = np.asarray(distance_m, dtype=float)
    f_ul = np.broadcast_to(np.asarray(fading_ul, dtype=float), d.shape)
    f_dl = np.broadcast_to(np.asarray(fading_dl, dtype=float), d.shape)
    pl = CFG.channel.distribution.path_loss
    s = ChannelStates(d, f_ul, f_dl, channel_gain(d, f_ul, pl), channel_gain(d, f_dl, pl))
    return rates(s, CFG.communication)


def test_golden_query_by_hand():
    """d = 100 m, |z|² = 1 both ways, L_in = 100, L_out = 16 for every model, default config (Table I)."""
    r_ul, r_dl = _rates_at([100.0], 1.0, 1.0)
    # K0 = 10^(-43.3/10) = 4.677351e-5;  g = K0·|z|²·(100/1)^-4 = 4.677351e-13
    # N0 = 10^((-174 - 30)/10) W/Hz = 3.981072e-21 W/Hz
    # UL: SNR = 0.5·4.677351e-13 / (10e6·3.981072e-21) = 2.338676e-13 / 3.981072e-14 = 5.874488
    #     R_ul = 10e6·log2(6.874488) = 10e6·2.781252 = 2.781252e7 bit/s
    # DL: SNR = 2.0·4.677351e-13 / (40e6·3.981072e-21) = 5.874488 (p/B is the same: 0.5/10 = 2/40)
    #     R_dl = 40e6·2.781252 = 1.112501e8 bit/s
    assert r_ul[0] == pytest.approx(2.7812522e7, rel=1e-7)
    assert r_dl[0] == pytest.approx(1.1125009e8, rel=1e-7)

    br = costs_from_config(CFG, np.array([100.0]), np.full((1, 4), 16.0), r_ul, r_dl)
    # τ_ul = 32·100 / 2.781252e7 = 1.150561e-4 s;  τ_dl = 32·16 / 1.112501e8 = 4.602244e-6 s
    assert br.tau_ul_s[0] == pytest.approx(1.150561e-4, rel=1e-6)
    assert br.tau_dl_s[0, 1:] == pytest.approx([4.602244e-6] * 3, rel=1e-6)
    assert br.tau_dl_s[0, 0] == 0.0
    # τ_inf = β_pre·2·N·L_in + β_dec·2·N·L_out, β_pre = 1/F, β_dec = b/(2W):
    #   1.7B on Orin  (10 TFLOP/s, 150 GB/s): 2·1.7e9·100/10e12 = 0.034   + 1.7e9·2·16/150e9 = 0.3626667 → 0.3966667 s
    #   4B on 4070 Ti (40 TFLOP/s, 400 GB/s): 2·4.0e9·100/40e12 = 0.02    + 4.0e9·2·16/400e9 = 0.32      → 0.34 s
    #   8.2B on 4090  (80 TFLOP/s, 800 GB/s): 2·8.2e9·100/80e12 = 0.0205  + 8.2e9·2·16/800e9 = 0.328     → 0.3485 s
    #   14.8B on A40  (60 TFLOP/s, 560 GB/s): 2·14.8e9·100/60e12 = 0.049333
    #                                          + 14.8e9·2·16/560e9 = 0.845714  → 0.8950476 s
    tau_inf = [0.3966667, 0.34, 0.3485, 0.8950476]
    assert br.tau_inf_s[0] == pytest.approx(tau_inf, rel=1e-6)
    # t_0 = τ_inf,0 = 0.3966667 s; t_m = τ_ul + 0.018 + τ_inf,m + τ_dl:
    #   4B: 1.150561e-4 + 0.018 + 0.34 + 4.602244e-6 = 0.3581197 s;  8B: 0.3666197 s;  14B: 0.9131673 s
    latency = [0.3966667, 0.3581197, 0.3666197, 0.9131673]
    assert br.latency_s[0] == pytest.approx(latency, rel=1e-6)
    # e_0 = 15 W·0.3966667 s = 5.95 J
    # e_m = 1.2·τ_ul + 0.9·τ_dl + 0.05·(0.018 + τ_inf,m) + P_srv·τ_inf,m:
    #   4B  (150 W): 1.380673e-4 + 4.142020e-6 + 0.05·0.358     + 150·0.34      = 51.018042 J
    #   8B  (300 W): 1.380673e-4 + 4.142020e-6 + 0.05·0.3665    + 300·0.3485    = 104.568467 J
    #   14B (200 W): 1.380673e-4 + 4.142020e-6 + 0.05·0.9130476 + 200·0.8950476 = 179.055318 J
    energy = [5.95, 51.018042, 104.568467, 179.055318]
    assert br.energy_j[0] == pytest.approx(energy, rel=1e-6)
    # c̄ = 0.5·t/1.118617 + 0.5·e/223.752133:
    #   1.7B: 0.5·0.3966667/1.118617 + 0.5·5.95/223.752133       = 0.177302 + 0.013296 = 0.1905982
    #   4B:   0.5·0.3581197/1.118617 + 0.5·51.018042/223.752133  = 0.160073 + 0.114006 = 0.2740782
    #   8B:                                                                              0.3975422
    #   14B:  0.5·0.9131673/1.118617 + 0.5·179.055318/223.752133 = 0.408168 + 0.400120 = 0.8082878
    assert br.cost_raw[0] == pytest.approx([0.1905982, 0.2740782, 0.3975422, 0.8082878], rel=1e-6)
    # c = c̄ / c̄_14B: 0.2358049, 0.3390849, 0.4918325, 1 (c_ref ≡ 1)
    assert br.cost_norm[0] == pytest.approx([0.2358049, 0.3390849, 0.4918325, 1.0], rel=1e-6)
    assert br.cost_norm[0, 3] == 1.0 and br.ref_index == 3
    assert (br.t0_s, br.e0_j, br.normalisation) == (1.118617, 223.752133, "fixed")


def test_beta_conversion_from_the_hardware_profile():
    orin = CFG.hardware.platforms["jetson-agx-orin"]
    assert beta_prefill_s_per_flop(orin) == pytest.approx(1e-13)  # 1 / 10 TFLOP/s
    # one decoded token = 2·N FLOP and streams N·2 bytes at 150 GB/s: β_dec·2N = 2N/150e9
    assert beta_decode_s_per_flop(orin) * 2 * 1.7e9 == pytest.approx(1.7e9 * 2 / 150e9)


# ---------------------------------------------------------------- invariants
row = st.tuples(
    st.floats(1.0, 4000.0),  # L_in
    st.lists(st.floats(0.0, 512.0), min_size=4, max_size=4),  # L_out per model
    st.floats(5.0, 400.0),  # distance, m
    st.floats(1e-3, 20.0),  # |z_ul|²
    st.floats(1e-3, 20.0),  # |z_dl|²
)


def _batch(rows):
    l_in = np.array([r[0] for r in rows])
    l_out = np.array([r[1] for r in rows])
    r_ul, r_dl = _rates_at([r[2] for r in rows], [r[3] for r in rows], [r[4] for r in rows])
    return l_in, l_out, r_ul, r_dl


@settings(max_examples=60, deadline=None)
@given(st.lists(row, min_size=1, max_size=20))
def test_energy_terms_sum_to_the_total_and_c_ref_is_one(rows):
    br = costs_from_config(CFG, *_batch(rows))
    parts = br.energy_tx_j + br.energy_rx_j + br.energy_idle_j + br.energy_server_j + br.energy_device_j
    np.testing.assert_allclose(parts, br.energy_j, rtol=1e-12)
    assert np.all(br.cost_norm[:, br.ref_index] == 1.0)
    assert np.all(br.latency_s > 0) and np.all(br.energy_j > 0) and np.all(br.cost_norm > 0)
    # the device model pays no communication, edge models no device inference power
    assert np.all(br.energy_tx_j[:, 0] == 0) and np.all(br.energy_device_j[:, 1:] == 0)
    lat = br.tau_ul_s[:, None] + CFG.communication.rtt_s + br.tau_inf_s + br.tau_dl_s
    np.testing.assert_allclose(br.latency_s[:, 1:], lat[:, 1:], rtol=1e-12)
    np.testing.assert_allclose(br.latency_s[:, 0], br.tau_inf_s[:, 0], rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(row, st.floats(1.01, 4.0))
def test_cost_increases_with_distance_at_fixed_fading(r, ratio):
    l_in, l_out, d, f_ul, f_dl = r
    near = costs_from_config(CFG, *_batch([r]))
    far = costs_from_config(CFG, *_batch([(l_in, l_out, d * ratio, f_ul, f_dl)]))
    # edge models pay more time and energy on a weaker link; the device model is unaffected
    assert np.all(far.cost_raw[0, 1:] > near.cost_raw[0, 1:])
    assert np.all(far.latency_s[0, 1:] > near.latency_s[0, 1:]) and np.all(far.energy_j[0, 1:] > near.energy_j[0, 1:])
    assert far.cost_raw[0, 0] == near.cost_raw[0, 0]
    # relative to m_ref, local inference gets cheaper as the user moves away
    assert far.cost_norm[0, 0] < near.cost_norm[0, 0]


# ---------------------------------------------------------------- normalisation
def test_reference_normalisation_uses_the_mean_of_m_ref_on_the_reference_rows():
    rng = np.random.default_rng(0)
    n = 200
    l_in = rng.integers(20, 800, n).astype(float)
    l_out = rng.integers(1, 200, (n, 4)).astype(float)
    r_ul, r_dl = _rates_at(rng.uniform(30, 150, n), rng.exponential(1.0, n), rng.exponential(1.0, n))
    mask = rng.random(n) < 0.8
    ref_cfg = load_config(overrides={"cost": {"normalisation": "reference"}})
    br = costs_from_config(ref_cfg, l_in, l_out, r_ul, r_dl, reference_mask=mask)
    assert br.t0_s == pytest.approx(br.latency_s[mask, 3].mean()) and br.e0_j == pytest.approx(br.energy_j[mask, 3].mean())
    assert br.normalisation == "reference" and np.all(br.cost_norm[:, 3] == 1.0)
    # the same scales given as fixed numbers give the same costs
    fixed = load_config(overrides={"cost": {"t0_s": br.t0_s, "e0_j": br.e0_j}})
    np.testing.assert_allclose(costs_from_config(fixed, l_in, l_out, r_ul, r_dl).cost_norm, br.cost_norm, rtol=1e-12)
    # index arrays work like masks
    by_index = costs_from_config(ref_cfg, l_in, l_out, r_ul, r_dl, reference_mask=np.flatnonzero(mask))
    assert by_index.t0_s == br.t0_s
    with pytest.raises(ValueError, match="reference_mask"):
        costs_from_config(ref_cfg, l_in, l_out, r_ul, r_dl)
    with pytest.raises(ValueError, match="no rows"):
        costs_from_config(ref_cfg, l_in, l_out, r_ul, r_dl, reference_mask=np.zeros(n, bool))


def test_config_keyword_and_explicit_sections_agree_and_any_pool_works():
    args = (np.array([50.0, 300.0]), np.full((2, 4), 20.0), np.array([1e7, 2e7]), np.array([5e7, 9e7]))
    a = compute_costs(*args, config=CFG)
    b = compute_costs(*args, models=CFG.models, hardware=CFG.hardware, comm=CFG.communication, power=CFG.power,
                      cost_spec=CFG.cost, ref_model_id="qwen3-14b")
    np.testing.assert_array_equal(a.cost_norm, b.cost_norm)
    # a two-model pool: the device and one edge model, which is then m_ref
    two = compute_costs(args[0], args[1][:, :2], args[2], args[3], models=CFG.models[:2], hardware=CFG.hardware,
                        comm=CFG.communication, power=CFG.power, cost_spec=CFG.cost)
    assert two.model_ids == ("qwen3-1.7b", "qwen3-4b") and np.all(two.cost_norm[:, 1] == 1.0)


def test_fill_output_tokens_prefers_recorded_lengths():
    rec = np.array([[np.nan, 30.0], [5.0, np.nan]])
    out = fill_output_tokens(np.array(["mmlu", "mbpp"]), 2, CFG.cost, rec)
    np.testing.assert_array_equal(out, [[16.0, 30.0], [5.0, 128.0]])
    with pytest.raises(ValueError, match="no entry"):
        fill_output_tokens(np.array(["nope"]), 2, CFG.cost)


# ---------------------------------------------------------------- bad input
GOOD = dict(prompt_tokens=np.array([10.0, 20.0]), output_tokens=np.ones((2, 4)),
            rate_ul_bps=np.array([1e6, 1e6]), rate_dl_bps=np.array([1e6, 1e6]))


@pytest.mark.parametrize("field, value, message", [
    ("prompt_tokens", np.array([10.0, 0.0]), "prompt_tokens must be > 0"),
    ("prompt_tokens", np.ones((2, 1)), r"prompt_tokens has shape \(2, 1\)"),
    ("output_tokens", np.ones((2, 3)), r"output_tokens has shape \(2, 3\), expected \(2, 4\)"),
    ("output_tokens", -np.ones((2, 4)), "output_tokens must be ≥ 0"),
    ("output_tokens", np.full((2, 4), np.nan), "NaN or inf"),
    ("rate_ul_bps", np.array([1e6, 0.0]), "rate_ul_bps must be > 0"),
    ("rate_dl_bps", np.array([1e6, -1.0]), "rate_dl_bps must be > 0"),
    ("rate_dl_bps", np.array([1e6]), r"rate_dl_bps has shape \(1,\), expected \(2,\)"),
    ("rate_ul_bps", np.array([1e6, np.inf]), "non-finite"),
])
def test_bad_inputs_fail_clearly(field, value, message):
    with pytest.raises(ValueError, match=message):
        compute_costs(**{**GOOD, field: value}, config=CFG)


def test_bad_pools_fail_clearly():
    with pytest.raises(ValueError, match="device model first"):
        compute_costs(**GOOD, models=CFG.models[::-1], hardware=CFG.hardware, comm=CFG.communication,
                      power=CFG.power, cost_spec=CFG.cost)
    with pytest.raises(ValueError, match="not in the pool"):
        compute_costs(**GOOD, config=CFG, ref_model_id="qwen3-32b")
    with pytest.raises(ValueError, match="needs models"):
        compute_costs(**GOOD)
