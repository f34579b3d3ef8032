"""The router study's five candidates (configs/studies/router-study.yaml) as catalogued routers.

Every candidate: fits on a small synthetic pool, predicts p̂ of the right shape and range, survives save → load with
identical predictions (and scores), and is certified by cr2.routers.certify under crc-avoidable. Then one property per
candidate: cosine weights reduce to the plain mean when all similarities are equal; isotonic calibration is monotone in
the raw p̂; the KNN–MLP mean is the mean of the two routers fitted alone; the stacking features of the training rows
are leave-one-out; the avoidable-error gate is trained on the real labels and scores −∞ at λ = 0.
"""
from __future__ import annotations

import numpy as np
import pytest

from cr2.core.data import RoutingSet
from cr2.core.errors import ConfigError, DataValidationError
from cr2.routers import get_router, load_router, router_entry
from cr2.routers.certify import CertifiedRouter, local_scores, parse_certified_name, score_fingerprint
from cr2.routers.knn import KNNRouter
from tests.routers.conftest import make_set

CANDIDATES = ("knn-distance", "knn-isotonic", "knn-mlp-mean", "knn-stack", "gate-avoidable")
FAST = {  # small settings: each fit takes well under a second on the sets below
    "knn-distance": {"k_grid": (3, 9, 27)},
    "knn-isotonic": {"knn": {"k_grid": (3, 9, 27)}},
    "knn-mlp-mean": {"knn": {"k_grid": (3, 9, 27)}, "mlp": {"epochs": 3, "seed": 3}},
    "knn-stack": {"knn": {"k_grid": (3, 9, 27)}, "epochs": 3, "seed": 3},
    "gate-avoidable": {"gate": {"epochs": 2}, "knn": {"k_grid": (3, 9, 27)}},
}
LAMS = (0.0, 0.3, 1.0, 3.0)
ALPHAS = (0.05, 0.2, 0.4)  # below the val avoidable-error rate (≈ 0.57): partial acceptance


@pytest.fixture(scope="module")
def sets() -> dict[str, RoutingSet]:
    return {"train": make_set(400, 21), "dev": make_set(120, 22), "val": make_set(300, 23), "test": make_set(200, 24)}


@pytest.fixture(scope="module")
def fitted(sets) -> dict:
    return {name: get_router(name, **FAST[name]).fit(sets["train"], sets["dev"]) for name in CANDIDATES}


# ---------------------------------------------------------------- every candidate
def test_the_candidates_are_catalogued_as_preregistered():
    for name in CANDIDATES:
        entry = router_entry(name)
        assert (entry.kind, entry.learned, entry.predicts_proba) == ("baseline", True, True)
    assert [router_entry(n).reads_costs for n in CANDIDATES] == [False, False, True, True, True]
    from cr2.config import load_config

    assert not set(CANDIDATES) & set(load_config().baselines.routers)  # fitted only where a config lists them


@pytest.mark.parametrize("name", CANDIDATES)
def test_fit_predict_save_load(name, fitted, sets, tmp_path):
    router, test = fitted[name], sets["test"]
    p_hat = router.predict_proba(test)
    assert p_hat.shape == (len(test), test.n_models) and p_hat.dtype == np.float32
    assert np.all((p_hat >= 0) & (p_hat <= 1)) and np.all(np.isfinite(p_hat))
    from cr2.method.complexity import knn_flops

    # every candidate runs the KNN search (at least), and counts it
    assert router.n_params() >= 0 and router.flops_per_query() >= knn_flops(test.embedding.shape[1], len(sets["train"]))

    fp = router.save(tmp_path / "router.npz")
    loaded = load_router(tmp_path / "router.npz")
    assert type(loaded) is type(router) and loaded.fingerprint() == fp == router.fingerprint()
    np.testing.assert_array_equal(loaded.predict_proba(test), p_hat)
    lams = np.array(LAMS)
    np.testing.assert_array_equal(local_scores(loaded, test, lams), local_scores(router, test, lams))
    assert (loaded.n_params(), loaded.flops_per_query()) == (router.n_params(), router.flops_per_query())


