"""The generated sections intervals, default_scenario and measured (cr2_cli/resultsdoc): they render on the test slice
(no measured warehouse, no seed study) with every verdict word backed, their statistics are right on hand-computable
numbers, and a typed verdict word is refused."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cr2.evaluation.statistics import Verdict, holm_of_stored, seed_t_interval, t_interval
from cr2_cli.resultsdoc import render_sections
from cr2_cli.resultsdoc.core import OPEN, Doc, unbacked_words

SECTIONS = ("intervals", "default_scenario", "measured")


# ---------------------------------------------------------------- statistics on hand-computable numbers
def test_t_interval_over_seeds_by_hand():
    # values 1, 2, 3: mean 2, sd 1, se 1/√3; t_{0.975, 2} = 4.302653 → half-width 2.484138; t = 2√3, p = 0.07418
    s = seed_t_interval(np.array([1.0, 2.0, 3.0, np.nan]))
    assert s.n == 3 and s.mean == pytest.approx(2.0) and s.sd == pytest.approx(1.0)
    assert s.lower == pytest.approx(2.0 - 2.484138, abs=1e-5) and s.upper == pytest.approx(2.0 + 2.484138, abs=1e-5)
    assert s.p_value == pytest.approx(0.07418, abs=1e-4)
    # the same from the summary v_seed_spread stores
    assert t_interval(2.0, 1.0, 3) == s
    # one seed: no interval, no p
    one = t_interval(2.0, float("nan"), 1)
    assert np.isnan(one.lower) and np.isnan(one.p_value)


def test_holm_over_stored_p_values_by_hand():
    ph = holm_of_stored([0.05, 1.0, 0.0027, None, np.nan])
    # Holm over the three defined tests: 3 × 0.0027, then max(that, 2 × 0.05), then max(…, 1 × 1)
    assert ph[2] == pytest.approx(3 * 0.0027) and ph[0] == pytest.approx(0.1) and ph[1] == pytest.approx(1.0)
    assert np.isnan(ph[3]) and np.isnan(ph[4])


def test_interval_family_words_are_the_stored_ones_of_holm_over_the_stored_family():
    from cr2.evaluation.families import annotate
    from cr2.report.cells import counts_cell as counts
    from cr2.report.resultsdoc.scenario import holm_line, interval_family

    doc = Doc({})
    rows = [{"method": m, "metric": "mean_saving_vs_knn_pct", "estimate": e, "lower": lo, "upper": hi, "p_value": p}
            for m, e, lo, hi, p in (("cr2", -1.96, -3.92, -0.01, 0.04), ("mlp", 3.0, 3.0 - 1.96, 3.0 + 1.96, 0.001),
                                    ("knn", 0.5, -1.0, 2.0, 0.6))]
    d = pd.DataFrame(annotate(rows, lambda r: "mean-saving-vs-knn"))
    f = interval_family(doc, d, "estimate", "lower", "upper")
    # cr2's interval excludes 0 but its stored Holm p (2 × 0.04) does not: no direction; mlp 3 × 0.001 keeps its word
    assert list(f["verdict"]) == ["no difference detected", "cheaper", "no difference detected"]
    assert (f["verdict"] == f["verdict_holm"]).all() and counts(f["verdict"]) == "1 / 0 / 2"
    assert list(f["p_holm"]) == pytest.approx([0.08, 0.003, 0.6])
    line = holm_line(f, lambda r: r.method, "the test family")
    assert "Holm over the 3 tests of the test family" in line and not unbacked_words(line)
    # the page corrects nothing itself: a table of fewer rows keeps the stored family's words and size
    part = interval_family(doc, d.iloc[:2], "estimate", "lower", "upper")
    assert list(part["p_holm"]) == pytest.approx([0.08, 0.003])
    assert "Holm over the 3 tests" in holm_line(part, lambda r: r.method, "the test family")
    with pytest.raises(ValueError, match="schema < 9"):
        interval_family(doc, d.drop(columns="p_holm"), "estimate", "lower", "upper")
    with pytest.raises(ValueError, match="edited by hand"):
        interval_family(doc, d.assign(verdict="cheaper"), "estimate", "lower", "upper")


def test_doc_word_refuses_a_typed_word_and_takes_a_computed_one():
    from cr2.evaluation.statistics import CHEAPER, saving_verdict

    doc = Doc({})
    for typed in ("cheaper", CHEAPER, "no difference detected"):
        with pytest.raises(TypeError, match="verdict function"):
            doc.word(typed)
    assert OPEN in doc.word(saving_verdict(1.0, 2.0)) and isinstance(saving_verdict(1.0, 2.0), Verdict)
    assert doc.word(None) == "–"


# ---------------------------------------------------------------- a typed verdict word is refused
# ---------------------------------------------------------------- the sections on the test slice
@pytest.mark.slow
@pytest.mark.parametrize("section", SECTIONS)
def test_section_renders_on_the_slice(pipeline_slice, section):
    doc = Doc({"default": Path(pipeline_slice["home"])})
    page = render_sections(doc, (section,), marked=True)
    assert unbacked_words(page) == []
    assert page.startswith("## ")
    if section == "measured":  # no MMLU-Pro warehouse on the slice
        assert "_Not in this checkout" in page
    else:
        assert "SIMULATED" in page and "make results-doc" in page


@pytest.mark.slow
def test_sections_together_on_the_slice(pipeline_slice):
    doc = Doc({"default": Path(pipeline_slice["home"])})
    page = render_sections(doc, SECTIONS, marked=True)
    assert unbacked_words(page) == []
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import newest_eval_run

    with Warehouse(pipeline_slice["home"], read_only=True) as wh:
        run_id = newest_eval_run(wh)
    assert run_id in page
    assert "every interval on all" in page and "resamples kept" not in page  # no interval drops a resample
    assert "a seed study" in page  # the slice has none: said, not crashed
    # deterministic: the same warehouse renders the same page
    assert render_sections(doc, SECTIONS, marked=True) == page
