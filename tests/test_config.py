"""Configuration: Table I as loaded (golden), unit conversions, and clear errors for bad files."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from cr2.config import DEFAULT_CONFIG, load_config, load_state_distribution
from cr2.core.errors import ConfigError


def test_table_one_values_as_loaded():
    cfg = load_config()
    c = cfg.communication
    assert (c.bits_per_input_token, c.bits_per_output_token) == (32, 32)
    assert (c.bandwidth_ul_hz, c.bandwidth_dl_hz) == (10e6, 40e6)
    assert c.rtt_s == pytest.approx(0.018)
    assert c.carrier_frequency_hz == 3.5e9
    assert (c.tx_power_ue_w, c.tx_power_bs_w) == (0.5, 2.0)
    p = cfg.power
    assert (p.ue_tx_w, p.ue_rx_w, p.ue_idle_w, p.ue_active_w) == (1.2, 0.9, 0.05, 15.0)
    assert [m.server_power_w for m in cfg.edge_models] == [150.0, 300.0, 200.0]
    assert (cfg.cost.omega_t, cfg.cost.omega_e) == (0.5, 0.5)
    assert cfg.cost.t0_s == pytest.approx(1.118617)  # T0 = 1118.617 ms
    assert cfg.cost.e0_j == pytest.approx(223.752133)  # E0 = 223752.133 mJ
    d = cfg.channel.distribution
    assert (d.distance.low_m, d.distance.high_m) == (30.0, 150.0)
    assert d.fading.kind == "rayleigh"
    assert (d.path_loss.k0_db, d.path_loss.exponent, d.path_loss.d0_m) == (-43.3, 4.0, 1.0)
    assert cfg.model_ids == ["qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b"]
    assert cfg.ref_model_id == "qwen3-14b"
    assert cfg.grids.alpha == [0.002, 0.005, 0.01, 0.02, 0.05]


def test_units_are_converted_once_at_load():
    cfg = load_config()
    # N0 = -174 dBm/Hz = 10^((-174 - 30)/10) W/Hz = 3.981e-21 W/Hz
    assert cfg.communication.noise_psd_w_per_hz == pytest.approx(3.981071705534972e-21, rel=1e-12)
    # K0 = -43.3 dB = 10^(-4.33) = 4.677e-5
    assert cfg.channel.distribution.path_loss.k0 == pytest.approx(10 ** -4.33, rel=1e-12)
    rician = load_state_distribution("far-rician")
    assert rician.fading.k_factor == pytest.approx(10 ** 0.3, rel=1e-12)  # K = 3 dB


def test_lambda_grid_contains_log_points_and_extras():
    lams = load_config().grids.lam.values()
    # the one sweep of every method: λ = 0 (accuracy only), then 28 log points in [0.02, 20], plus the paper's
    assert lams[0] == 0.0 and lams[1] == pytest.approx(0.02) and lams[-1] == pytest.approx(20.0)
    assert all(x in lams for x in (0.5, 1.0, 2.0, 8.0))
    assert lams == sorted(lams) and len(lams) == 1 + 28 + 4 - 1  # 2.0 is also a log point (0.02·1000^(18/27))


def _write(tmp_path: Path, data) -> Path:
    p = tmp_path / "bad.yaml"
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def _default() -> dict:
    return yaml.safe_load(DEFAULT_CONFIG.read_text())


def test_malformed_yaml_names_file_and_line(tmp_path):
    p = _write(tmp_path, "seed: 0\nmodels: [unclosed\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: malformed YAML at line \d+"):
        load_config(p)


def test_unknown_key_is_rejected_with_its_path(tmp_path):
    data = _default()
    data["communication"]["bandwith_ul_hz"] = 1.0
    with pytest.raises(ConfigError, match=r"communication\.bandwith_ul_hz: unknown key"):
        load_config(_write(tmp_path, data))


def test_wrong_type_names_the_field(tmp_path):
    data = _default()
    data["power"]["ue_tx_w"] = "lots"
    with pytest.raises(ConfigError, match=r"power\.ue_tx_w: .*got 'lots'"):
        load_config(_write(tmp_path, data))


def test_bound_violation_names_the_field(tmp_path):
    data = _default()
    data["communication"]["bandwidth_dl_hz"] = -1
    with pytest.raises(ConfigError, match=r"communication\.bandwidth_dl_hz: Input should be greater than 0"):
        load_config(_write(tmp_path, data))


def test_weights_must_sum_to_one(tmp_path):
    data = _default()
    data["cost"]["omega_t"] = 0.7
    with pytest.raises(ConfigError, match=r"omega_t \+ omega_e must be 1"):
        load_config(_write(tmp_path, data))


def test_unknown_state_distribution_lists_available(tmp_path):
    data = _default()
    data["channel"]["distribution"] = "nowhere"
    with pytest.raises(ConfigError, match=r"unknown states 'nowhere'; available: default, far-rician, premise-beyond-edge"):
        load_config(_write(tmp_path, data))


def test_missing_file():
    with pytest.raises(ConfigError, match="file not found"):
        load_config("/nonexistent/cr2.yaml")


def test_pool_needs_one_device_model_first(tmp_path):
    data = _default()
    data["models"] = data["models"][1:]
    with pytest.raises(ConfigError, match="exactly one device model"):
        load_config(_write(tmp_path, data))


def test_section_hash_changes_only_with_its_section():
    a = load_config()
    b = load_config(overrides={"gate": {"w_mono": 0.5}})
    assert a.section_hash("communication") == b.section_hash("communication")
    assert a.section_hash("gate") != b.section_hash("gate")
    assert not math.isclose(a.gate.w_mono, b.gate.w_mono)


def test_extends_merges_a_small_override_file_over_the_default(tmp_path):
    from cr2.config import load_config

    f = tmp_path / "far.yaml"
    f.write_text("extends: default\nchannel: {distribution: far-rician}\ngrids: {default_alpha: 0.02}\n")
    cfg = load_config(f)
    assert cfg.channel.distribution.name == "far-rician"
    assert cfg.grids.default_alpha == 0.02
    assert cfg.grids.alpha == load_config().grids.alpha  # untouched keys come from the base


def test_extends_errors_name_the_file(tmp_path):
    from cr2.config import load_config
    from cr2.core.errors import ConfigError

    f = tmp_path / "bad.yaml"
    f.write_text("extends: nowhere\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: extends: 'nowhere' not found"):
        load_config(f)
    g = tmp_path / "loop.yaml"
    g.write_text("extends: loop.yaml\n")
    with pytest.raises(ConfigError, match="cycle"):
        load_config(g)


def test_n_resplits_is_zero_for_no_bands_or_at_least_ten():
    from cr2.core.errors import ConfigError

    assert load_config(overrides={"evaluation": {"n_resplits": 0}}).evaluation.n_resplits == 0
    with pytest.raises(ConfigError, match="n_resplits=3: use 0"):
        load_config(overrides={"evaluation": {"n_resplits": 3}})


# ------------------------------------------------------------------ finite and ordered numbers, no overflow
def _validate_cli(path) -> tuple[int, str]:
    from typer.testing import CliRunner

    from cr2_cli.main import app

    result = CliRunner().invoke(app, ["config", "validate", str(path)], terminal_width=300)
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize("yaml_text, where", [
    ("communication: {rtt_s: .inf}", "communication.rtt_s: Input should be a finite number"),
    ("cost: {e0_j: .inf}", "cost.e0_j: Input should be a finite number"),
    ("teacher: {lr: .inf}", "teacher.lr: Input should be a finite number"),
    ("gate: {film_frequencies: [.nan]}", "gate.film_frequencies.0: Input should be a finite number"),
    ("grids: {lam: {min: 30.0, max: 0.1, n_log: 6}}", "min (30) must not exceed max (0.1)"),
    ("gate: {lam_min: 25.0}", "lam_min (25) must not exceed lam_max (20)"),
])
def test_p5_non_finite_and_contradictory_numbers_are_refused_naming_the_field(tmp_path, yaml_text, where):
    """Before: `rtt_s: .inf` validated and `cr2 route` then deferred to the device model with NaN costs."""
    f = tmp_path / "bad.yaml"
    f.write_text(f"extends: default\n{yaml_text}\n")
    code, out = _validate_cli(f)
    assert code == 2 and where in out and "bad.yaml" in out and "bug" not in out, out


def test_p5_every_float_field_of_the_config_refuses_nan_and_infinity():
    """One rule for every numeric field (cr2.core.boundary.InputModel): any float leaf set to ±inf or NaN is refused."""
    from pydantic import ValidationError

    from cr2.config import Config
    from cr2.config.reads import leaf_paths, value_at

    cfg = load_config()
    floats = [p for p in leaf_paths(cfg) if isinstance(value_at(cfg, p), float)]
    assert len(floats) > 50
    for i, path in enumerate(floats):
        data = cfg.model_dump(mode="json")
        *parents, leaf = path.split(".")
        node = data
        for name in parents:
            node = node[name]
        node[leaf] = (float("inf"), float("-inf"), float("nan"))[i % 3]
        with pytest.raises(ValidationError, match="finite number"):
            Config.model_validate(data)


def test_p6_overflowing_levels_are_refused_naming_the_field(tmp_path):
    """Before: `noise_psd_dbm_per_hz: 1e308` overflowed at load (exit 1, "bug"); so did a states file's k0_db or
    k_factor_db of 1e308 in `cr2 drift`."""
    from typer.testing import CliRunner

    from cr2_cli.main import app

    f = tmp_path / "loud.yaml"
    f.write_text("extends: default\ncommunication: {noise_psd_dbm_per_hz: 1e308}\n")
    code, out = _validate_cli(f)
    assert code == 2 and "communication.noise_psd_dbm_per_hz" in out and "3000" in out and "bug" not in out, out
    states = load_state_distribution("far-rician").model_dump(mode="json")
    for section, key in (("path_loss", "k0_db"), ("fading", "k_factor_db")):
        bad = {**states, section: {**states[section], key: 1e308}}
        g = tmp_path / f"{key}.yaml"
        g.write_text(yaml.safe_dump(bad))
        result = CliRunner().invoke(app, ["drift", "--states", str(g), "--home", str(tmp_path / "nohome")],
                                    terminal_width=300)
        out = " ".join(result.output.split())
        assert result.exit_code == 2 and f"{section}.{key}" in out and "bug" not in out, out


@pytest.mark.parametrize("overrides, field", [
    ({"seed": -5}, "seed"),
    ({"seed": 2 ** 32}, "seed"),
    ({"splits": {"seed": -1}}, "splits.seed"),
    ({"teacher": {"seed": -1}}, "teacher.seed"),
    ({"gate": {"seed": -1}}, "gate.seed"),
    ({"channel": {"seed": -1}}, "channel.seed"),
    ({"evaluation": {"bootstrap": {"seed": -1}}}, "evaluation.bootstrap.seed"),
    ({"grids": {"lam": {"n_log": 1e8}}}, "grids.lam.n_log"),
    ({"teacher": {"epochs": 1e18}}, "teacher.epochs"),  # 1e24 exceeds 64 bits: refused as not an integer
    ({"gate": {"epochs": 10 ** 6}}, "gate.epochs"),
    ({"teacher": {"hidden": 10 ** 7}}, "teacher.hidden"),
    ({"gate": {"batch_size": 10 ** 9}}, "gate.batch_size"),
    ({"gate": {"lambdas_per_batch": 10 ** 6}}, "gate.lambdas_per_batch"),
    ({"calibration": {"n_resplits": 10 ** 8}}, "calibration.n_resplits"),
    ({"evaluation": {"n_resplits": 10 ** 8}}, "evaluation.n_resplits"),
    ({"evaluation": {"bootstrap": {"n_resamples_compare": 10 ** 8}}}, "evaluation.bootstrap.n_resamples_compare"),
])
def test_seeds_and_counts_outside_their_range_are_refused_naming_the_field(overrides, field):
    with pytest.raises(ConfigError) as err:
        load_config(overrides=overrides)
    msg = str(err.value)
    assert f"  {field}: " in msg and ("greater than or equal to 0" in msg or "less than or equal to" in msg), msg


def test_seeds_and_counts_at_their_bounds_load():
    from cr2.config.base import MAX_SEED

    cfg = load_config(overrides={"seed": MAX_SEED, "splits": {"seed": 0}, "grids": {"lam": {"n_log": 1000}},
                                 "teacher": {"epochs": 10_000}})
    assert cfg.seed == 2 ** 32 - 1 and len(cfg.grids.lam.values()) >= 1000


def test_a_negative_seed_is_refused_by_config_validate(tmp_path):
    from typer.testing import CliRunner

    from cr2_cli.main import app

    p = _write(tmp_path, "extends: default\nseed: -5\n")
    result = CliRunner().invoke(app, ["config", "validate", str(p)])
    assert result.exit_code == 2 and "seed" in result.output and "bug" not in result.output, result.output


def test_a_huge_value_is_echoed_cut(tmp_path):
    p = _write(tmp_path, "extends: default\nseed: " + "9" * 300_000 + "x\n")
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert "  seed: " in msg and len(msg) < 500 and "300,001 chars" in msg, msg[:500]
    with pytest.raises(ConfigError) as err:
        load_config(overrides={"grids": {"lam": {"extra": [-1.0] * 50_000}}})
    assert "grids.lam.extra" in str(err.value) and len(str(err.value)) < 500, str(err.value)[:500]
