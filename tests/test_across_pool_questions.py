"""cr2.studies.pools.across_pool_questions: the pools' stored equal-risk rows grouped per (question, rule) of a
question still asked, each group's comparisons across pools."""
from __future__ import annotations

import pandas as pd

from cr2.evaluation.equal_risk import QUESTIONS
from cr2.evaluation.equal_risk import side_rule
from cr2.studies.pools import across_pool_questions


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
    assert side_rule("knn@uncertified") == "–" and side_rule("cr2") == "–" and side_rule("knn@crc-oracle") == "crc-oracle"


def test_seed_spread_is_per_comparison_over_finite_seeds_of_questions_still_asked():
    import numpy as np

    from cr2.evaluation.equal_risk import seed_spread

    d = pd.DataFrame([{"metric": f"equal-risk:{q}", "method": m, "alpha": a, "value": v}
                      for q, m, a, vals in ((QUESTIONS[0], "cr2@uncertified vs knn@uncertified", np.nan, (1.0, 3.0)),
                                            (QUESTIONS[-1], "cr2@crc vs knn@crc", 0.1, (2.0, np.nan, 4.0, 6.0)),
                                            (QUESTIONS[-1], "cr2@crc vs mlp@crc", 0.1, (2.0, np.nan)),
                                            ("pairwise", "knn@crc vs mlp@crc", 0.1, (1.0, 2.0)))
                      for v in vals])
    s = seed_spread(d)
    assert list(s["comparison"]) == ["cr2@crc vs knn@crc", "cr2@uncertified vs knn@uncertified"]  # sorted by metric
    assert list(s["rule"]) == ["crc", "–"] and list(s["alpha_key"]) == [0.1, -1.0]
    assert list(s["n_seeds"]) == [3, 2] and list(s["seed_mean"]) == [4.0, 2.0] and list(s["seed_sd"]) == [2.0, 2 ** 0.5]
