"""docs/results.md's "What α bounds" (risks) and "When CR² pays" (premise) sections, generated: they
render on a slice warehouse with every verdict word backed; the trend test they use is exact on small cases and
seeded on larger ones; a validity run of `cr2 guarantees` is stored and read back into the page; a premise study's
settings are recorded and name the command that reproduces it."""
from __future__ import annotations

import itertools
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from cr2.evaluation.statistics import spearman_permutation_test
from cr2.core.errors import InvalidValueError


# ---------------------------------------------------------------- (b) the trend test
def test_spearman_exact_on_small_cases():
    rng = np.random.default_rng(0)
    up = spearman_permutation_test([1, 2, 3, 4], [10, 20, 30, 40], rng)
    assert up.rho == pytest.approx(1.0) and up.method == "exact" and up.n_permutations == 24
    assert up.p_value == pytest.approx(2 / 24)  # only the identity and the reversal reach |ρ| = 1
    down = spearman_permutation_test([1, 2, 3, 4], [4, 3, 2, 1], rng)
    assert down.rho == pytest.approx(-1.0) and down.p_value == pytest.approx(2 / 24)
    # n = 5, one swap: ρ = 0.9; by enumeration, |ρ| ≥ 0.9 in 10 of the 120 permutations
    x, y = np.arange(5), np.array([1, 0, 2, 3, 4])
    t = spearman_permutation_test(x, y, rng)
    assert t.rho == pytest.approx(0.9)
    rhos = [np.corrcoef(x, np.array(p))[0, 1] for p in itertools.permutations(y)]
    assert t.p_value == pytest.approx(np.mean(np.abs(rhos) >= 0.9 - 1e-12)) == pytest.approx(10 / 120)


def test_spearman_ties_share_mid_ranks_and_match_scipy():
    from scipy.stats import spearmanr

    x = np.array([1.0, 2, 2, 3, 5, 8])
    y = np.array([0.5, 0.1, 0.4, 0.4, 0.9, 0.7])
    t = spearman_permutation_test(x, y, np.random.default_rng(0))
    assert t.rho == pytest.approx(spearmanr(x, y).statistic) and t.method == "exact" and t.n_permutations == 720


def test_spearman_monte_carlo_is_seeded_and_never_zero():
    rng = np.random.default_rng(3)
    x = np.arange(24, dtype=float)
    y = -x + rng.normal(0, 3, 24)
    a = spearman_permutation_test(x, y, np.random.default_rng(7), n_permutations=2000)
    b = spearman_permutation_test(x, y, np.random.default_rng(7), n_permutations=2000)
    assert a == b and a.method == "monte-carlo" and a.n_permutations == 2000
    assert a.rho < -0.8 and a.p_value == pytest.approx(1 / 2001)  # no permutation reaches it: (1 + 0) / (1 + B)
    null = spearman_permutation_test(x, np.random.default_rng(1).normal(size=24), np.random.default_rng(7), 2000)
    assert null.p_value > 0.05


def test_spearman_refuses_what_it_cannot_test():
    rng = np.random.default_rng(0)
    with pytest.raises(InvalidValueError):
        spearman_permutation_test([1, 2], [1, 2], rng)
    with pytest.raises(InvalidValueError):
        spearman_permutation_test([1, 2, 3], [1, 2], rng)
    with pytest.raises(InvalidValueError):
        spearman_permutation_test([1, 2, np.nan], [1, 2, 3], rng)
    flat = spearman_permutation_test([1, 2, 3], [5, 5, 5], rng)
    assert np.isnan(flat.rho) and np.isnan(flat.p_value)


# ---------------------------------------------------------------- the rules' own risks and Holm (risks section)
def test_own_risk_and_holm_family_of_the_risk_table():
    import pandas as pd

    from cr2.evaluation.own_risk import own_risk, vs_alpha

    assert [own_risk(r) for r in ("crc", "ltt", "crc-oracle", "ltt-avoidable")] == [
        "teacher_risk", "teacher_risk", "oracle_risk", "avoidable_risk"]
    rr = pd.DataFrame({"method": ["cr2", "cr2-crc-oracle"], "rule": ["crc", "crc-oracle"], "lam": [0.5, 0.5]})
    # the stored tests of each risk against α over all rows (metric '<risk>_all_minus_alpha', p of its own resamples)
    tests = pd.DataFrame({"method": ["cr2", "cr2", "cr2-crc-oracle"], "lam": [0.5, 0.5, 0.5], "alpha": [0.01] * 3,
                          "metric": ["risk_all_minus_alpha", "oracle_risk_all_minus_alpha", "oracle_risk_all_minus_alpha"],
                          "estimate": [-0.006, 0.02, 0.01], "lower": [-0.008, 0.01, -0.001], "upper": [-0.004, 0.03, 0.021],
                          "p_value": [0.0, 0.0, 0.08]})
    from cr2.evaluation.families import annotate, interval_family

    tests = pd.DataFrame(annotate(tests.to_dict("records"), interval_family))  # stored as the intervals stage does
    v = vs_alpha(rr, 0.01, tests)
    assert v["own"].tolist() == ["teacher_risk", "oracle_risk"]
    assert v["d"].tolist() == pytest.approx([-0.006, 0.01])  # each rule's own risk: crc's teacher, crc-oracle's oracle
    # each p_holm is its stored family's (the method at α: every λ × risk), never the table's rows re-corrected
    assert v["p"].tolist() == [0.0, 0.08] and v["p_holm"].tolist() == pytest.approx([0.0, 0.08])
    assert v["family_size"].tolist() == [2, 1]
    with pytest.raises(ValueError, match="schema < 9"):
        vs_alpha(rr, 0.01, tests.assign(p_holm=np.nan))
    with pytest.raises(ValueError, match="minus_alpha"):
        vs_alpha(rr, 0.01, tests.iloc[:2])


