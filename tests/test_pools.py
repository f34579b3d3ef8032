"""The pool sweep and the label diagnostics: the selection rule, hand-computable diagnostics, the
signed-rank test against scipy, and `cr2 study pools` end to end on two tiny pools of a 70-question MMLU-Pro slice."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from cr2.config import REPO_ROOT
from cr2.core.errors import DataValidationError, InvalidValueError
from tests.conftest import copy_of

RULE = REPO_ROOT / "configs" / "pools" / "mmlu-pro.yaml"


# ---------------------------------------------------------------- the rule
def test_shipped_rule_gives_at_least_12_pools_of_a_small_device_and_three_larger_edges():
    from cr2.studies.pools import edge_platform, load_pool_rule, select_pools

    rule = load_pool_rule(RULE)
    pools = select_pools(rule)
    assert len(pools) >= 12
    for p in pools:
        assert p.device.params <= 8.0e9 and len(p.edges) == 3 and len({e.name for e in p.edges}) == 3
        assert all(e.n_active > p.device.n_active for e in p.edges)
        assert p.reference.n_active == max(e.n_active for e in p.edges)
        assert all(edge_platform(e, rule) is not None for e in p.edges)
    # jamba (398B bf16 = 796 GB) fits no 8 × 80 GB node: never an edge model
    assert all("jamba" not in e.name for p in pools for e in p.edges)


def test_rule_picks_the_edge_nearest_each_ratio_on_a_log_scale_with_the_chat_tie_break():
    from cr2.studies.pools import PoolRule, select_pools

    plat = [{"platform": "big", "memory_bytes": 1e13, "server_power_w": 1.0}]
    models = [{"name": "dev", "hf_name": "d", "params": 1e9, "chat": True},
              {"name": "a-base", "hf_name": "a", "params": 2e9, "chat": False},
              {"name": "a-chat", "hf_name": "a", "params": 2e9, "chat": True},
              {"name": "b", "hf_name": "b", "params": 4.4e9, "chat": False},   # |log(4.4/5)| = 0.128
              {"name": "c", "hf_name": "c", "params": 5.8e9, "chat": False},   # |log(5.8/5)| = 0.148
              {"name": "d", "hf_name": "d", "params": 12e9, "chat": False}]
    rule = PoolRule(device_max_params=1e9, size_ratios=(2, 5, 10), memory_headroom=1.0, device_platform="dev",
                    hardware="x", edge_platforms=plat, models=models)
    (pool,) = select_pools(rule)
    assert [e.name for e in pool.edges] == ["a-chat", "b", "d"]  # 10 × 1B: d (12B) is nearer than c (5.8B) on a log scale
    assert pool.reference.name == "d" and [m.name for m in pool.models] == ["dev", "a-chat", "b", "d"]


# ---------------------------------------------------------------- diagnostics on hand-computable data
def test_diagnostics_on_a_hand_computed_table():
    from cr2.studies.diagnostics import correctness_correlation, label_rows, p_right_given_wrong, roc_auc

    y = np.array([[1, 1], [1, 0], [0, 0], [0, 1]], dtype=bool)  # independent columns: φ = 0
    assert correctness_correlation(y)[0, 1] == pytest.approx(0.0)
    assert correctness_correlation(np.array([[1, 1], [0, 0], [1, 1]], bool))[0, 1] == pytest.approx(1.0)
    assert p_right_given_wrong(y, right=0, wrong=1) == (0.5, 2)  # largest wrong on rows 1, 2; device right on row 1
    assert roc_auc([1, 1, 0, 0], [0.9, 0.8, 0.1, 0.2]) == 1.0
    assert roc_auc([1, 0, 1, 0], [0.5, 0.5, 0.5, 0.5]) == 0.5
    assert roc_auc([1, 0, 0], [0.2, 0.9, 0.1]) == pytest.approx(0.5)  # beats one of two negatives
    rows = {(r["metric"], r["subject"]): r for r in label_rows(y, ["dev", "big"])}
    assert rows[("p_device_right_given_largest_wrong", "dev")]["estimate"] == 0.5
    assert rows[("solvable_rate", "any")]["estimate"] == 0.75


def test_knn_auc_sees_text_that_predicts_correctness_and_not_noise():
    from cr2.studies.diagnostics import predictability_rows

    rng = np.random.default_rng(0)
    n = 600
    emb = rng.normal(size=(n, 8)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    readable = emb[:, 0] > 0  # a model right exactly on one half-space of the text
    noise = rng.random(n) < 0.5  # a model right at random
    rows = {(r["metric"], r["subject"], r["other"]): r["estimate"]
            for r in predictability_rows(emb, np.stack([readable, noise], axis=1), ["a", "b"], k=15)}
    assert rows[("knn_auc_correct", "a", None)] > 0.9
    assert abs(rows[("knn_auc_correct", "b", None)] - 0.5) < 0.1  # one-sided enough for n = 600, fixed seed
    assert rows[("disagree_rate", "a", "b")] == pytest.approx(float(np.mean(readable != noise)))


def test_full_information_reference_is_never_dearer_than_any_router_at_its_accuracy():
    from cr2.studies.diagnostics import oracle_sweep

    rng = np.random.default_rng(1)
    y = rng.random((300, 3)) < [0.4, 0.6, 0.8]
    c = np.tile([0.1, 0.4, 1.0], (300, 1))
    ch = oracle_sweep(y, c)
    acc = y[np.arange(300)[:, None], ch].mean(axis=0)
    cost = c[np.arange(300)[:, None], ch].mean(axis=0)
    assert acc[0] == pytest.approx(y.any(axis=1).mean())  # λ = 0: every solvable query answered
    for j in range(3):  # no single model reaches its accuracy more cheaply than the oracle
        ok = acc >= y[:, j].mean() - 1e-12
        assert cost[ok].min() <= c[0, j] + 1e-12


# ---------------------------------------------------------------- the signed-rank test vs scipy
def test_comparison_rows_rest_on_every_resample_where_targets_are_missed():
    """A top target that both frontiers barely reach on the full sample and many resamples miss: the fallback cost
    keeps every per-target and mean interval on all 300 resamples, and each row's p is its own resamples'."""
    from cr2.evaluation.fixed_accuracy import FallbackCost, MethodOutcomes, cost_samples, saving_pct
    from cr2.evaluation.statistics import bootstrap_p_values, resample_counts, resample_indices
    from cr2.studies.pools import BEST_SINGLE, comparison_rows

    rng = np.random.default_rng(3)
    n, k = 40, 6

    def outcomes(p):
        return MethodOutcomes(rng.random((n, k)) < p, rng.random((n, k)) * np.linspace(0.2, 1.0, k))

    out = {"knn": outcomes(np.linspace(0.4, 0.8, k)), BEST_SINGLE: outcomes(np.linspace(0.4, 0.8, k)),
           "cr2": outcomes(np.linspace(0.45, 0.85, k))}
    top = min(float(out[m].points()[0].max()) for m in ("knn", "cr2"))  # both reach it, many resamples do not
    targets = np.round(np.array([0.3, 0.4, np.floor(top * 100) / 100]), 6)
    counts = resample_counts(resample_indices(n, 300, np.random.default_rng(0)), n)
    fallback = FallbackCost.of_always(out[BEST_SINGLE], targets, counts)
    assert not np.isfinite(cost_samples(out["knn"], targets, counts)[1][:, 2]).all()  # resamples miss the top
    rows = comparison_rows(out, ["cr2"], targets, counts, fallback, targets)
    mine = [r for r in rows if r["other"] == "knn"]
    assert len(mine) == len(targets) + 1 and all(r["n_resamples"] == 300 for r in mine)
    mean = next(r for r in mine if r["metric"] == "mean_saving_pct")
    kept = fallback.reachable_grid(targets)  # a target no Always-model reaches on the test rows leaves the mean
    cols = np.isin(targets, kept.targets)
    assert mean["n"] == kept.n_targets == int(cols.sum()) and (kept.reason is None) == (kept.n_targets == len(targets))
    (_, a), (_, b) = (cost_samples(out[m], targets, counts, fallback) for m in ("cr2", "knn"))
    assert mean["p_value"] == pytest.approx(float(bootstrap_p_values(saving_pct(a, b)[:, cols].mean(axis=1))))


@pytest.mark.parametrize("n, seed", [(5, 0), (12, 1), (13, 2), (30, 3)])
def test_signed_rank_exact_matches_scipy(n, seed):
    from scipy.stats import wilcoxon

    from cr2.evaluation.statistics import signed_rank_test

    x = np.random.default_rng(seed).normal(0.3, 1.0, n)
    ours, ref = signed_rank_test(x), wilcoxon(x)
    assert ours.method == "exact"
    assert min(ours.w_plus, ours.w_minus) == pytest.approx(ref.statistic)
    assert ours.p_value == pytest.approx(ref.pvalue, rel=1e-12)


def test_signed_rank_with_ties_and_zeros_matches_scipys_normal_approximation():
    from scipy.stats import wilcoxon

    from cr2.evaluation.statistics import signed_rank_test

    x = np.array([1, 2, 0, -1, 3, 3, 2, 0.5])
    y = np.zeros_like(x)
    ours = signed_rank_test(x, y)
    assert ours.method == "normal" and ours.n == 7
    assert ours.p_value == pytest.approx(wilcoxon(x, method="approx").pvalue, rel=1e-12)
    big = np.round(np.random.default_rng(3).normal(0.2, 1, 80), 1)
    assert signed_rank_test(big).p_value == pytest.approx(wilcoxon(big).pvalue, rel=1e-12)
    with pytest.raises(InvalidValueError, match="every difference is 0"):
        signed_rank_test(np.zeros(4))


# ---------------------------------------------------------------- the sweep on two tiny pools (flow)
SMALL_RULE = """device_max_params: 6.2e9
size_ratios: [2.0, 5.0, 10.0]
memory_headroom: 1.1
device_platform: jetson-agx-orin
hardware: mmlu-pro-pools
edge_platforms:
  - {platform: rtx-4090, memory_bytes: 24.0e9, server_power_w: 300.0}
  - {platform: 1x-h100-80gb, memory_bytes: 80.0e9, server_power_w: 700.0}
  - {platform: 2x-h100-80gb, memory_bytes: 160.0e9, server_power_w: 1400.0}
