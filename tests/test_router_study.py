"""The router study's pure parts (cr2.studies.routers, cr2.report.router_study): the pre-registration, the unit
configs, Holm per candidate's family, the words, the headroom share and the success criterion."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cr2.core.errors import ConfigError
from cr2.evaluation.statistics import Verdict, holm_adjust
from cr2.studies.routers import (FAILS, SUCCEEDS, alpha_of, load_router_study, study_config_data, study_rows,
                                 study_summary)

SHIPPED = Path(__file__).resolve().parents[1] / "configs" / "studies" / "router-study.yaml"
ROUTERS = ["knn", "mlp", "cr2", "knn-distance", "knn-isotonic", "knn-mlp-mean", "knn-stack", "gate-avoidable"]


def small_study(tmp_path, candidates=("knn-distance", "knn-isotonic", "knn-mlp-mean"), **edit):
    text = ["candidates:"] + [f"  - {{name: {c}, what: x}}" for c in candidates]
    text += ["reference: knn", "pools: {rule: r.yaml, config: c.yaml}", "scenarios: [default]",
             f"guarantee: {{rule: {edit.get('rule', 'crc-avoidable')}, alpha: grids.default_alpha}}"]
    p = tmp_path / "study.yaml"
    p.write_text("\n".join(text) + "\n")
    return load_router_study(p, "d1", routers=ROUTERS)


def test_the_shipped_pre_registration_loads_against_the_catalogue():
    study = load_router_study(SHIPPED, "x")
    assert study.names == ["gate-avoidable", "knn-stack", "knn-isotonic", "knn-distance", "knn-mlp-mean"]
    assert study.reference == "knn" and study.rule == "crc-avoidable" and study.alpha_key == "grids.default_alpha"
    assert study.subject("knn-stack") == "knn-stack@crc-avoidable" and study.other == "knn@crc-avoidable"
    assert study.scenarios == ("mmlu-pro", "zeroeval-qwen", "zeroeval-gemma", "default")
    assert study.min_cheaper(13) == 7


def test_a_pre_registration_out_of_bounds_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="2 candidates"):
        small_study(tmp_path, candidates=("knn-distance", "knn-isotonic"))
    with pytest.raises(ConfigError, match="not certifiable"):
        small_study(tmp_path, candidates=("knn-distance", "knn-isotonic", "no-such-router"))
    with pytest.raises(ConfigError, match="distinct"):
        small_study(tmp_path, candidates=("knn-distance", "knn-isotonic", "knn"))
    with pytest.raises(ConfigError, match="calibrated rule"):
        small_study(tmp_path, rule="crc-nonsense")
    bad = tmp_path / "bad.yaml"
    bad.write_text("candidates: [{name: knn-distance}]\n")
    with pytest.raises(ConfigError, match="lacks"):
        load_router_study(bad, "d", routers=ROUTERS)


def test_a_units_config_fits_and_certifies_the_candidates_at_its_own_alpha():
    from cr2.config import load_config

    study = load_router_study(SHIPPED, "x", routers=ROUTERS)
    data = load_config(None).model_dump(mode="json")
    data["grids"]["default_alpha"] = 0.03  # not among certify.alphas: it is added
    out = study_config_data(data, study)
    assert out["baselines"]["routers"][: len(data["baselines"]["routers"])] == data["baselines"]["routers"]
    assert [r for r in out["baselines"]["routers"] if r in study.names] == study.names
    assert out["baselines"]["params"]["gate-avoidable"]["gate"] == data["gate"]
    assert 0.03 in out["certify"]["alphas"] and "crc-avoidable" in out["certify"]["rules"]
    assert out["evaluation"] == data["evaluation"]
    assert data["baselines"]["routers"] == load_config(None).baselines.routers  # the input is not changed
    again = study_config_data(out, study)  # idempotent: nothing fitted twice
    assert again["baselines"]["routers"] == out["baselines"]["routers"]
    with pytest.raises(ConfigError, match="not a field"):
        alpha_of(data, "grids.nope")


def _saving(study, table):
    rows = [{"kind": k, "unit": u, "subject": study.subject(c), "other": study.other, "estimate": e, "lower": lo,
             "upper": hi, "p_value": p, "n_resamples": 10_000} for k, u, c, e, lo, hi, p in table]
    return pd.DataFrame(rows)


def test_rows_adjust_each_candidates_family_apart_and_keep_missing_units(tmp_path):
    study = small_study(tmp_path)
    a, b = "knn-distance", "knn-isotonic"
    sav = _saving(study, [("pool", "p1", a, 5.0, 1.0, 9.0, 0.004), ("pool", "p2", a, 4.0, 0.5, 8.0, 0.02),
                          ("pool", "p3", a, -1.0, -3.0, 1.0, 0.4), ("scenario", "default", a, 3.0, 0.2, 6.0, 0.03),
                          ("pool", "p1", b, -6.0, -9.0, -2.0, 0.001), ("pool", "p2", b, 1.0, -1.0, 3.0, 0.3)])
    # a row of another comparison (against MLP) never enters
    sav = pd.concat([sav, sav.iloc[:1].assign(other="mlp@crc-avoidable", p_value=1e-9)], ignore_index=True)
    room = pd.DataFrame({"kind": ["pool"] * 3 + ["scenario"], "unit": ["p1", "p2", "p3", "default"],
                         "estimate": [50.0, 40.0, -1.0, 30.0]})
    rows = study_rows(sav, room, study)
    assert len(rows) == 3 * 4  # every candidate × every unit, missing comparisons kept
    ra = rows[(rows["candidate"] == a) & (rows["kind"] == "pool")].set_index("unit")
    np.testing.assert_allclose(ra["p_holm"], holm_adjust(np.array([0.004, 0.02, 0.4])))
    assert [str(w) for w in ra["verdict"]] == ["cheaper", "cheaper", "no difference detected"]
    assert all(isinstance(w, Verdict) for w in ra["verdict"])
    # the scenario is its own family of one: its p is its Holm p
    sc = rows[(rows["candidate"] == a) & (rows["kind"] == "scenario")].iloc[0]
    assert sc["p_holm"] == pytest.approx(0.03) and str(sc["verdict"]) == "cheaper"
    assert ra.loc["p1", "headroom_share"] == pytest.approx(0.1) and np.isnan(ra.loc["p3", "headroom_share"])
    rb = rows[(rows["candidate"] == b) & (rows["kind"] == "pool")].set_index("unit")
    assert str(rb.loc["p1", "verdict"]) == "dearer" and rb.loc["p3", "verdict"] is None
    np.testing.assert_allclose(rb.loc[["p1", "p2"], "p_holm"], holm_adjust(np.array([0.001, 0.3])))
    missing = rows[rows["candidate"] == "knn-mlp-mean"]
    assert missing["estimate"].isna().all() and missing["verdict"].isna().all()


def test_the_interval_alone_gives_no_word_when_holm_does_not_pass(tmp_path):
    study = small_study(tmp_path)
    c = "knn-distance"
    # three pools whose intervals exclude 0 but whose p do not survive Holm over the family
    sav = _saving(study, [("pool", f"p{i}", c, 2.0, 0.1, 4.0, 0.04) for i in range(3)])
    rows = study_rows(sav, pd.DataFrame(columns=["kind", "unit", "estimate"]), study)
    np.testing.assert_allclose(rows.loc[rows["candidate"] == c, "p_holm"], 0.12)
    assert {str(w) for w in rows.loc[rows["candidate"] == c, "verdict"]} == {"no difference detected"}


def test_success_needs_half_the_pools_cheaper_none_dearer_and_none_missing(tmp_path):
    study = small_study(tmp_path)
    a, b, c = "knn-distance", "knn-isotonic", "knn-mlp-mean"
    table = [("pool", f"p{i}", a, 5.0, 1.0, 9.0, 1e-4) for i in range(2)] + [("pool", "p2", a, 0.0, -1.0, 1.0, 0.9)]
    table += [("pool", f"p{i}", b, 5.0, 1.0, 9.0, 1e-4) for i in range(2)] + [("pool", "p2", b, -5.0, -9, -1, 1e-4)]
    table += [("pool", f"p{i}", c, 5.0, 1.0, 9.0, 1e-4) for i in range(2)]  # p2 missing
    rows = study_rows(_saving(study, table), pd.DataFrame(columns=["kind", "unit", "estimate"]), study)
    s = study_summary(rows, study).set_index("candidate")
    assert s.loc[a, ["cheaper", "dearer", "no_difference", "missing"]].tolist() == [2, 0, 1, 0]
    assert bool(s.loc[a, "success"]) and str(s.loc[a, "outcome"]) == SUCCEEDS
    assert s.loc[b, "dearer"] == 1 and not s.loc[b, "success"] and str(s.loc[b, "outcome"]) == FAILS
    assert s.loc[c, "missing"] == 1 and not s.loc[c, "success"]
    assert isinstance(s.loc[a, "outcome"], Verdict)


def test_the_tables_print_every_candidate_and_unit(tmp_path):
    from cr2.report.router_study import summary_table, unit_table

    study = small_study(tmp_path)
    sav = _saving(study, [("pool", "p1", "knn-distance", 5.0, 1.0, 9.0, 0.004)])
    rows = study_rows(sav, pd.DataFrame({"kind": ["pool"], "unit": ["p1"], "estimate": [50.0]}), study)
    text = unit_table(rows, "pool")
    assert "+5.0 [+1.0, +9.0]" in text and "0.10" in text and text.count("\n") >= 5
    zero = study_rows(_saving(study, [("pool", "p1", "knn-distance", -3.0, -5.0, -0.0, 0.0)]),
                      pd.DataFrame(columns=["kind", "unit", "estimate"]), study)
    assert "< 0.0002" in unit_table(zero, "pool") and "-0.0" not in unit_table(zero, "pool")  # p moves in 2 / B
    assert "no scenario" in unit_table(rows, "scenario")
    summary = summary_table(study_summary(rows, study), {"knn-distance": 2_000_000})
    assert "does not meet the success criterion" in summary and "| 2.000 M |" in summary


def test_the_results_page_section_says_how_to_build_what_is_missing(tmp_path):
    from cr2_cli.resultsdoc import render_sections
    from cr2_cli.resultsdoc.core import Doc

    text = render_sections(Doc({"pools": tmp_path / "none"}), ("router_study",))
    assert text.startswith("## The router study") and "make study-pools" in text
    (tmp_path / "empty").mkdir()
    from cr2_warehouse.db import Warehouse

    with Warehouse(tmp_path / "empty"):
        pass
    text = render_sections(Doc({"pools": tmp_path / "empty"}), ("router_study",))
    assert "no router study is stored" in text and "cr2 study routers" in text