# ---------------------------------------------------------------- premise studies: recorded settings → command
def test_premise_study_settings_are_recorded_once_and_name_their_command(tmp_path):
    import pandas as pd

    from cr2_cli.resultsdoc.core import Doc
    from cr2.studies.premise_settings import command, mode
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.premise import premise_studies, write_premise_study

    study = {"study_id": "premise-x", "label_source": "measured-mmlu-pro-v1", "config": "configs/mmlu-pro-measured.yaml",
             "speeds": [0.5, 1, 2, 4, 8], "channels": ["default", "premise-far", "premise-cell-edge",
                                                       "premise-beyond-edge"],
             "n_resamples": 1000, "seed": 0, "retrain_from": "base", "retrain_epochs": 4, "base_run": "eval-1"}
    with Warehouse(tmp_path) as wh:
        write_premise_study(wh, study)
        write_premise_study(wh, {**study, "base_run": "eval-2"})  # a study id covers its settings: first row kept
        cell = {"study_id": "premise-x", "speed_factor": 1.0, "channel": "default", "dist_id": "d", "label_source":
                study["label_source"], "mean_distance_m": 90.0, "cost_ratio_est": 1.3, "cost_ratio_realised": 1.2,
                "device_dearer_share_est": 0.5, "n_test": 10, "n_evaluable": 9, "n_resamples": 1000, "alpha": 0.01,
                "cell_key": "k", "cell_seconds": 2.0, "meta": "{}", "created_at": pd.Timestamp("2026-01-01")}
        wh.insert_df("premise_cells", pd.DataFrame([cell]))
        st = premise_studies(wh)
    assert len(st) == 1 and st["base_run"].iloc[0] == "eval-1" and json.loads(st["speeds"].iloc[0])[0] == 0.5
    row = next(st.itertuples())
    assert mode(row) == "fine-tuned from the base fits (4 epochs)"
    assert command("mmlu-pro", None, row) == ("cr2 study premise -c configs/mmlu-pro-measured.yaml --home var/mmlu-pro "
                                              "--speeds 0.5,1,2,4,8 --retrain-from base --retrain-epochs 4")
    scratch = row._replace(retrain_from="scratch", retrain_epochs=None, config=None,
                           speeds=json.dumps([0.25, 0.5, 1, 2, 4, 8]))
    assert command("default", None, scratch) == "cr2 study premise --home var"
    unknown = SimpleNamespace(**{**row._asdict(), "retrain_from": None})
    assert command("default", None, unknown) is None and mode(unknown) == "retraining not recorded"
    assert Doc({"default": tmp_path}).has("default")


# ---------------------------------------------------------------- (a) both sections render on the slice
@pytest.mark.slow
def test_risks_and_premise_render_on_the_slice_with_every_word_backed(pipeline_slice):
    from cr2_cli.resultsdoc import render_sections
    from cr2_cli.resultsdoc.core import Doc, unbacked_words

    doc = Doc({"default": Path(pipeline_slice["home"])})
    page = render_sections(doc, ("risks", "premise"), marked=True)
    assert unbacked_words(page) == []
    assert "## What α bounds" in page and "## When CR² pays" in page
    assert "SIMULATED" in page  # the slice's labels are simulated, and the page says so
    assert "⸢" in page  # the per-rule table carries verdict words, each from a verdict function
    assert "_Not in this checkout" in page  # no MMLU-Pro warehouse, no premise study, no validity run: said, not crashed
    assert page == render_sections(doc, ("risks", "premise"), marked=True)  # deterministic


# ---------------------------------------------------------------- (c) a validity run is stored and read back
@pytest.mark.slow
def test_a_guarantees_run_is_stored_and_the_page_reads_it(pipeline_slice, tmp_path):
    from typer.testing import CliRunner

    from tests.conftest import copy_of
    from cr2_cli.main import app
    from cr2_cli.resultsdoc import render_sections
    from cr2_cli.resultsdoc.core import Doc, unbacked_words
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import guarantee_cells, guarantee_runs

    home = copy_of(Path(pipeline_slice["home"]), tmp_path / "home")
    res = CliRunner().invoke(app, ["guarantees", "--resplits", "12", "-c", str(pipeline_slice["cfg"]),
                                   "--home", str(home)])
    assert res.exit_code == 0, res.output
    with Warehouse(home, read_only=True) as wh:
        runs = guarantee_runs(wh)
        assert len(runs) == 1 and int(runs["n_resplits"].iloc[0]) == 12
        run_id = str(runs["run_id"].iloc[0])
        cells = guarantee_cells(wh, run_id)
    assert {"ltt", "mondrian-crc", "ltt-oracle"} <= set(cells["rule"]) and (cells["bound"].notna()).all()
    assert "crc_mean_risk" not in set(cells["check_name"])  # the certify stage's re-splits are their one source
    page = render_sections(Doc({"default": home}), ("risks",), marked=True)
    assert f"run `{run_id}`, 12 re-splits" in page and unbacked_words(page) == []
    assert "certified routers, SIMULATED labels" in page and "⸢no violation detected⸣" in page
    seed = int(runs["seed"].iloc[0])  # a fresh stream, stored: the page names the command that replays this very run
    assert f"cr2 guarantees --resplits 12 --seed {seed} --home var" in page