@pytest.mark.parametrize("name", CANDIDATES)
def test_certified_under_crc_avoidable_and_routes(name, fitted, sets):
    router, val, test = fitted[name], sets["val"], sets["test"]
    assert parse_certified_name(f"{name}@crc-avoidable").router == name
    cert = CertifiedRouter(router, name, rule="crc-avoidable")
    table = cert.calibrate(val, LAMS, ALPHAS, dist_id="test", label_source="test")
    assert table.gate_fingerprint == score_fingerprint(router)
    lam = 1.0
    accepted = []
    for alpha in ALPHAS:
        dec = cert.route(test, lam, alpha)
        assert dec.chosen.shape == (len(test),) and np.all((dec.chosen >= 0) & (dec.chosen < test.n_models))
        score = local_scores(router, test, lam)
        np.testing.assert_array_equal(dec.accepted_local, score >= table.tau(lam, alpha, cert.fingerprint()))
        assert np.all(dec.chosen[dec.accepted_local] == 0) and np.all(dec.chosen[~dec.accepted_local] != 0)
        accepted.append(int(dec.accepted_local.sum()))
    assert accepted == sorted(accepted) and accepted[0] < accepted[-1]  # a larger α accepts more on the device
    assert 0 < accepted[0] and accepted[-1] < len(test)  # it routes: some queries stay on the device, some are deferred
    if name == "gate-avoidable":  # its score is −∞ at λ = 0: everything deferred there, at every α
        assert not cert.route(test, 0.0, ALPHAS[-1]).accepted_local.any()


# ---------------------------------------------------------------- knn-distance
def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def _with_embedding(data: RoutingSet, embedding: np.ndarray) -> RoutingSet:
    from dataclasses import replace

    return replace(data, embedding=np.asarray(embedding, dtype=np.float32))


def test_knn_distance_with_all_equal_similarities_is_the_plain_mean(sets):
    train, dev = sets["train"], sets["dev"]
    v = _unit(np.random.default_rng(0).standard_normal((1, train.embedding.shape[1])))
    same = _with_embedding(train, np.repeat(v, len(train), axis=0))  # every train query at one point
    rng = np.random.default_rng(1)
    toward = _unit(v + 0.3 * _unit(rng.standard_normal((40, v.shape[1]))))  # cos > 0 with v, all alike
    away = -toward  # cos < 0: every weight is max(cos, 0) = 0, so the plain mean
    for queries in (toward, away):
        batch = _with_embedding(dev.subset(np.arange(40)), queries)
        plain = KNNRouter(k=9).fit(same, dev).predict_proba(batch)
        weighted = KNNRouter(k=9, weights="cosine").fit(same, dev).predict_proba(batch)
        np.testing.assert_allclose(weighted, plain, rtol=0, atol=1e-7)


def _weighted_reference(train: RoutingSet, query: RoutingSet, k: int) -> np.ndarray:
    """p̂ by the definition: the k most cosine-similar train rows, weighted by max(cos, 0)."""
    sims = _unit(query.embedding).astype(np.float64) @ _unit(train.embedding).astype(np.float64).T
    out = []
    for row in sims:
        top = np.argsort(-row, kind="stable")[:k]
        w = np.maximum(row[top], 0.0)
        y = train.correct[top].astype(np.float64)
        out.append(y.mean(axis=0) if w.sum() == 0 else w @ y / w.sum())
    return np.array(out)


def test_knn_distance_matches_its_definition_and_chooses_k_with_the_weights(fitted, sets):
    from cr2.routers.knn import _log_loss

    router, train, dev, test = fitted["knn-distance"], sets["train"], sets["dev"], sets["test"]
    np.testing.assert_allclose(router.predict_proba(test), _weighted_reference(train, test, router.k_), atol=1e-6)
    losses = {k: _log_loss(_weighted_reference(train, dev, k), dev.correct.astype(float)) for k in (3, 9, 27)}
    assert router.dev_log_loss_ == pytest.approx(losses, abs=1e-6)
    assert router.k_ == min(losses, key=lambda k: (losses[k], k))
    plain = KNNRouter(k_grid=(3, 9, 27)).fit(train, dev)
    assert plain.dev_log_loss_ != pytest.approx(router.dev_log_loss_, abs=1e-6)  # the weights change the k path
    halves = np.vstack([router.predict_proba(test.subset(np.arange(77))),
                        router.predict_proba(test.subset(np.arange(77, len(test))))])
    full = router.predict_proba(test)
    np.testing.assert_array_equal(halves, full)  # a query's p̂ does not depend on its batch
    np.testing.assert_array_equal(router.predict_proba(test.subset(np.array([5]))), full[5:6])  # batch 1 included


def test_weighted_and_plain_knn_on_the_same_state_have_different_fingerprints(sets):
    train, dev = sets["train"], sets["dev"]
    plain, weighted = KNNRouter(k=9).fit(train, dev), KNNRouter(k=9, weights="cosine").fit(train, dev)
    assert plain.fingerprint() != weighted.fingerprint()
    with pytest.raises(DataValidationError, match="weights must be one of uniform, cosine"):
        KNNRouter(weights="inverse").fit(train, dev)


