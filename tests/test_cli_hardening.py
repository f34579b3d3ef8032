"""The command line's hardening: output is never parsed as Rich markup (F9), user-given names follow one
pattern and are checked before anything is written (F9), and the minor points (private exports, a missing
--home creates nothing, an absurd distance is refused without a numpy warning)."""
from __future__ import annotations

import shutil
import stat
import warnings

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from cr2_cli.main import app
from cr2_warehouse.db import Warehouse, table_names


@pytest.fixture(scope="module")
def ingested(small_data_dir, tmp_path_factory):
    """A warehouse with queries and models (ingest only)."""
    from cr2.config import load_config
    from cr2_tasks.ingest import ingest_queries

    root = tmp_path_factory.mktemp("cli-hardening")
    home = root / "home"
    cfg = load_config(overrides={"data_dir": str(small_data_dir)})
    ingest_queries.fn(cfg, str(home))
    return {"home": home, "root": root}


def _invoke(args):
    return CliRunner().invoke(app, args, terminal_width=200)


def _fingerprints(home):
    with Warehouse(home, read_only=True) as wh:
        return {t: wh.table_fingerprint(t) for t in table_names()}


# ------------------------------------------------------------------ F9: markup
@pytest.mark.parametrize("sql, shown", [
    ("SELECT '[/x]' AS a", "[/x]"),
    ("SELECT '[x] marks the spot' AS question", "[x] marks the spot"),
    ("SELECT '[bold]not bold[/bold]' AS \"[red]col\"", "[bold]not bold[/bold]"),
])
def test_f9_sql_results_with_square_brackets_print_as_text(ingested, sql, shown):
    result = _invoke(["sql", sql, "--home", str(ingested["home"])])
    assert result.exit_code == 0, result.output
    assert shown in result.output


def test_f9_duckdb_settings_print(ingested):
    result = _invoke(["sql", "SELECT * FROM duckdb_settings()", "--home", str(ingested["home"]), "--limit", "500"])
    assert result.exit_code == 0, result.output
    assert "unexpected" not in result.output


def test_f9_questions_with_brackets_keep_them(ingested):
    # 3,812 shipped questions hold brackets; a question printed through a table keeps every one
    result = _invoke(["sql", "SELECT '[x] Which of [A] and [B]?' AS question", "--home", str(ingested["home"])])
    assert result.exit_code == 0 and "[x] Which of [A] and [B]?" in result.output, result.output


def test_f9_a_stored_source_name_with_brackets_still_lists(ingested, tmp_path):
    """Names written before the pattern existed (or by other tools) print as they are."""
    home = tmp_path / "home"
    shutil.copytree(ingested["home"], home)
    with Warehouse(home) as wh:
        q = wh.df("SELECT query_id FROM queries LIMIT 1")["query_id"].iloc[0]
        m = wh.df("SELECT model_id FROM models LIMIT 1")["model_id"].iloc[0]
        rows = pd.DataFrame([{"source": "[/x]legacy", "query_id": q, "model_id": m, "correct": True,
                              "output_tokens": 3, "run_id": "legacy"}])
        with wh.transaction() as con:
            wh.insert_df("labels", rows, con)
    result = _invoke(["labels", "list", "--home", str(home)])
    assert result.exit_code == 0, result.output
    assert "[/x]legacy" in result.output


# ------------------------------------------------------------------ F9: one name pattern, checked before writes
@pytest.mark.parametrize("source", ["[/x]", "[x]mine", "a b", "mine:evil", "", "-lead", "x" * 65])
def test_f9_label_sources_outside_the_pattern_are_refused_before_any_write(ingested, tmp_path, source):
    with Warehouse(ingested["home"], read_only=True) as wh:
        q = wh.df("SELECT query_id FROM queries LIMIT 2")["query_id"].tolist()
    f = tmp_path / "labels.csv"
    pd.DataFrame({"query_id": q, "model": ["qwen3-1.7b"] * 2, "correct": [1, 0]}).to_csv(f, index=False)
    before = _fingerprints(ingested["home"])
    result = _invoke(["labels", "import", str(f), "--source", source, "--home", str(ingested["home"])])
    assert result.exit_code == 2, result.output
    assert "label source" in result.output and "pattern" in result.output, result.output
    assert _fingerprints(ingested["home"]) == before
    assert _invoke(["labels", "list", "--home", str(ingested["home"])]).exit_code == 0


