"""cr2.studies.premise.premise_cells (a stored premise study read back, one row per cell) and the premise map's
tables (cr2.report.premise_map): signs, order, the stored p required, 'not reached', words through `word`."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cr2.evaluation.fixed_accuracy import PAPER_TARGETS
from cr2.report.premise_map import PremiseRecalibration, PremiseSavings
from cr2.studies.premise import premise_cells


def _view(p_value: float = 0.01) -> pd.DataFrame:
    rows = []
    for f, ch, dist, ratio in ((2.0, "default", 50.0, 0.8), (0.5, "far", 300.0, 1.6)):
        for method, ref, est in (("cr2-retrain", "knn", 4.0), ("cr2-retrain", "best-single", np.nan),
                                 ("cr2-recal", "cr2-retrain", -3.0)):
            for target in (None, *PAPER_TARGETS):
                rows.append({"speed_factor": f, "channel": ch, "mean_distance_m": dist, "cost_ratio_est": ratio,
                             "n_evaluable": 100, "n_resamples": 1000, "alpha": 0.1, "method": method, "reference": ref,
                             "mean_over_targets": target is None, "target": target, "saving_pct": est,
                             "saving_lower_pct": est - 2.0, "saving_upper_pct": est + 1.0, "p_value": p_value,
                             "p_holm": 0.02, "risk_max": 0.05 if method == "cr2-retrain" else np.nan, "risk_mean": 0.04})
    return pd.DataFrame(rows)


def test_cells_are_one_row_each_in_cost_ratio_order_with_the_loss_signed():
    cs = premise_cells(_view())
    assert list(cs["channel"]) == ["default", "far"] and list(cs["cost_ratio"]) == [0.8, 1.6]
    c = cs.iloc[0]
    assert (c["cr2-retrain|knn"], c["cr2-retrain|knn|lo"], c["cr2-retrain|knn|hi"]) == (4.0, 2.0, 5.0)
    # re-calibration's saving over retraining −3 [−5, −2] is a loss of +3 [+2, +5]
    assert (c["cr2-recal|cr2-retrain"], c["cr2-recal|cr2-retrain|lo"], c["cr2-recal|cr2-retrain|hi"]) == (3.0, 2.0, 5.0)
    assert np.isnan(c["cr2-retrain|best-single"]) and c["cr2-retrain|knn|holm"] == 0.02
    with pytest.raises(ValueError, match="schema < 8"):
        premise_cells(_view(p_value=np.nan))


def test_the_premise_tables_print_words_through_word_and_no_nan():
    cs = premise_cells(_view())
    s = PremiseSavings(cs, word=lambda v: f"<{v}>")
    assert s.rows[0][:4] == ["0.800", "×2 / default", "+4.0 [+2.0, +5.0]", "<cheaper>"]
    assert s.rows[0][4] == f"{len(PAPER_TARGETS)} / 0 / 0 / 0" and s.rows[0][5:7] == ["not reached", "not reached"]
    r = PremiseRecalibration(cs, word=lambda v: f"<{v}>")
    assert r.rows[0][:5] == ["×0.5", "far", "1.600", "+3.0 [+2.0, +5.0]", "<larger>"]
    assert r.rows[0][5] == "0.0500 / –"  # a missing risk is '–', never 'nan'


def test_the_command_prints_the_same_cells_in_a_terminal():
    import io

    from rich.console import Console

    from cr2.report.premise_map import PremiseMap

    t = PremiseMap(premise_cells(_view()), {(2.0, "default"): True})
    assert t.rows[0] == ["×2", "default", "0.800", "+4.0 [+2.0, +5.0]", "+3.0 [+2.0, +5.0]", "yes"]
    out = io.StringIO()
    Console(file=out, width=200).print(t.rich("premise map", justify="right"))
    assert "+4.0 [+2.0, +5.0]" in out.getvalue() and "premise map" in out.getvalue()
