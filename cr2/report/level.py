"""The level of the equal-risk test (cr2.studies.level, table level_study) as a table object: one row per family
with its A/A rejection rate, the verdict against 5 % and the Monte-Carlo error of the page's p; `cr2 study level` and
docs/results.md render it alike."""
from __future__ import annotations

import pandas as pd

from cr2.report.cells import count_cell, lam_cell, num, pct
from cr2.report.table import Table, Word, plain_word


class LevelTable(Table):
    """The stored level rows (newest_level_study) and their verdicts (cr2.studies.level.stored_level_verdicts, in row
    order); `word` renders each verdict (the results page marks it)."""

    def __init__(self, rows: pd.DataFrame, verdicts: list, word: Word = plain_word):
        cells = []
        for r, verdict in zip(rows.itertuples(index=False), verdicts, strict=True):
            fam = " · ".join([r.question, *([r.rule] if isinstance(r.rule, str) else []),
                              *([f"α = {lam_cell(r.alpha)}"] if r.alpha == r.alpha and r.alpha is not None else [])])
            reps, tests = int(r.n_replicates), int(r.n_tests)
            cells.append([
                fam, str(tests),
                f"{pct(r.rate)} ± {num(r.rate_se, '.1f', 100)} ({int(r.n_rejections)}/{reps})", pct(r.rate_upper),
                f"{num(r.p_above, '.3g')}, {num(r.p_above_holm, '.3g')}",
                word(verdict),
                f"{int(r.n_test_rejections)}/{reps * tests}",
                f"{num(r.p_threshold, '.4f')} ± {num(r.p_se, '.4f')} ({num(r.p_relative_se, '.0f', 100)} %; B = "
                f"{count_cell(r.page_resamples)})",
                num(r.p_tail_resamples, ".0f")])
        super().__init__(["family (question · rule · α)", "m", "A/A rate ± MC SE", "one-sided 95 % upper",
                          "p of rate ≤ 5 %, Holm", "verdict", "tests rejected", "p MC SE at 0.05/m (B)",
                          "resamples behind it"], cells)
