"""The one-shot rule argmax_m p̂_m − λ·c_m over the whole pool, on hand-built cases with the choices written out."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cr2.core.data import RoutingSet
from cr2.core.errors import NotFittedError
from cr2.routers.base import OneShotRouter, one_shot_choice

# (p̂ row, cost row, λ, expected choice, why); values are dyadic so the utilities tie exactly in float64
CASES = [
    ([0.5, 0.75, 0.25, 0.5], [0.25, 0.5, 0.75, 1.0], 0.0, 1, "λ = 0: the most likely correct model"),
    ([0.5, 0.75, 0.875, 1.0], [0.125, 0.5, 0.75, 1.0], 1.0, 0, "u = [.375, .25, .125, 0]: the device model"),
    ([0.25, 0.75, 0.875, 1.0], [0.125, 0.25, 0.5, 1.0], 0.5, 1, "u = [.1875, .625, .625, .5]: tie 1/2 → cheaper 1"),
    ([0.25, 0.75, 0.5, 1.0], [0.25, 0.5, 0.25, 1.0], 1.0, 2, "u = [0, .25, .25, 0]: tie 1/2 → cheaper is 2"),
    ([0.5, 0.75, 0.75, 0.5], [0.5, 0.25, 0.25, 1.0], 1.0, 1, "u = [0, .5, .5, −.5]: tie in utility and cost → lower index"),
    ([0.5, 0.5, 0.5, 0.5], [0.25, 0.25, 0.25, 0.25], 2.0, 0, "everything tied → index 0"),
    ([0.125, 0.875, 0.875, 1.0], [0.125, 0.375, 0.625, 1.0], 20.0, 0, "λ = 20: the cheapest model"),
    ([0.0, 0.0, 0.5, 0.75], [0.25, 0.5, 0.5, 1.0], 0.25, 3, "u = [−.0625, −.125, .375, .5]: the reference model"),
]


@pytest.mark.parametrize("p_hat, cost, lam, expected, why", CASES, ids=[c[-1] for c in CASES])
def test_one_shot_choice_hand_built(p_hat, cost, lam, expected, why):
    chosen = one_shot_choice(np.array([p_hat], dtype=np.float32), np.array([cost], dtype=np.float32), lam)
    assert chosen.tolist() == [expected], why


def test_one_shot_choice_is_vectorised_over_queries():
    p = np.array([c[0] for c in CASES if c[2] == 1.0], dtype=np.float32)
    c = np.array([c[1] for c in CASES if c[2] == 1.0], dtype=np.float32)
    assert one_shot_choice(p, c, 1.0).tolist() == [0, 2, 1]
    assert one_shot_choice(p, c, 1.0).dtype == np.int64


def test_one_shot_choice_rejects_bad_lambda():
    p = np.array([[0.5, 0.5]])
    with pytest.raises(ValueError, match="λ"):
        one_shot_choice(p, p, -1.0)
    with pytest.raises(ValueError, match="one λ"):
        one_shot_choice(p, p, np.array([0.1, 0.2]))


class _FixedProba(OneShotRouter):
    """A stub baseline whose p̂ is given: exercises OneShotRouter.route without any learning."""

    name = "fixed"

    def __init__(self, p_hat: Any = None) -> None:
        self.p_hat = p_hat

    def _fit(self, train, dev):
        self.p_ = np.asarray(self.p_hat, dtype=np.float32)

    def predict_proba(self, batch):
        self._check_batch(batch)
        return self.p_

    def n_params(self):
        return 0

    def flops_per_query(self):
        return 0

    def _state_arrays(self):
        return {"p": self.p_}

    def _set_state(self, arrays, extra):
        self.p_ = arrays["p"]


def _set_from_cases() -> RoutingSet:
    n = len(CASES)
    return RoutingSet(
        query_id=np.array([str(i) for i in range(n)]),
        benchmark=np.array(["mmlu"] * n),
        embedding=np.eye(n, 8, dtype=np.float32),
        correct=np.zeros((n, 4), dtype=bool),
        cost=np.array([c[1] for c in CASES], dtype=np.float32),
        model_ids=("m0", "m1", "m2", "m3"),
    )


def test_route_applies_the_rule_and_marks_local_acceptance():
    batch = _set_from_cases()
    router = _FixedProba([c[0] for c in CASES])
    with pytest.raises(NotFittedError, match="fit"):
        router.route(batch, 1.0)
    assert router.fit(batch, batch) is router
    dec = router.route(batch, 1.0)
    expected = one_shot_choice(router.p_, batch.cost, 1.0)
    assert dec.chosen.tolist() == expected.tolist()
    assert dec.accepted_local.tolist() == (expected == 0).tolist()
    # the λ = 1 rows of CASES, at their positions
    for i, case in enumerate(CASES):
        if case[2] == 1.0:
            assert dec.chosen[i] == case[3], case[-1]


def test_save_load_round_trip(tmp_path):
    batch = _set_from_cases()
    router = _FixedProba([c[0] for c in CASES]).fit(batch, batch)
    fp = router.save(tmp_path / "fixed.npz")
    loaded = _FixedProba.load(tmp_path / "fixed.npz")
    assert loaded.fingerprint() == fp == router.fingerprint()
    assert np.array_equal(loaded.predict_proba(batch), router.predict_proba(batch))