models:
  - {name: Phi-3-mini-4k-instruct, hf_name: microsoft/Phi-3-mini-4k-instruct, params: 3.8e9, chat: true}
  - {name: Yi-6B, hf_name: 01-ai/Yi-6B, params: 6.1e9, chat: false}
  - {name: Llama-2-13b-hf, hf_name: meta-llama/Llama-2-13b-hf, params: 13.0e9, chat: false}
  - {name: Mixtral-8x7B-Instruct-v0.1, hf_name: mistralai/Mixtral-8x7B-Instruct-v0.1, params: 46.7e9,
     active_params: 12.9e9, chat: true}
  - {name: Yi-34B, hf_name: 01-ai/Yi-34B, params: 34.4e9, chat: false}
  - {name: Meta-Llama-3_1-70B-Instruct, hf_name: meta-llama/Llama-3.1-70B-Instruct, params: 70.6e9, chat: true}
"""


@pytest.fixture(scope="module")
def sweep(measured_slice, tmp_path_factory):
    """The sweep, run twice, on a copy of the run's measured slice warehouse (conftest.measured_slice): the base
    warehouse a user sweeps from after `cr2 run` (flows/pools.py), so its ingest and prepare are cached there."""
    from cr2_flows.pools import study_pools_flow

    root = tmp_path_factory.mktemp("pools")
    cfg = measured_slice["cfg"]
    rule = root / "rule.yaml"
    rule.write_text(SMALL_RULE)
    home = copy_of(measured_slice["home"], root / "home")
    first = study_pools_flow(config_path=str(cfg), home=str(home), rule_path=str(rule))
    second = study_pools_flow(config_path=str(cfg), home=str(home), rule_path=str(rule))
    return {"home": home, "first": first, "second": second, "cfg": cfg}


@pytest.mark.slow
@pytest.mark.flow
def test_sweep_runs_each_pool_end_to_end_with_intervals_and_diagnostics(sweep):
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import pool_diagnostics, pool_savings

    first, home = sweep["first"], sweep["home"]
    assert sorted(first["pools"]) == ["phi-3-mini-4k-instruct", "yi-6b"]
    with Warehouse(home, read_only=True) as wh:
        sav, diag = pool_savings(wh, first["study_id"]), pool_diagnostics(wh, first["study_id"])
        runs = wh.df("SELECT * FROM pool_runs")
    assert set(sav["pool"]) == set(first["pools"])
    knn = sav[sav["reference"] == "knn"]
    assert {"cr2", "mlp", "embedllm", "llmrank", "full-information"} <= set(knn["method"])
    ok = knn.dropna(subset=["lower_pct"])
    assert (ok["lower_pct"] <= ok["mean_saving_pct"] + 1e-9).all() and (ok["mean_saving_pct"] <= ok["upper_pct"] + 1e-9).all()
    # every mean's interval rests on every resample drawn (a missed target costs the Always-model fallback), and
    # each carries the p of its own resamples
    assert (ok["n_resamples"] == int(runs["n_resamples"].max())).all() and ok["p_value"].between(0, 1).all()
    assert len(diag) == 2 and diag["auc_device_correct"].between(0, 1).all()
    assert (diag["device_accuracy"].between(0, 1)).all() and diag["m_ref"].notna().all()
    # each pool ran in its own warehouse with its own models; the base warehouse's own pool is untouched
    yi = runs[runs["pool"] == "yi-6b"].iloc[0]
    assert "mixtral-8x7b-instruct-v0.1" in yi["models"] and yi["reference"] == "meta-llama-3.1-70b-instruct"
    with Warehouse(home / yi["home"], read_only=True) as wh:
        assert set(wh.df("SELECT DISTINCT model_id FROM labels")["model_id"]) == {
            "yi-6b", "mixtral-8x7b-instruct-v0.1", "yi-34b", "meta-llama-3.1-70b-instruct"}


@pytest.mark.slow
@pytest.mark.flow
def test_a_second_sweep_reuses_every_pool(sweep):
    assert sweep["second"]["study_id"] == sweep["first"]["study_id"]
    assert all(p["cached"] for p in sweep["second"]["pools"].values())


def test_sweep_refuses_an_unknown_pool_or_a_simulated_config(tmp_path):
    from cr2_flows.pools import study_pools_flow

    with pytest.raises(InvalidValueError, match="measured config"):
        study_pools_flow.fn(config_path=None, home=str(tmp_path / "h"))


# ---------------------------------------------------------------- the router study on the sweep's pools (flow)
@pytest.fixture(scope="module")
def router_study(sweep, tmp_path_factory):
    """A three-candidate study over the sweep's two pools, run twice (the second resumes from the caches)."""
    from cr2_flows.router_study import study_routers_flow
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.pools import pool_savings

    root = tmp_path_factory.mktemp("router-study")
    rule = root / "rule.yaml"
    rule.write_text(SMALL_RULE)
    study = root / "study.yaml"
    study.write_text("candidates:\n  - {name: gate-avoidable, what: a}\n  - {name: knn-distance, what: b}\n"
                     "  - {name: knn-isotonic, what: c}\nreference: knn\n"
                     f"pools: {{rule: {rule}, config: {sweep['cfg']}}}\nscenarios: []\n"
                     "guarantee: {rule: crc-avoidable, alpha: grids.default_alpha}\n")
    with Warehouse(sweep["home"], read_only=True) as wh:
        before = pool_savings(wh, sweep["first"]["study_id"])
    first = study_routers_flow(study_path=str(study), pools_home=str(sweep["home"]))
    second = study_routers_flow(study_path=str(study), pools_home=str(sweep["home"]))
    with Warehouse(sweep["home"], read_only=True) as wh:
        after = pool_savings(wh, sweep["first"]["study_id"])
    return {"study": study, "first": first, "second": second, "before": before, "after": after}


