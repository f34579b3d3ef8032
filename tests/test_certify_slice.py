"""The certify stage on a real slice: every catalogued router that predicts p̂, CR² by its gate score, and a toy router
added from outside the package, each certified under every calibrated rule — with no edit to cr2.

The stages run as tasks (no Prefect server) through a read-tracking view, so the certify stage's declared reads are
checked on the way; the router module and its catalogue live in a temporary directory.
"""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from cr2.config import load_config
from cr2.crc import RULES
from tests.conftest import run_stages_to_evaluate, write_small_benchmarks
from tests.test_extending import CATALOGUE as TOY_CATALOGUE
from tests.test_extending import TOY_ROUTER
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.slow]

LEARNED = ("knn", "mlp", "embedllm", "llmrank", "llmrank-bench")
SMALL = {"teacher": {"epochs": 2}, "gate": {"epochs": 2}, "evaluation": {"n_resplits": 10, "bootstrap": {"n_resamples": 200, "n_resamples_compare": 1000}},
         "grids": {"lam": {"min": 0.1, "max": 20.0, "n_log": 4, "extra": [0.0, 2.0]}},
         "certify": {"rules": list(RULES), "delta": 0.1, "alphas": [0.05, 0.1, 0.2]}}


@pytest.fixture(scope="module")
def certified(tmp_path_factory, one_torch_thread):
    from cr2_tasks.certify import CERTIFY
    from cr2_tasks.common import tracked_run
    from cr2_tasks.equal_risk import EQUAL_RISK

    root = tmp_path_factory.mktemp("certify-slice")
    plugin = root / "plugin"
    plugin.mkdir()
    (plugin / "toy_router.py").write_text(TOY_ROUTER)
    (plugin / "catalogue.yaml").write_text(textwrap.dedent(TOY_CATALOGUE))
    data = write_small_benchmarks(root / "data", per_subset=20, subsets_per_benchmark=2)
    config = load_config(overrides={
        "data_dir": str(data), **SMALL,
        "baselines": {"routers": [*LEARNED, "prior"], "catalogues": [str(plugin / "catalogue.yaml")],
                      "params": {"mlp": {"epochs": 2}, "embedllm": {"epochs": 2}, "llmrank": {"epochs": 2},
                                 "knn": {"k_grid": [3]}, "prior": {"smoothing": 0.5}}}})
    home = root / "home"
    # a cache of its own: the first certify must compute every p̂ (other modules may certify the same slice rows)
    shared_cache = os.environ.get("CR2_CACHE")
    os.environ["CR2_CACHE"] = str(root / "cache")
    try:

        def run(stage, *inputs):
            return tracked_run(stage, config, home, *inputs).verify()  # fails on a read the stage does not declare

        done = run_stages_to_evaluate(run)
        trained, baselines, evaluated = done["train"], done["baselines"], done["evaluate"]
        with Warehouse(home, read_only=True) as wh:
            before = wh.df("SELECT * FROM metrics WHERE run_id = ? ORDER BY ALL", [evaluated["run_id"]])
        result = run(CERTIFY, trained, baselines, evaluated)
        again = run(CERTIFY, trained, baselines, evaluated)
        compared = run(EQUAL_RISK, evaluated, result)
        yield {"compared": compared, "config": config, "home": home, "trained": trained, "baselines": baselines, "evaluated": evaluated,
               "result": result, "again": again, "before": before}
    finally:
        if shared_cache is None:
            os.environ.pop("CR2_CACHE", None)
        else:
            os.environ["CR2_CACHE"] = shared_cache


