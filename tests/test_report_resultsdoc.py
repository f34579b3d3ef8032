"""cr2.report.resultsdoc: the sections of docs/results.md render from data alone (no warehouse, no marks), say what
is missing, and print verdict words only through `words`."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd

from cr2.report.resultsdoc import (default_scenario, equal_risk, header, intervals, level, machine, measured, pools,
                                   premise, risks, router_study, simcheck, zeroeval)
from cr2.report.resultsdoc.words import PLAIN, Words, homes, label_kind, missing
from cr2.studies.pools import references
from cr2.studies.premise import COMPARISONS


def test_plain_words_are_the_verdict_functions_words_unmarked():
    assert PLAIN.saving(0.5, 2.0) == "cheaper" and PLAIN.saving(-1.0, 1.0) == "no difference detected"
    assert PLAIN.saving(0.5, 2.0, p_adjusted=0.2) == "no difference detected"
    assert PLAIN.saving(float("nan"), 1.0) == "–"
    assert PLAIN.compare(-0.3, -0.1) == "smaller" and PLAIN.test(3.0, 0.01) == "cheaper"
    assert PLAIN.bound([0.02], [0.001], 0.01) == "violation detected"


def test_missing_names_the_home_and_the_command_that_builds_it():
    home, command = homes()["default"]
    line = missing("default", "the default run")
    assert line.startswith("_Not in this checkout: the default run") and f"`{home}`" in line and f"`{command}`" in line
    assert label_kind("simulated-irt-v2") == "SIMULATED" and label_kind("measured-mmlu-pro-v1") == "MEASURED"


def test_every_section_renders_from_no_stored_data_and_says_what_is_missing():
    nothing = {
        header: header.HeaderData((header.HomeRun("var", "make run", False),)),
        machine: machine.MachineData(None),
        level: level.LevelData({k: level.LevelStudy(None) for k, _, _ in level.SCENARIOS}),
        equal_risk: equal_risk.EqualRiskData(tuple(equal_risk.ScenarioRun(k, n, False)
                                                   for k, n in equal_risk.SCENARIOS)),
        intervals: intervals.IntervalsData({k: None for k in intervals.SCENARIOS}),
        default_scenario: default_scenario.DefaultData(None),
        measured: measured.MeasuredData(None),
        risks: risks.RisksData(tuple(risks.RiskScenario(*s) for s in risks.SCENARIOS)),
        premise: premise.PremiseData(tuple(premise.PremiseScenario(*s, None) for s in premise.SCENARIOS), COMPARISONS),
        pools: pools.PoolsData(references(), pools.PoolLabels(error="OSError: no file"), None),
        router_study: router_study.RouterStudyData(None),
        zeroeval: zeroeval.ZeroEvalData({}, (missing("zeroeval-qwen", "the qwen ladder"),), references()),
        simcheck: simcheck.SimcheckData(None, None, {k: None for k in simcheck.LADDERS}),
    }
    for module, data in nothing.items():
        text = module.render(data)
        assert text.lstrip().startswith("#"), module.__name__
        if module not in (header, machine):
            assert "_Not in this checkout" in text, module.__name__
    assert "not built in this checkout" in header.render(nothing[header])
    assert "Label diagnostics not available: OSError: no file" in pools.render(nothing[pools])


def test_a_section_prints_its_words_through_the_words_it_is_given():
    class Loud(Words):
        def word(self, verdict):
            return f"<{verdict}>"

    rr = pd.DataFrame({"method": ["cr2"], "rule": ["crc"], "lam": [0.5], "teacher_risk": [0.01], "oracle_risk": [0.02],
                       "avoidable_risk": [0.01], "local_rate": [0.5], "d_lower": [-0.01], "d_upper": [-0.002],
                       "p_holm": [0.001]})
    text = risks._read_risks(Loud(), rr)
    assert "`crc` 0.5: <smaller>" in text


def test_premise_shows_the_oldest_study_with_cells_of_each_mode_scratch_first():
    cells = pd.DataFrame({"x": [1]})

    def study(sid, mode, has_cells=True):
        return premise.PremiseStudy(SimpleNamespace(study_id=sid, retrain_from=mode), mode, None,
                                    cells if has_cells else pd.DataFrame())

    studies = (study("a", "base"), study("b", "scratch", False), study("c", "scratch"), study("d", "base"))
    assert [s.row.study_id for s in premise.shown(studies)] == ["c", "a"]
    assert premise.shown(()) == []