@pytest.mark.slow
@pytest.mark.flow
def test_router_study_compares_every_candidate_with_certified_knn_on_every_pool(router_study, sweep):
    from cr2.evaluation.statistics import Verdict
    from cr2_warehouse.router_study import study_results
    from cr2_warehouse.db import Warehouse

    first = router_study["first"]
    assert sorted(first["units"]) == ["phi-3-mini-4k-instruct", "yi-6b"]
    study, rows, summary, flops = study_results(str(router_study["study"]), str(sweep["home"]))
    assert study.names == ["gate-avoidable", "knn-distance", "knn-isotonic"]
    assert len(rows) == 3 * 2 and rows["estimate"].notna().all() and rows["p_value"].between(0, 1).all()
    assert ((rows["lower"] <= rows["estimate"] + 1e-9) & (rows["estimate"] <= rows["upper"] + 1e-9)).all()
    assert all(isinstance(w, Verdict) for w in rows["verdict"])
    assert (rows["n_resamples"] == rows["n_resamples"].max()).all()  # every resample, on every row
    assert rows["headroom"].notna().all()
    assert all(flops.get(c, 0) > 0 for c in study.names)
    assert list(summary["candidate"]) == study.names and (summary["pools"] == 2).all()
    # each unit ran in its own copy: the sweep's pools and rows are as they were
    pd.testing.assert_frame_equal(router_study["before"], router_study["after"])
    unit = first["units"]["yi-6b"]
    assert Path(unit["home"]).parts[-3:] == ("studies", "routers", "yi-6b")
    with Warehouse(sweep["home"] / "studies" / "pools" / "yi-6b", read_only=True) as wh:
        methods = set(wh.df("SELECT DISTINCT method FROM methods")["method"])
    assert not methods & {"knn-distance", "gate-avoidable"}