# ---------------------------------------------------------------- knn-isotonic
def test_knn_isotonic_is_monotone_in_the_raw_probability(fitted, sets):
    from sklearn.isotonic import IsotonicRegression

    router, dev, test = fitted["knn-isotonic"], sets["dev"], sets["test"]
    raw, calibrated = router.knn_.predict_proba(test), router.predict_proba(test)
    grid = np.tile(np.linspace(0.0, 1.0, 201)[:, None], (1, test.n_models))
    on_grid = router.calibrate_raw(grid)
    raw_dev = router.knn_.predict_proba(dev).astype(np.float64)
    for m in range(test.n_models):
        order = np.argsort(raw[:, m], kind="stable")
        assert np.all(np.diff(calibrated[order, m]) >= 0), f"model {m}: calibrated p̂ decreases as raw p̂ grows"
        assert np.all(np.diff(on_grid[:, m]) >= 0)
        iso = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        iso.fit(raw_dev[:, m], dev.correct[:, m].astype(np.float64))  # fitted on dev, never on val or test
        np.testing.assert_allclose(calibrated[:, m], iso.predict(raw[:, m].astype(np.float64)), atol=1e-6)
    assert router.knn_.k_ == KNNRouter(k_grid=(3, 9, 27)).fit(sets["train"], dev).k_  # k by KNN's own dev rule


# ---------------------------------------------------------------- knn-mlp-mean
def test_knn_mlp_mean_is_the_mean_of_the_two_routers_fitted_alone(fitted, sets):
    router, train, dev, test = fitted["knn-mlp-mean"], sets["train"], sets["dev"], sets["test"]
    knn = get_router("knn", k_grid=(3, 9, 27)).fit(train, dev)
    mlp = get_router("mlp", epochs=3, seed=3).fit(train, dev)
    expected = 0.5 * (knn.predict_proba(test).astype(np.float64) + mlp.predict_proba(test).astype(np.float64))
    np.testing.assert_array_equal(router.predict_proba(test), expected.astype(np.float32))
    assert router.n_params() == mlp.n_params()
    assert router.flops_per_query() == knn.flops_per_query() + mlp.flops_per_query() + 2 * test.n_models
    assert get_router("knn-mlp-mean", num_threads=2)._mlp_params()["num_threads"] == 2  # the benchmark's threads reach the MLP


# ---------------------------------------------------------------- knn-stack
def test_knn_stack_training_features_are_leave_one_out(fitted, sets):
    router, train, dev, test = fitted["knn-stack"], sets["train"], sets["dev"], sets["test"]
    assert len(np.unique(train.embedding, axis=0)) == len(train)  # duplicate-free: only the row itself is left out
    knn = router.knn_
    assert knn.k_ == KNNRouter(k_grid=(3, 9, 27)).fit(train, dev).k_  # k by KNN's dev rule
    loo = knn.leave_one_out_proba()
    sims = _unit(train.embedding).astype(np.float64) @ _unit(train.embedding).astype(np.float64).T
    np.fill_diagonal(sims, -np.inf)
    reference = np.array([train.correct[np.argsort(-row, kind="stable")[: knn.k_]].mean(axis=0) for row in sims])
    np.testing.assert_allclose(loo, reference, atol=1e-6)
    # a query's own label never enters its feature: flip row 0's labels and refit, its feature stays
    flipped = train.correct.copy()
    flipped[0] = ~flipped[0]
    from dataclasses import replace

    other = KNNRouter(k=knn.k_).fit(replace(train, correct=flipped), dev)
    np.testing.assert_array_equal(other.leave_one_out_proba()[0], loo[0])
    # the network's training inputs carry the leave-one-out features; dev/test inputs the plain k-NN ones
    m = train.n_models
    np.testing.assert_array_equal(router._train_inputs(train)[1][:, -m:].numpy(), loo)
    np.testing.assert_array_equal(router._inputs(test)[1][:, -m:].numpy(), knn.predict_proba(test))
    from cr2.method.complexity import knn_flops
    from cr2.routers.mlp import mlp_flops

    n_cost = len(router.cost_columns_)
    assert router.flops_per_query() == knn_flops(train.embedding.shape[1], len(train)) + mlp_flops(
        m, train.embedding.shape[1], router.hidden, n_cost + m)
    with pytest.raises(DataValidationError, match="train set its KNN part was fitted on"):
        router._train_inputs(test)


