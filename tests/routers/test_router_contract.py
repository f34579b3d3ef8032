"""One contract over every catalogued router, CR² included (scikit-learn's check_estimator idea).

fit returns self; a clear NotFittedError before fit; p̂ and Decisions have the right shapes, dtypes and
ranges; fitting twice with the same seed gives identical decisions and fingerprints; learned state
survives save/load; a batch over another pool is refused.
"""
from __future__ import annotations

import numpy as np
import pytest

from cr2.core.data import Router, RoutingSet
from cr2.core.errors import DataValidationError, NotFittedError
from cr2.config import GateSpec, TeacherSpec
from cr2.routers import available_routers, get_router

ROUTERS = tuple(available_routers())

FAST = {  # small settings that keep two fits per router well under a few seconds
    "always": {"model_id": "qwen3-14b"},
    "knn": {"k_grid": (3, 9)},
    "mlp": {"epochs": 3, "seed": 3},
    "embedllm": {"epochs": 3, "seed": 3},
    "llmrank": {"epochs": 2, "seed": 3, "n_clusters": 8},
    "llmrank-bench": {"epochs": 2, "seed": 3, "n_clusters": 8},
    "knn-distance": {"k_grid": (3, 9)},
    "knn-isotonic": {"knn": {"k_grid": (3, 9)}},
    "knn-mlp-mean": {"knn": {"k_grid": (3, 9)}, "mlp": {"epochs": 3, "seed": 3}},
    "knn-stack": {"knn": {"k_grid": (3, 9)}, "epochs": 3, "seed": 3},
    "gate-avoidable": {"gate": {"epochs": 2}, "knn": {"k_grid": (3, 9)}},
    "cr2": {"teacher_spec": TeacherSpec(epochs=2), "gate_spec": GateSpec(epochs=2), "alpha": 0.1,
            "on_demand_calibration": True},
}
CR2_LAMS = (0.05, 0.5, 0.7, 1.0, 20.0)  # the gate is FiLM-conditioned on log λ: λ > 0
TORCH_ROUTERS = ("mlp", "embedllm", "llmrank", "knn-stack")


def _make(name: str, **over):
    return get_router(name, **{**FAST[name], **over})


def _fit(router, train, dev):
    """fit (and, for CR², calibrate on dev: a router that routes needs its threshold table)."""
    out = router.fit(train, dev)
    if router.name == "cr2":
        router.calibrate(dev, CR2_LAMS, [0.05, 0.1], dist_id="test", label_source="test")
    return out


@pytest.fixture(scope="module", params=ROUTERS)
def fitted(request, tiny_splits):
    """(name, router fitted once, (train, dev, test))."""
    train, dev, test = tiny_splits
    router = _make(request.param)
    assert _fit(router, train, dev) is router  # fit returns self
    return request.param, router, tiny_splits


def test_every_catalogued_router_is_covered():
    assert set(FAST) == set(ROUTERS)


@pytest.mark.parametrize("name", ROUTERS)
def test_not_fitted_error_before_fit(name, tiny_splits):
    router = _make(name)
    _, _, test = tiny_splits
    for call in (lambda: router.predict_proba(test), lambda: router.route(test, 1.0), router.fingerprint):
        with pytest.raises(NotFittedError, match="not fitted; call fit"):
            call()


def test_protocol_shapes_and_ranges(fitted):
    name, router, (_, _, test) = fitted
    assert isinstance(router, Router)
    p_hat = router.predict_proba(test)
    assert p_hat.shape == (len(test), test.n_models) and p_hat.dtype == np.float32
    assert np.all((p_hat >= 0) & (p_hat <= 1))
    lo = 0.05 if name == "cr2" else 0.0
    for lam in (lo, 0.5, 20.0):
        dec = router.route(test, lam)
        assert dec.chosen.shape == (len(test),) and dec.chosen.dtype == np.int64
        assert np.all((dec.chosen >= 0) & (dec.chosen < test.n_models))
        assert np.array_equal(dec.accepted_local, dec.chosen == 0)
    if name != "always":  # a one-shot router drifts toward cheap models as λ grows
        cost_at = [test.cost[np.arange(len(test)), router.route(test, lam).chosen].mean() for lam in (lo, 20.0)]
        assert cost_at[1] <= cost_at[0]
    assert isinstance(router.n_params(), int) and router.n_params() >= 0
    assert isinstance(router.flops_per_query(), int) and router.flops_per_query() >= 0
    assert len(router.fingerprint()) == 16


