"""cr2.studies.pools.across_pool_questions: the pools' stored equal-risk rows grouped per (question, rule) of a
question still asked, each group's comparisons across pools."""
from __future__ import annotations

import pandas as pd

from cr2.evaluation.equal_risk import QUESTIONS
from cr2.studies.pools import across_pool_questions, equal_risk_rule


def test_rows_group_per_question_and_rule_and_retired_questions_are_dropped():
    q = QUESTIONS[0]
    rows = pd.DataFrame([
        {"question": q, "subject": "cr2@crc", "other": "knn@crc", "estimate": e, "n_resamples": 1000, "verdict": v}
        for e, v in ((1.0, "cheaper"), (2.0, "no difference detected"), (-0.5, None))] + [
        {"question": q, "subject": "cr2-fixed-0.5", "other": "knn@uncertified", "estimate": 0.0, "n_resamples": None,
         "verdict": "no difference detected"},
        {"question": "retired-question", "subject": "a@crc", "other": "b@crc", "estimate": 1.0, "n_resamples": 10,
         "verdict": "cheaper"}])
    got = across_pool_questions(rows)
    assert [(question, rule) for question, rule, _ in got] == [(q, "crc"), (q, "–")]
    (c,) = got[0][2]
    assert (c.side_a, c.side_b, c.pools, c.median, c.min_resamples) == ("cr2@crc", "knn@crc", 3, 1.0, 1000)
    assert (c.cheaper, c.dearer, c.no_difference, c.no_word) == (1, 0, 1, 1)
    assert got[1][2][0].min_resamples is None
    assert equal_risk_rule("knn@uncertified") == "–" and equal_risk_rule("cr2") == "–"