# ---------------------------------------------------------------- gate-avoidable
def test_realised_margin_is_negative_exactly_for_avoidable_errors():
    from cr2.method.gate import _targets

    correct = np.array([[0, 1, 0], [0, 0, 1], [1, 1, 1], [1, 0, 0], [0, 0, 0]], dtype=bool)
    cost = np.tile(np.array([0.2, 0.6, 1.0]), (5, 1))  # device cheapest, c_ref = 1
    avoidable = ~correct[:, 0] & correct[:, 1:].any(axis=1)
    lams = np.array([0.1, 0.5, 1.0])  # λ·(c_m − c_0) < 1 for every edge model
    margin, z = _targets(correct.astype(np.float64), cost, lams)  # what fit_gate trains on, [J, B]
    for j in range(len(lams)):
        np.testing.assert_array_equal(margin[j].numpy() < 0, avoidable)
        np.testing.assert_array_equal(z[j].numpy() == 0, avoidable)
    # at λ = 5 every right edge model costs more than it is worth (5·(c_m − c_0) ≥ 2 > 1): the realised margin is
    # positive on every row, the two avoidable errors included (module docstring: "worth its extra cost at that λ")
    margin_high, _ = _targets(correct.astype(np.float64), cost, np.array([5.0]))
    expected = np.array([(y[0] - 5 * cost[i, 0]) - np.max(y[1:] - 5 * cost[i, 1:])
                         for i, y in enumerate(correct.astype(np.float64))])
    np.testing.assert_allclose(margin_high[0].numpy(), expected, atol=1e-6)
    assert np.all(expected > 0) and avoidable.sum() == 2


def test_gate_avoidable_trains_on_the_real_labels(sets, monkeypatch):
    import cr2.method.gate as gate_module

    seen = {}
    real_fit_gate = gate_module.fit_gate

    def spy(train, dev, p_train, p_dev, spec, **kwargs):
        seen.update(p_train=p_train, p_dev=p_dev, spec=spec)
        return real_fit_gate(train, dev, p_train, p_dev, spec, **kwargs)

    monkeypatch.setattr(gate_module, "fit_gate", spy)
    train, dev = sets["train"], sets["dev"]
    router = get_router("gate-avoidable", gate={"epochs": 2, "hidden": 32}).fit(train, dev)
    np.testing.assert_array_equal(seen["p_train"], train.correct.astype(np.float64))
    np.testing.assert_array_equal(seen["p_dev"], dev.correct.astype(np.float64))
    assert seen["spec"].epochs == 2 and seen["spec"].hidden == 32 and seen["spec"].lr == 3e-4  # GateSpec defaults
    assert router.gate_.hparams["hidden"] == 32


def test_gate_avoidable_local_score(fitted, sets):
    router, test = fitted["gate-avoidable"], sets["test"]
    n = len(test)
    at_zero = router.local_score(test, 0.0)
    assert at_zero.shape == (n,) and at_zero.dtype == np.float32 and np.all(np.isneginf(at_zero))
    lams = np.array([0.0, 0.5, 2.0])
    scores = router.local_score(test, lams)
    assert scores.shape == (n, 3) and scores.dtype == np.float32
    assert np.all(np.isneginf(scores[:, 0]))
    np.testing.assert_array_equal(scores[:, 1:], router.gate_.score(test.embedding, lams[1:]))  # σ(Δ̂/T), as CR²'s
    np.testing.assert_array_equal(router.local_score(test, 0.5), scores[:, 1])
    assert np.all((scores[:, 1:] >= 0) & (scores[:, 1:] <= 1))
    assert router.local_score_fingerprint() == router.gate_fingerprint_ != router.fingerprint()
    np.testing.assert_array_equal(router.predict_proba(test), router.knn_.predict_proba(test))  # p̂ is KNN's
    assert router.n_params() == router.gate_.n_params()
    assert router.flops_per_query() == router.gate_.flops_per_query() + router.knn_.flops_per_query()


def test_gate_avoidable_is_deterministic_and_checks_its_gate_parameters(fitted, sets):
    from cr2.config import GateSpec

    train, dev = sets["train"], sets["dev"]
    again = get_router("gate-avoidable", gate=GateSpec(epochs=2), knn={"k_grid": (3, 9, 27)}).fit(train, dev)
    assert again.gate == GateSpec(epochs=2).model_dump()  # a GateSpec is kept as its fields
    assert again.gate_fingerprint_ == fitted["gate-avoidable"].gate_fingerprint_
    assert again.fingerprint() == fitted["gate-avoidable"].fingerprint()
    with pytest.raises(ConfigError, match="bad gate parameters .*epochz"):
        get_router("gate-avoidable", gate={"epochz": 2}).fit(train, dev)


@pytest.mark.parametrize("weights", ["uniform", "cosine"])
def test_an_exhaustive_graph_search_gives_the_exact_weighted_and_leave_one_out_proba(weights, sets):
    """The HNSW path of the weights and of leave-one-out: with a search wide enough to be exact on 400 rows, the same
    p̂ and the same leave-one-out features as the brute-force search."""
    pytest.importorskip("faiss")
    train, dev, test = sets["train"], sets["dev"], sets["test"]
    exact = KNNRouter(k=9, weights=weights).fit(train, dev)
    graph = KNNRouter(k=9, weights=weights, index="hnsw", hnsw_ef_search=400).fit(train, dev)
    np.testing.assert_array_equal(graph.predict_proba(test), exact.predict_proba(test))
    np.testing.assert_array_equal(graph.leave_one_out_proba(), exact.leave_one_out_proba())