def test_every_router_with_a_score_and_the_toy_router_are_certified_under_every_rule(certified):
    result, config = certified["result"], certified["config"]
    assert result["routers"] == ["cr2", *LEARNED, "prior"]  # catalogue order; the external entry last
    expected = {f"{r}@{rule}" for r in result["routers"] for rule in RULES}
    assert expected <= set(result["methods"])
    assert {f"{r}@uncertified" for r in (*LEARNED, "prior")} <= set(result["methods"])
    lams, alphas = config.grids.lam.values(), config.certify.alphas
    with Warehouse(certified["home"], read_only=True) as wh:
        ops = wh.df("SELECT o.method, o.lam, o.alpha, o.accuracy, o.cost, o.local_rate, o.risk, o.oracle_risk, "
                    "o.avoidable_risk, m.kind, m.display, m.router FROM operating_points o JOIN methods m "
                    "USING (run_id, method) WHERE o.run_id = ? AND o.benchmark = 'all' AND o.method LIKE '%@%'",
                    [result["run_id"]])
        bands = wh.df("SELECT method, lam, alpha, value FROM metrics WHERE run_id = ? AND metric = 'resplit_risk_mean'",
                      [result["run_id"]])
    for name in expected:
        points = ops[ops["method"] == name]
        assert sorted(zip(points["lam"], points["alpha"])) == sorted((lam, a) for lam in lams for a in alphas), name
        assert (points["kind"] == "certified").all() and points["accuracy"].between(0, 1).all()
        assert points[["cost", "local_rate", "risk", "oracle_risk", "avoidable_risk"]].notna().all().all()
        # the validity band over re-splits of every certified router, at every λ its score is defined
        assert set(bands[bands["method"] == name]["lam"]) >= {lam for lam in lams if lam > 0}, name
    prior = ops[ops["method"] == "prior@crc-avoidable"]
    assert prior["display"].iloc[0] == "Prior (toy) @ crc-avoidable" and prior["router"].iloc[0] == "prior"
    assert ops[ops["method"] == "knn@crc"]["display"].iloc[0] == "KNN @ crc"


def test_tables_are_stored_under_the_routers_name_bound_to_its_score(certified):
    from cr2_warehouse.repository import load_threshold_table

    result, baselines, trained = certified["result"], certified["baselines"]["routers"], certified["trained"]
    assert set(result["versions"]) == {f"{r}@{rule}" for r in result["routers"] for rule in RULES}
    with Warehouse(certified["home"], read_only=True) as wh:
        for name, version in result["versions"].items():
            router, rule = name.split("@")
            table = load_threshold_table(wh, version, router=name)
            assert table.rule == rule
            fp = trained["gate"]["fingerprint"] if router == "cr2" else baselines[router]["fingerprint"]
            assert table.gate_fingerprint == fp
            assert table.score_dtype == ("float32" if router == "cr2" else "float64")
        # CR²'s deployed table is still the newest of router 'cr2' (certify wrote later versions)
        assert load_threshold_table(wh).rule == certified["config"].calibration.rule
        assert wh.scalar("SELECT count(DISTINCT version) FROM thresholds WHERE router = 'cr2'") == 1


def test_certified_cr2_reproduces_cr2s_own_calibration(certified):
    """The same cr2.crc functions on the same gate score: cr2@<rule> has CR²'s own thresholds under that rule."""
    from cr2_tasks.inputs import cr2_router, load_sets
    from cr2_warehouse.repository import load_threshold_table

    config, home, result = certified["config"], certified["home"], certified["result"]
    val = load_sets(config, home)["val"]
    router = cr2_router(config, certified["trained"], home)
    with Warehouse(home, read_only=True) as wh:
        for rule in ("crc", "crc-oracle", "crc-avoidable", "ltt"):
            own = router.calibrate(val, config.grids.lam.values(), config.certify.alphas, dist_id="d", label_source="s",
                                   rule=rule, delta=0.1 if rule == "ltt" else None)
            np.testing.assert_array_equal(load_threshold_table(wh, result["versions"][f"cr2@{rule}"],
                                                               router=f"cr2@{rule}").taus, own.taus)


