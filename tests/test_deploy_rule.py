"""The deploy decision rule (cr2.evaluation.deploy): the simplest router no other router is detectably cheaper than,
with the largest upper bound of what a more complex router could save over it."""
import pytest

from cr2.evaluation.deploy import deploy_decision
from cr2.evaluation.statistics import CHEAPER, DEARER, NO_DIFFERENCE

FLOPS = {"knn": 1_000, "mlp": 500, "cr2": 200}


def _row(a, b, verdict, est=0.0, upper=1.0, rule="crc-avoidable", alpha=0.01):
    return {"question": "pairwise", "rule": rule, "alpha": alpha, "method_a": f"{a}@{rule}", "method_b": f"{b}@{rule}",
            "estimate": est, "lower": est - 1.0, "upper": upper, "verdict": verdict}


def _all(words):
    return [_row(a, b, words.get((a, b), NO_DIFFERENCE), *words.get(("est", a, b), (0.0, 1.0)))
            for a in FLOPS for b in FLOPS if a != b]


def test_no_detected_difference_picks_the_simplest_and_bounds_what_the_others_could_save():
    words = {("est", "mlp", "cr2"): (1.5, 4.0), ("est", "knn", "cr2"): (2.0, 6.5)}
    d = deploy_decision(_all(words), FLOPS, "crc-avoidable", 0.01)
    assert d.recommended == "cr2" and d.unbeaten == ("cr2", "knn", "mlp")
    assert (d.bound_router, d.bound_estimate, d.bound_upper) == ("knn", 2.0, 6.5) and d.n_tests == 6


def test_a_router_detectably_beaten_is_never_recommended_whatever_its_complexity():
    d = deploy_decision(_all({("knn", "cr2"): CHEAPER, ("mlp", "cr2"): NO_DIFFERENCE}), FLOPS, "crc-avoidable", 0.01)
    assert d.beaten_by["cr2"] == ("knn",) and d.recommended == "mlp"  # the simplest of those not beaten
    d = deploy_decision(_all({("cr2", "mlp"): DEARER, ("cr2", "knn"): DEARER}), FLOPS, "crc-avoidable", 0.01)
    assert d.recommended == "mlp" and d.bound_router == "knn"


def test_the_simplest_router_of_all_has_no_more_complex_router_to_bound_only_when_it_is_the_most_complex():
    flops = {"knn": 100, "mlp": 500, "cr2": 200}
    d = deploy_decision(_all({}), flops, "crc-avoidable", 0.01)
    assert d.recommended == "knn" and d.bound_router in ("mlp", "cr2")
    d = deploy_decision(_all({("knn", "cr2"): DEARER, ("knn", "mlp"): DEARER}), {"knn": 900, "mlp": 500, "cr2": 200},
                        "crc-avoidable", 0.01)
    assert d.recommended == "cr2"


def test_missing_inputs_are_errors_not_guesses():
    with pytest.raises(Exception, match="no pairwise"):
        deploy_decision(_all({}), FLOPS, "crc", 0.01)
    with pytest.raises(Exception, match="FLOPs"):
        deploy_decision(_all({}), {"knn": 1, "mlp": 2}, "crc-avoidable", 0.01)
