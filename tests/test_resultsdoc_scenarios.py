"""The generated sections intervals, default_scenario and measured (cr2_cli/resultsdoc): they render on the test slice
(no measured warehouse, no seed study) with every verdict word backed, their statistics are right on hand-computable
numbers, and a typed verdict word is refused."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cr2.evaluation.statistics import holm_of_intervals, seed_t_interval, t_interval
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


def test_holm_over_stored_intervals_by_hand():
    # an interval [0, 3.92] around 1.96 implies se = 1, so p = 2Φ(−1.96) = 0.05; an interval around 0: p = 1
    p, ph = holm_of_intervals([1.96, 0.0, 3.0, np.nan], [0.0, -1.96, 3.0 - 1.96, 0.0], [3.92, 1.96, 3.0 + 1.96, 1.0])
    assert p[0] == pytest.approx(0.05, abs=1e-4) and p[1] == pytest.approx(1.0)
    assert p[2] == pytest.approx(0.0026998, abs=1e-6) and np.isnan(p[3])
    # Holm over the three defined tests: 3 × 0.0027, then max(that, 2 × 0.05), then max(…, 1 × 1)
    assert ph[2] == pytest.approx(3 * p[2]) and ph[0] == pytest.approx(0.1, abs=2e-4) and ph[1] == pytest.approx(1.0)
    assert np.isnan(ph[3])


def test_interval_family_words_and_holm_changes():
    from cr2_cli.resultsdoc.scenario_stats import counts, holm_line, interval_family

    doc = Doc({})
    d = pd.DataFrame({"method": ["cr2", "mlp", "knn"], "est": [-1.96, 3.0, 0.5],
                      "lo": [-3.92, 3.0 - 1.96, -1.0], "hi": [-0.01, 3.0 + 1.96, 2.0]})
    f = interval_family(doc, d, "est", "lo", "hi")
    assert list(f["verdict"]) == ["dearer", "cheaper", "no difference detected"]
    # cr2's p ≈ 0.05 before Holm, so under Holm it is no direction; mlp's p = 0.0027 × 3 stays below 0.05
    assert list(f["verdict_holm"]) == ["no difference detected", "cheaper", "no difference detected"]
    assert counts(f["verdict"]) == "1 / 1 / 1" and counts(f["verdict_holm"]) == "1 / 0 / 2"
    line = holm_line(f, lambda r: r.method, "the test family")
    assert "1 statement(s) change" in line and line.count(OPEN) == 2 and not unbacked_words(line)


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
    from warehouse.db import Warehouse
    from warehouse.repository import newest_eval_run

    with Warehouse(pipeline_slice["home"], read_only=True) as wh:
        run_id = newest_eval_run(wh)
    assert run_id in page
    assert "resamples kept" in page  # the conditional intervals say how many resamples they kept
    assert "a seed study" in page  # the slice has none: said, not crashed
    # deterministic: the same warehouse renders the same page
    assert render_sections(doc, SECTIONS, marked=True) == page