@pytest.mark.slow
@pytest.mark.flow
def test_a_second_router_study_resumes_from_the_caches(router_study):
    assert all(u["cached"] for u in router_study["second"]["units"].values())
    assert {u["run_id"] for u in router_study["second"]["units"].values()} == \
        {u["run_id"] for u in router_study["first"]["units"].values()}


def test_router_study_refuses_an_unknown_unit_or_a_missing_sweep(tmp_path):
    from cr2_flows.router_study import study_routers_flow

    with pytest.raises(InvalidValueError, match="unknown unit"):
        study_routers_flow.fn(pools_home=str(tmp_path), only=["no-such-pool"])
    with pytest.raises(DataValidationError, match="run the pool sweep first"):
        study_routers_flow.fn(pools_home=str(tmp_path), only=["phi-3-mini-4k-instruct"])


# ---------------------------------------------------------------- across pools: the signed-rank description
def test_signed_rank_tests_compare_cr2_with_knn_and_each_compared_baseline_over_the_pools():
    from cr2.evaluation.statistics import signed_rank_test
    from cr2.studies.pools import signed_rank_tests

    cr2 = [3.0, 5.0, -1.0, 4.0, 6.0]
    mlp = [1.0, 1.0, 1.0, 1.0, np.nan]  # no saving stored on the last pool: 4 pairs
    knn = pd.DataFrame({"pool": [f"p{i}" for i in range(5)] * 2, "method": ["cr2"] * 5 + ["mlp"] * 5,
                        "mean_saving_pct": cr2 + mlp})
    t = signed_rank_tests(knn).set_index("baseline")
    assert list(t.index) == ["knn", "mlp"]  # KNN first, then the catalogue's compared baselines stored here
    ref = signed_rank_test(np.array(cr2))  # against KNN: the savings against 0
    assert (t.loc["knn", "pools"], t.loc["knn", "median"], t.loc["knn", "p"]) == (5, ref.median_diff, ref.p_value)
    assert t.loc["knn", "w_plus"] == 14.0 and t.loc["knn", "w_minus"] == 1.0
    assert t.loc["mlp", "pools"] == 4 and t.loc["mlp", "median"] == pytest.approx(np.median([2.0, 4.0, -2.0, 3.0]))
    assert t["error"].isna().all()
    # one pool is no comparison across pools
    assert signed_rank_tests(knn[knn["pool"] == "p0"]).empty