def test_deterministic_under_a_seed(fitted):
    name, router, (train, dev, test) = fitted
    again = _fit(_make(name), train, dev)
    assert again.fingerprint() == router.fingerprint()
    for lam in (0.05 if name == "cr2" else 0.0, 1.0):
        assert np.array_equal(again.route(test, lam).chosen, router.route(test, lam).chosen)
    assert np.array_equal(again.predict_proba(test), router.predict_proba(test))


def _other_channel(data: RoutingSet, seed: int) -> RoutingSet:
    """The same queries and labels under other channel states: every cost-dependent field redrawn (c_ref ≡ 1)."""
    from dataclasses import replace

    rng = np.random.default_rng(seed)
    cost = rng.uniform(0.05, 1.0, data.cost.shape).astype(data.cost.dtype)
    cost[:, -1] = 1.0
    return replace(data, cost=cost, cost_est=None if data.cost_est is None else cost * 1.1,
                   distance_m=rng.uniform(30.0, 150.0, len(data)))


@pytest.mark.parametrize("name", [n for n in ROUTERS if n != "cr2"])
def test_reads_costs_declares_what_fit_reads(name, tiny_splits):
    """A baseline whose catalogue entry says reads_costs: false is reused after a change of channel states
    (tasks/baselines.py), so its fit must not depend on any cost-dependent field; one that reads costs must show it."""
    from cr2.routers import router_entry

    train, dev, _ = tiny_splits
    a = _fit(_make(name), train, dev)
    b = _fit(_make(name), _other_channel(train, 1), _other_channel(dev, 2))
    if router_entry(name).reads_costs:
        assert a.fingerprint() != b.fingerprint(), f"{name} is declared to read costs but its fit ignores them"
    else:
        assert a.fingerprint() == b.fingerprint(), f"{name} says reads_costs: false but its fit depends on the costs"


@pytest.mark.parametrize("name", TORCH_ROUTERS)
def test_seed_matters_and_global_torch_rng_is_untouched(name, tiny_splits):
    import torch

    train, dev, _ = tiny_splits
    before = torch.get_rng_state().clone()
    threads = torch.get_num_threads()
    a = _make(name, seed=1).fit(train, dev)
    b = _make(name, seed=2).fit(train, dev)
    assert torch.equal(torch.get_rng_state(), before)  # no global seeding, no draws from the global RNG
    assert torch.get_num_threads() == threads
    assert a.fingerprint() != b.fingerprint()


def test_save_load_round_trip(fitted, tmp_path):
    name, router, (_, _, test) = fitted
    fp = router.save(tmp_path / f"{name}.npz")
    loaded = type(router).load(tmp_path / f"{name}.npz")
    assert fp == loaded.fingerprint() == router.fingerprint()
    assert np.array_equal(loaded.predict_proba(test), router.predict_proba(test))
    assert np.array_equal(loaded.route(test, 0.7).chosen, router.route(test, 0.7).chosen)


def test_other_pool_is_refused(fitted):
    name, router, (_, _, test) = fitted
    other = RoutingSet(
        query_id=test.query_id,
        benchmark=test.benchmark,
        embedding=test.embedding,
        correct=test.correct,
        cost=test.cost,
        model_ids=("a", "b", "c", "d"),
    )
    with pytest.raises(DataValidationError, match="fitted on pool"):
        router.route(other, 1.0)


def test_cr2_mondrian_table_survives_save_load(tiny_splits, tmp_path):
    """A Mondrian (per-benchmark) threshold table round-trips through CR2Router.save / load, and the loaded
    router routes each query with its own group's threshold."""
    from cr2.crc import GroupedThresholdTable

    train, dev, test = tiny_splits
    router = _make("cr2").fit(train, dev)
    table = router.calibrate(dev, CR2_LAMS, [0.05, 0.1, 0.3], dist_id="test", label_source="test", groups=dev.benchmark,
                             small_group="defer")
    assert isinstance(table, GroupedThresholdTable) and len(table.groups) > 1
    fp = router.save(tmp_path / "cr2-mondrian")
    loaded = type(router).load(tmp_path / "cr2-mondrian")
    back = loaded.threshold_table_
    assert isinstance(back, GroupedThresholdTable) and back.group_by == "benchmark" and back.groups == table.groups
    assert back.to_records() == table.to_records() and back.too_small == table.too_small
    assert fp == loaded.fingerprint() == router.fingerprint()
    lam, alpha = 0.7, 0.3
    dec = loaded.route(test, lam, alpha)  # a per-benchmark table takes the groups from the batch
    expected = loaded.scores(test.embedding, lam).astype(np.float64) >= table.taus_for(test.benchmark, lam, alpha,
                                                                                       router.gate_fingerprint_)
    assert np.array_equal(dec.extra["gate_accept"], expected)
    assert np.array_equal(dec.chosen, router.route(test, lam, alpha).chosen)
