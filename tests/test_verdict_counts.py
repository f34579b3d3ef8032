"""cr2.evaluation.verdict_counts: how a results page counts the verdicts it prints and where intervals lie."""
from __future__ import annotations

import numpy as np

from cr2.evaluation.families import change_verdict
from cr2.evaluation.statistics import saving_verdict
from cr2.evaluation.verdict_counts import NOT_REACHED, cell_verdict_counts, interval_sides, word_counts


def test_word_counts_counts_each_word_and_leaves_none_out():
    c = word_counts([saving_verdict(1.0, 2.0), saving_verdict(-2.0, -1.0), saving_verdict(0.5, 3.0), None])
    assert c["cheaper"] == 2 and c["dearer"] == 1 and c["no difference detected"] == 0 and sum(c.values()) == 3


def test_interval_sides_counts_intervals_wholly_below_and_above_zero():
    # [-3, -1] below, [-1, 1] on 0, [0.5, 2] and [1, 4] above; an interval touching 0 is on neither side
    assert interval_sides([-3.0, -1.0, 0.5, 1.0, 0.0], [-1.0, 1.0, 2.0, 4.0, 2.0]) == (1, 2)
    assert interval_sides([], []) == (0, 0)


def test_cell_verdict_counts_uses_the_family_p_and_counts_unreached_cells():
    est, lo, hi = [2.0, -2.0, np.nan, 1.0], [1.0, -3.0, np.nan, 0.1], [3.0, -1.0, np.nan, 2.0]
    # the last interval excludes 0 but its family-wise p does not confirm it
    holm = [0.001, 0.01, np.nan, 0.2]
    assert cell_verdict_counts(est, lo, hi, holm, saving_verdict) == {"cheaper": 1, "dearer": 1, NOT_REACHED: 1,
                                                                      "no difference detected": 1}
    # uncorrected: every interval's own word; a change reads larger / smaller
    assert cell_verdict_counts(est, lo, hi, None, change_verdict) == {"larger": 2, "smaller": 1, NOT_REACHED: 1}