# ---------------------------------------------------------------- is m_ref the most accurate? (label diagnostics)
def test_the_reference_gap_family_finds_an_edge_model_more_accurate_than_m_ref_after_holm():
    from cr2.studies.diagnostics import reference_accuracy_gap_family
    from cr2.studies.pools import Pool, PoolModel

    def pm(name, params):
        return PoolModel(name=name, hf_name=name, params=params, chat=False)

    dev, e1, ref = pm("dev", 1e9), pm("e1", 2e9), pm("ref", 9e9)
    pool = Pool(device=dev, edges=(e1, ref), reference=ref)
    rng = np.random.default_rng(3)
    n = 400  # e1 right on 90 %, m_ref on 60 %, the device on 60 % of the questions, independently
    y = np.column_stack([rng.random(n) < 0.6, rng.random(n) < 0.9, rng.random(n) < 0.6]).astype(float)
    g = reference_accuracy_gap_family(y, ["dev", "e1", "ref"], [pool], 500, np.random.default_rng(0))
    by = g.set_index("model")
    assert by.loc["e1", "estimate"] == pytest.approx(y[:, 2].mean() - y[:, 1].mean())
    assert by.loc["e1", "verdict"] == "dearer" and by.loc["e1", "upper"] < 0  # m_ref detectably less accurate
    assert by.loc["dev", "verdict"] == "no difference detected"
    assert (g["p_holm"] >= g["p"]).all() and set(g["n_resamples"]) == {500}
    # the same generator state gives the same family (the page's seed 0)
    again = reference_accuracy_gap_family(y, ["dev", "e1", "ref"], [pool], 500, np.random.default_rng(0))
    pd.testing.assert_frame_equal(g, again)


def test_across_pool_comparisons_describe_and_count_each_pools_own_word():
    import pandas as pd

    from cr2.evaluation.statistics import signed_rank_test
    from cr2.studies.pools import across_pool_comparisons

    rows = pd.DataFrame({"subject": ["cr2@crc"] * 4 + ["cr2-fixed-0.5"] * 2, "other": ["knn@crc"] * 4 + ["knn"] * 2,
                         "estimate": [-3.0, -1.0, 2.0, -4.0, 0.0, 0.0], "n_resamples": [1000, 900, None, 1000, 10, 10],
                         "verdict": ["dearer", "no difference detected", "no difference detected", None,
                                     "no difference detected", "no difference detected"]})
    a, b = across_pool_comparisons(rows)
    assert (a.side_a, a.side_b, a.pools, a.median, a.min_resamples) == ("cr2@crc", "knn@crc", 4, -2.0, 900)
    assert a.p_value == signed_rank_test(np.array([-3.0, -1.0, 2.0, -4.0])).p_value
    assert (a.cheaper, a.dearer, a.no_difference, a.no_word) == (0, 1, 2, 1)
    assert b.p_value is None and b.no_difference == 2  # every saving 0: nothing to test, nothing called