def test_f9_state_distribution_and_model_names_follow_the_same_pattern(ingested, tmp_path):
    import yaml

    from cr2.config import load_config, load_state_distribution
    from cr2.core.errors import ConfigError
    from cr2.config.names import NAME_PATTERN

    states = load_state_distribution("default").model_dump(mode="json")
    bad = tmp_path / "bad-states.yaml"
    bad.write_text(yaml.safe_dump({**states, "name": "[/x]cell"}))
    with pytest.raises(ConfigError, match=r"state distribution name '\[/x\]cell' is not a valid name"):
        load_state_distribution(str(bad))
    before = _fingerprints(ingested["home"])
    result = _invoke(["drift", "--states", str(bad), "--home", str(ingested["home"])])
    assert result.exit_code == 2 and NAME_PATTERN in " ".join(result.output.split()), result.output
    assert _fingerprints(ingested["home"]) == before
    cfg = load_config().model_dump(mode="json")
    cfg["models"][0]["id"] = "[bold]phone"
    with pytest.raises(Exception, match="model id"):
        type(load_config()).model_validate(cfg)


# ------------------------------------------------------------------ minor points
def test_exports_are_private_like_the_warehouse(ingested, tmp_path):
    result = _invoke(["export", "models", "--home", str(ingested["home"]), "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    mode = stat.S_IMODE((tmp_path / "out" / "models.parquet").stat().st_mode)
    assert mode == 0o600, oct(mode)
    assert stat.S_IMODE((ingested["home"] / "cr2.duckdb").stat().st_mode) == 0o600


@pytest.mark.parametrize("args", [["route", "What is 2 + 2?"], ["sql", "SELECT 1"], ["labels", "list"],
                                  ["export", "models"]])
def test_a_missing_home_creates_nothing(tmp_path, monkeypatch, args):
    monkeypatch.delenv("PREFECT_HOME", raising=False)  # as for a user: cr2 would put Prefect's state under --home
    home = tmp_path / "nonexistent"
    result = _invoke([*args, "--home", str(home)])
    assert result.exit_code == 2 and "no warehouse" in result.output, result.output
    assert not home.exists(), sorted(p.name for p in home.rglob("*"))


def test_an_absurd_distance_is_refused_without_a_numpy_warning(ingested):
    from cr2.system.channel import MAX_DISTANCE_M, channel_gain, uplink_rate_bps
    from cr2.config import load_config
    from cr2.core.errors import DataValidationError
    from cr2.deploy.deployment import check_route_inputs

    with pytest.raises(DataValidationError, match="distance_m"):
        check_route_inputs("q", None, 1.0, 0.1, 1e308)
    result = _invoke(["route", "What is 2 + 2?", "--distance-m", "1e308", "--home", str(ingested["home"])])
    assert result.exit_code == 2 and "distance_m must be" in result.output, result.output
    cfg = load_config()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the largest distance allowed computes without a RuntimeWarning
        gain = channel_gain(np.array([MAX_DISTANCE_M]), np.ones(1), cfg.channel.distribution.path_loss)
        rate = uplink_rate_bps(gain, cfg.communication)
    assert np.isfinite(rate).all() and (rate > 0).all()


@pytest.mark.flow
def test_f9_recalibrate_refuses_a_markup_state_name_before_writing(prefect_harness, ingested, tmp_path):
    """The probe: a distribution named '[/x]cell' was written as thresholds v3, then the command exited 1."""
    import yaml

    from cr2.config import load_state_distribution
    from cr2.config.names import NAME_PATTERN

    bad = tmp_path / "cell.yaml"
    bad.write_text(yaml.safe_dump({**load_state_distribution("default").model_dump(mode="json"), "name": "[/x]cell"}))
    before = _fingerprints(ingested["home"])
    result = _invoke(["recalibrate", "--states", str(bad), "--home", str(ingested["home"])])
    assert result.exit_code == 2 and NAME_PATTERN in " ".join(result.output.split()), result.output
    assert "unexpected" not in result.output
    assert _fingerprints(ingested["home"]) == before