def test_deferred_queries_go_to_the_routers_own_best_edge_model_and_uncertified_is_its_one_shot_rule(certified):
    from cr2.routers.base import one_shot_choice
    from cr2.method.routing import deferred_choice
    from cr2_tasks.inputs import load_sets
    from cr2_warehouse.repository import baseline_proba

    config, home, run_id = certified["config"], certified["home"], certified["result"]["run_id"]
    test = load_sets(config, home)["test"]
    knn = certified["baselines"]["routers"]["knn"]
    with Warehouse(home, read_only=True) as wh:
        p_hat = baseline_proba(wh, "knn", knn["fingerprint"], test.query_id, test.model_ids)
        dec = wh.df("SELECT method, lam, alpha, query_id, chosen_model, accepted_local FROM decisions WHERE run_id = ? "
                    "AND method IN ('knn@crc-oracle', 'knn@uncertified', 'knn')", [run_id])
        metrics = wh.df("SELECT method, lam, benchmark, metric, value FROM metrics WHERE run_id = ? "
                        "AND method IN ('knn', 'knn@uncertified') AND metric IN ('accuracy', 'cost', 'local_rate')",
                        [run_id])
    model_ids = np.asarray(test.model_ids)
    for lam in (0.1, 2.0):
        rows = dec[(dec["method"] == "knn@crc-oracle") & np.isclose(dec["lam"], lam) & np.isclose(dec["alpha"], 0.2)]
        rows = rows.set_index("query_id").loc[test.query_id]
        deferred = ~rows["accepted_local"].to_numpy()
        edge = deferred_choice(p_hat, test.decision_cost, lam, "edge-only")
        np.testing.assert_array_equal(rows["chosen_model"].to_numpy()[deferred], model_ids[edge][deferred])
        uncert = dec[(dec["method"] == "knn@uncertified") & np.isclose(dec["lam"], lam)].set_index("query_id")
        np.testing.assert_array_equal(uncert.loc[test.query_id, "chosen_model"].to_numpy(),
                                      model_ids[one_shot_choice(p_hat, test.decision_cost, lam)])
    # the uncertified rows are the router's own rows, metric for metric
    wide = metrics.pivot_table(index=["lam", "benchmark", "metric"], columns="method", values="value")
    np.testing.assert_allclose(wide["knn@uncertified"], wide["knn"])


def test_existing_rows_are_unchanged_and_a_rerun_reads_the_cached_p_hat(certified):
    with Warehouse(certified["home"], read_only=True) as wh:
        after = wh.df("SELECT * FROM metrics WHERE run_id = ? AND method NOT LIKE '%@%' ORDER BY ALL",
                      [certified["evaluated"]["run_id"]])
        n_certified = wh.scalar("SELECT count(DISTINCT method) FROM methods WHERE run_id = ? AND method LIKE '%@%'",
                                [certified["evaluated"]["run_id"]])
    assert after.equals(certified["before"])
    assert n_certified == len(certified["again"]["methods"])  # the re-run replaced the rows, it did not add to them
    assert certified["again"]["proba_cached"] == {name: True for name in (*LEARNED, "prior")}
    assert not any(certified["result"]["proba_cached"].values())


def test_every_certified_router_is_compared_at_equal_risk_under_every_question(certified):
    """The equal-risk stage on the slice: a cost-at-accuracy row for every certified side (the toy router's too), the
    three questions for CR² against every other certified router, Holm-adjusted p ≥ raw p, verdict words only from
    the one verdict rule."""
    from cr2.evaluation.statistics import saving_verdict
    from cr2.evaluation.equal_risk import QUESTIONS

    routers = certified["result"]["routers"]
    with Warehouse(certified["home"], read_only=True) as wh:
        rows = wh.df("SELECT * FROM equal_risk WHERE run_id = ?", [certified["evaluated"]["run_id"]])
    assert "prior" in routers  # the router added from outside the package
    cost = rows[rows["question"] == "cost"]
    assert set(cost["router"]) == set(routers)
    means = rows[rows["metric"] == "mean_saving_pct"]
    assert set(means["question"]) == set(QUESTIONS)
    # the default α (0.01) is not among this slice's certify.alphas: no deploy decision, and no deploy test
    assert not (rows["question"] == "deploy").any()
    gate = means[means["question"] == "gate-quality"]
    assert set(gate["against"]) <= set(routers) - {"cr2"} and len(gate) >= 1
    price = means[means["question"] == "calibrated-vs-default"]
    assert set(price["rule"]) <= set(certified["result"]["rules"]) and (price["against"] == "uncertified").all()
    assert (means["p_holm"] >= means["p_value"] - 1e-12).all()
    for r in means.itertuples():
        assert r.verdict == saving_verdict(r.lower, r.upper, r.p_holm, r.level)
    per_target = rows[rows["metric"] == "saving_pct"]  # a family of its own per question × rule × α: its Holm word
    assert per_target["family"].str.endswith("/per-target").all()
    for r in per_target.itertuples():
        assert r.verdict == saving_verdict(r.lower, r.upper, r.p_holm, r.level)
