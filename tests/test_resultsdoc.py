"""The generated docs/results.md (cr2_cli.resultsdoc): verdict words only from verdict functions, every section
renders from a run (or says what is missing), the page is written whole or not at all, and --check compares."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from cr2_cli.resultsdoc import SECTIONS, UnbackedVerdict, render_sections
from cr2_cli.resultsdoc.core import Doc, mark, unbacked_words, unmark


def test_a_typed_verdict_word_is_found_and_a_produced_one_is_not():
    assert unbacked_words(f"CR² is {mark('cheaper')} than KNN") == []
    assert len(unbacked_words("CR² is cheaper than KNN")) == 1
    assert len(unbacked_words("No difference detected here; it Holds")) == 2  # a retired word is never backed
    assert len(unbacked_words("violation detected; no violation detected; fails")) == 3
    # quoted definitions, code and HTML comments are not claims; other words that merely contain one are not either
    assert unbacked_words('a saving is called "cheaper" when … `dearer` <!-- larger -->; holdsworth, smaller-scale') == []
    assert unmark(f"x {mark('dearer')} y") == "x dearer y"


def test_doc_words_come_from_the_verdict_functions():
    doc = Doc({})
    assert unmark(doc.saving(0.5, 2.0)) == "cheaper" and unmark(doc.saving(-2.0, -0.5)) == "dearer"
    assert unmark(doc.saving(-1.0, 1.0)) == "no difference detected"
    assert unmark(doc.saving(0.5, 2.0, p_adjusted=0.2)) == "no difference detected"  # Holm does not confirm it
    assert doc.saving(float("nan"), 1.0) == "–"
    assert unmark(doc.test(-3.0, 0.01)) == "dearer" and unmark(doc.test(-3.0, 0.2)) == "no difference detected"
    assert unmark(doc.bound([0.0101], [0.0002], 0.01)) == "no violation detected"  # z = 0.5
    assert unmark(doc.bound([0.02], [0.001], 0.01)) == "violation detected"  # z = 10
    assert unmark(doc.compare(0.1, 0.3)) == "larger" and unmark(doc.compare(-0.3, -0.1)) == "smaller"
    with pytest.raises(TypeError, match="verdict function"):
        doc.word("better")
    from cr2.evaluation.statistics import Verdict

    with pytest.raises(ValueError, match="not a verdict word"):
        doc.word(Verdict("better"))


def test_the_seed_t_interval_is_students():
    from cr2.evaluation.statistics import seed_t_interval

    t = seed_t_interval(np.array([1.0, 2.0, 3.0, np.nan]))
    assert (t.n, t.mean, t.sd) == (3, 2.0, 1.0)
    half = 4.302652729749464 / math.sqrt(3)  # t_{0.975, 2}
    assert t.lower == pytest.approx(2.0 - half) and t.upper == pytest.approx(2.0 + half)
    assert t.p_value == pytest.approx(0.07417990022744853)  # two-sided one-sample t-test, t = 2√3, 2 df
    assert math.isnan(seed_t_interval(np.array([1.0])).lower)
    assert seed_t_interval(np.array([2.0, 2.0])).p_value == 0.0


def test_a_section_that_types_a_verdict_is_refused(monkeypatch):
    import sys
    import types

    fake = types.ModuleType("cr2_cli.resultsdoc.fake")
    fake.render = lambda doc: "## Fake\n\nCR² is dearer than KNN."
    monkeypatch.setitem(sys.modules, "cr2_cli.resultsdoc.fake", fake)
    with pytest.raises(UnbackedVerdict, match="'fake'.*dearer"):
        render_sections(Doc({}), ("fake",))


def test_every_section_says_what_is_missing_without_warehouses(tmp_path):
    page = render_sections(Doc({}, ), SECTIONS, marked=True)
    assert page.startswith("# Results") and "make results-doc" in page
    assert unbacked_words(page) == []


def test_check_mode_and_the_atomic_write(tmp_path, monkeypatch):
    from cr2_cli.resultsdoc import __main__ as cli

    from cr2_cli.resultsdoc.core import HOMES

    out = tmp_path / "results.md"
    args = ["--out", str(out), "--sections", "header"]
    for key in HOMES:  # no warehouse anywhere: the page says what is missing
        args += ["--home", f"{key}={tmp_path / 'none' / key}"]
    assert cli.main(args) == 0 and out.read_text().startswith("# Results")
    assert cli.main([*args, "--check"]) == 0
    out.write_text(out.read_text() + "typed by hand\n")
    assert cli.main([*args, "--check"]) == 1
    before = out.read_text()

    def broken(doc):
        raise RuntimeError("a section failed")

    monkeypatch.setattr("cr2_cli.resultsdoc.header.render", broken)
    with pytest.raises(RuntimeError):
        cli.main(args)
    assert out.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["results.md"]
    with pytest.raises(SystemExit):
        cli.main(["--home", "nonsense"])


@pytest.mark.slow
def test_the_page_renders_from_the_slice_run(pipeline_slice):
    """Every section on the shared slice run (a default scenario only): the equal-risk tables are there, and every
    verdict word on the page came from a verdict function."""
    doc = Doc({"default": Path(pipeline_slice["home"])})
    page = render_sections(doc, SECTIONS, marked=True)
    assert unbacked_words(page) == []
    for part in ("gate quality (both uncertified)", "Calibrated vs default threshold", "Validity over random",
                 "Which router should I deploy?", pipeline_slice["run_id"] if "run_id" in pipeline_slice else "eval-"):
        assert part in page
    assert "\u2e22" in page  # some verdicts were produced
