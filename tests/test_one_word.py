"""One test, one word, on every surface: each stored test carries the word of its Holm p over its stored family
(cr2.evaluation.families), the SQL views' `verdict` is that word, and the results page and `cr2 results` print it —
never a word corrected over another set."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cr2.evaluation.families import change_verdict
from cr2.evaluation.statistics import holm_adjust, saving_verdict

pytestmark = pytest.mark.slow


def _tests(wh) -> pd.DataFrame:
    """Every stored test of the warehouse (intervals and equal_risk rows with a family)."""
    iv = wh.df("SELECT 'intervals' AS source, run_id, family, family_size, metric, lower, upper, p_value, p_holm, "
               "verdict FROM intervals WHERE family IS NOT NULL")
    er = wh.df("SELECT 'equal_risk' AS source, run_id, family, family_size, metric, lower, upper, p_value, p_holm, "
               "verdict FROM equal_risk WHERE family IS NOT NULL AND question <> 'deploy'")
    return pd.concat([iv, er], ignore_index=True)


def test_every_stored_test_carries_the_word_of_its_holm_p_over_its_stored_family(pipeline_slice):
    from cr2_warehouse.db import Warehouse

    with Warehouse(pipeline_slice["home"], read_only=True) as wh:
        t = _tests(wh)
    assert {"saving-vs-knn", "mean-saving-vs-knn"} <= set(t["family"])
    assert t["family"].str.startswith("risk-vs-alpha/").any() and t["family"].str.endswith("/per-target").any()
    for (source, run, fam), g in t.groupby(["source", "run_id", "family"]):
        ok = g[g["p_value"].notna()]
        assert (ok["family_size"] == len(ok)).all(), (source, fam)
        assert ok["p_holm"].to_numpy() == pytest.approx(holm_adjust(ok["p_value"].to_numpy(float)), abs=1e-12)
        word = change_verdict if ok["metric"].iloc[0].endswith("_minus_alpha") else saving_verdict
        assert list(ok["verdict"]) == [word(lo, hi, q) for lo, hi, q in zip(ok["lower"], ok["upper"], ok["p_holm"])]


def test_the_views_verdict_is_the_stored_word_and_the_uncorrected_one_is_named_so(pipeline_slice):
    from cr2_warehouse.db import Warehouse

    with Warehouse(pipeline_slice["home"], read_only=True) as wh:
        fixed = wh.df("SELECT f.verdict AS shown, i.verdict AS stored, f.verdict_uncorrected, f.saving_lower, "
                      "f.saving_upper FROM v_fixed_accuracy_ci f JOIN intervals i ON i.run_id = f.run_id AND "
                      "i.method = f.method AND i.metric = 'saving_vs_knn_pct' AND abs(i.target - f.target) < 1e-9")
        mean = wh.df("SELECT m.run_id, m.verdict AS shown, i.verdict AS stored, m.p_holm, m.family_size "
                     "FROM v_mean_saving_ci m "
                     "JOIN intervals i ON i.run_id = m.run_id AND i.method = m.method "
                     "AND i.metric = 'mean_saving_vs_knn_pct'")
    assert len(fixed) and len(mean)
    assert fixed["shown"].fillna("-").equals(fixed["stored"].fillna("-"))
    assert mean["shown"].fillna("-").equals(mean["stored"].fillna("-"))
    tested = mean[mean["p_holm"].notna()]  # KNN against itself is an estimate, in no family
    assert len(tested) == len(mean) - mean["run_id"].nunique()
    assert (tested["family_size"] == tested.groupby("run_id")["p_holm"].transform("count")).all()
    assert list(fixed["verdict_uncorrected"]) == [saving_verdict(lo, hi) for lo, hi in
                                                  zip(fixed["saving_lower"], fixed["saving_upper"])]


@dataclass
class RecordingDoc:
    """Wraps the results page's Doc: every saving or change word a section prints, keyed by its interval's exact
    floats (the identity of a stored test)."""

    homes: dict
    seen: list = field(default_factory=list)

    def __post_init__(self):
        from cr2_cli.resultsdoc.core import Doc

        outer = self

        class _Doc(Doc):
            def saving(self, lower, upper, p_adjusted=None):
                out = super().saving(lower, upper, p_adjusted)
                outer.seen.append(("saving", lower, upper, saving_verdict(lower, upper, p_adjusted)))
                return out

            def compare(self, lower, upper, p_adjusted=None):
                out = super().compare(lower, upper, p_adjusted)
                outer.seen.append(("change", lower, upper, change_verdict(lower, upper, p_adjusted)))
                return out

        self.doc = _Doc({k: Path(v) for k, v in self.homes.items()})


def test_the_results_page_prints_each_stored_test_with_its_stored_word(pipeline_slice):
    """Every word the page's sections print for an interval that is a stored test is that test's stored word: a
    section that corrected a test over another set (a table's rows, pools × methods, the λ it shows) fails here."""
    from cr2_cli.resultsdoc import render_sections
    from cr2_warehouse.db import Warehouse

    rec = RecordingDoc({"default": pipeline_slice["home"]})
    render_sections(rec.doc, ("equal_risk", "intervals", "default_scenario", "risks"))
    with Warehouse(pipeline_slice["home"], read_only=True) as wh:
        t = _tests(wh)
    stored = {}
    for r in t.itertuples():
        stored.setdefault((float(r.lower), float(r.upper)), set()).add(r.verdict)
    matched = 0
    for kind, lo, hi, word in rec.seen:
        key = (float(lo), float(hi))
        if key in stored and np.isfinite(key[0]):
            matched += 1
            assert stored[key] == {word}, (kind, key, word, stored[key])
    assert matched >= 10  # the check reached the page's tables (savings vs KNN, equal-risk cells, risk vs α)


def test_cr2_results_prints_the_stored_words_with_their_holm_p(pipeline_slice):
    from cr2_cli.results import results_markdown
    from cr2_warehouse.db import Warehouse

    text = results_markdown(pipeline_slice["home"])
    with Warehouse(pipeline_slice["home"], read_only=True) as wh:
        mean = wh.df("SELECT method, verdict, p_holm, family_size FROM v_mean_saving_ci")
    block = text.split("**Mean saving vs KNN over the validation target grid", 1)[1].split("\n\n**", 1)[0]
    lines = [ln for ln in block.splitlines() if ln.startswith("|") and "---" not in ln][1:]
    assert len(lines) == len(mean)
    assert "p, Holm (family size)" in block
    size = int(mean["family_size"].dropna().iloc[0])
    for ln in lines:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        if cells[-1] == "–":  # KNN against itself: no test, no word
            assert cells[-2] == "—"
            continue
        assert cells[-1] in set(mean["verdict"].dropna()) and f"({size})" in cells[-2]
