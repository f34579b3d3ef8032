"""Guarantee validity: each rule's promise over random re-splits, its price, and the warehouse views.

The long test (marked slow) is the MAPIE-style theoretical-validity check (house style, §10): 500 seeded
re-splits of a synthetic pool with the default labels' structure (cr2/evaluation/synthetic.py). Tolerances
are one-sided and stated at each assert; with fixed seeds the outcome is deterministic, and the margins
are chosen so that a correct implementation passes with room (a z of 3.4 is the one-sided 0.05 level
Bonferroni-corrected over the 140 (λ, α) cells). The 500 re-splits are computed once per test run, with the
realised-risk rules beside the others (`long_resplits`): tests/test_realised_risk.py's long test reads
the same records (a rule's records do not depend on which other rules run: the re-splits draw nothing else).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cr2.config import LambdaGrid
from cr2.evaluation.guarantees import ResplitSpec, resplit_validity
from cr2_tasks.guarantees import default_targets, write_guarantees
from cr2.evaluation.synthetic import make_pool
from cr2_warehouse.db import Warehouse

LAMS = np.array(LambdaGrid(min=0.1, max=20.0, n_log=24, extra=[0.5, 1.0, 2.0, 8.0]).values())
ALPHAS = [0.002, 0.005, 0.01, 0.02, 0.05]
Z_CELLS = 3.4  # one-sided z for 140 cells at family level 0.05 (Bonferroni)
REALISED_RULES = ("crc-oracle", "crc-avoidable", "ltt-oracle", "ltt-avoidable")  # the rules on real-label risks


def _run(n_pool: int, n_calib: int, n_resplits: int, seed: int, realised: bool = False) -> pd.DataFrame:
    """Validity records of every rule over re-splits of a synthetic pool; realised: the realised-risk rules too
    (crc-/ltt- on the oracle-disagreement and avoidable-error labels)."""
    pool = make_pool(n_pool, LAMS, seed)
    target, budget = default_targets(pool.correct, pool.cost)
    spec = ResplitSpec(n_calib=n_calib, n_resplits=n_resplits, delta=0.1, target_accuracy=target, budget=budget)
    labels = None
    if realised:
        from cr2.method.utility import risk_label

        labels = {k: risk_label(k, LAMS, correct=pool.correct, decision_cost=pool.cost)
                  for k in ("oracle-disagreement", "avoidable-error")}
    recs = resplit_validity(pool.score, pool.risk, pool.proba, pool.cost, pool.correct, pool.benchmark, LAMS, ALPHAS,
                            spec, np.random.default_rng(seed + 1), realised=labels)
    return pd.DataFrame(recs)


def long_resplits() -> pd.DataFrame:
    """The long tests' records: 500 re-splits of a 20,000-query pool into 2,150 calibration queries (the default val
    size) and the rest, every rule (the realised-risk ones included), computed once for the whole test run."""
    from tests.conftest import built_once

    def build(folder):
        _run(20_000, 2_150, 500, seed=21, realised=True).to_pickle(folder / "records.pkl")

    return pd.read_pickle(built_once("resplits-500", build) / "records.pkl")


def test_validity_records_land_in_the_views(home):
    df = _run(1200, 600, 12, seed=3)
    assert set(df["check_name"]) == {"crc_mean_risk", "crc_any_violation", "ltt_any_violation", "mondrian_mean_risk",
                                     "crc_group_mean_risk", "target_miss", "price"}
    write_guarantees(home, df.to_dict("records"), "r1", "synthetic", "sim")
    with Warehouse(home) as wh:
        v = wh.df("SELECT * FROM v_guarantees WHERE run_id = 'r1'")
        price = wh.df("SELECT * FROM v_guarantee_price WHERE run_id = 'r1'")
    crc = v[(v.check_name == "crc_mean_risk")]
    assert len(crc) == len(ALPHAS) and (crc.n_cells == len(LAMS)).all()
    ltt = v[(v.check_name == "ltt_any_violation") & v.metric.str.endswith("_pool")]
    assert (ltt.bound == 0.1).all() and "holds" not in v.columns  # the verdict is cr2.evaluation.validity's
    ltt_price = price[(price.rule == "ltt") & (price.lam == 0.5)].iloc[0]
    assert ltt_price.crc_local_rate is not None and ltt_price.local_rate <= ltt_price.crc_local_rate + 1e-12
    oracle = price[price.rule == "target-accuracy"].iloc[0]
    assert np.isfinite(oracle.crc_mean_cost)  # joined with the CRC oracle point at the same target
    # the report's tables (cr2.report.validity, cr2.report.tables) from the stored cells: one row per promise of the
    # deployed gate with its verdict (crc's mean risk is the certify stage's), prices beside CRC
    from cr2.evaluation.validity import WORDS
    from cr2.report.tables import guarantee_price_table
    from cr2.report.validity import deployed_verdicts
    from cr2_warehouse.repository import guarantee_cells

    with Warehouse(home, read_only=True) as wh:
        vt = deployed_verdicts(guarantee_cells(wh, "r1"))
    assert set(vt["rule"]) >= {"ltt", "mondrian-crc", "target-accuracy", "target-budget"}
    promised = vt[vt["check"] != "crc_group_mean_risk"]
    assert promised["verdict"].isin(WORDS).all() and vt.loc[vt["check"] == "crc_group_mean_risk", "verdict"].isna().all()
    assert "crc_mean_risk" not in set(vt["check"])
    from cr2_cli.render import console, print_guarantees

    width = console.width
    console.width = 200  # no wrapping of the cells checked below
    try:
        with console.capture() as cap:
            print_guarantees(home, "r1", "synthetic")
    finally:
        console.width = width
    text = cap.get()
    assert "P(some λ has" in text and "benchmark=" in text and "target 0." in text and "nan" not in text
    assert "no evaluation run in this warehouse" in text  # the certified routers' verdicts need `cr2 run`: said
    pt = guarantee_price_table(price)
    assert {"ltt", "mondrian", "crc", "target-accuracy"} <= set(pt["rule"])
    assert pt.loc[pt.rule == "crc", "Δ local vs CRC"].eq("+0.000").all()


@pytest.mark.slow
def test_every_rule_keeps_its_promise_over_500_resplits():
    """500 re-splits of a 20,000-query pool into 2,150 calibration queries (the default val size) and the rest.

    crc      mean test risk ≤ α + 3.4 SE in every (λ, α) cell (its promise: E[risk] ≤ α per λ);
    ltt      share of re-splits with any λ over α (pool risk) ≤ δ + 3 SE (binomial SE at δ = 0.1);
    mondrian per-group mean test risk ≤ α + 3.4 SE (the per-group SE), for the groups and α big enough;
    target   share of re-splits whose chosen point misses (pool accuracy / cost) ≤ δ + 3 SE.
    Plus the contrasts that make the test able to fail: plain CRC violates the simultaneous bound in most
    re-splits and the per-group bound on gpqa, and LTT costs local rate beside CRC.
    """
    df = long_resplits()
    df = df[~df.rule.isin(REALISED_RULES)]  # tests/test_realised_risk.py checks those
    B, se_delta = 500, np.sqrt(0.1 * 0.9 / 500)
    crc = df[df.check_name == "crc_mean_risk"]
    assert len(crc) == len(LAMS) * len(ALPHAS)
    excess = (crc.value - crc.bound) / crc.se.fillna(np.inf)
    assert (crc.value <= crc.bound + Z_CELLS * crc.se.fillna(0)).all(), crc.assign(z=excess).nlargest(3, "z")
    assert (crc.value >= crc.bound - 2 / 2151 - Z_CELLS * crc.se.fillna(0))[crc.value > 0].mean() > 0.5  # not vacuous
    ltt = df[(df.check_name == "ltt_any_violation") & (df.metric == "share_any_lam_over_alpha_pool")]
    assert (ltt.value <= 0.1 + 3 * se_delta).all(), ltt[["alpha", "value", "se"]]
    crc_sim = df[(df.check_name == "crc_any_violation") & (df.metric == "share_any_lam_over_alpha_pool")]
    assert (crc_sim.value > 0.5).all()  # CRC is not simultaneous over λ: LTT's promise is a different one
    mond = df[df.check_name == "mondrian_mean_risk"]
    assert (mond.value <= mond.bound + Z_CELLS * mond.se.fillna(0)).all(), mond.nlargest(3, "value")
    crc_g = df[(df.check_name == "crc_group_mean_risk") & (df.group == "benchmark=gpqa")]
    assert (crc_g.value > crc_g.bound + 3 * crc_g.se.fillna(0)).any()  # pooled CRC fails the hard group
    miss = df[(df.check_name == "target_miss") & (df.metric == "share_missing_target_pool")]
    assert len(miss) == 2 and (miss.value <= 0.1 + 3 * se_delta).all(), miss[["rule", "value", "se"]]
    refused = df[(df.check_name == "target_miss") & (df.metric == "share_refused")]
    assert (refused.value < 0.5).all()  # the targets are reachable: the check is not passed by refusing
    price = df[(df.check_name == "price") & (df.metric == "local_rate") & (df.lam == 0.5)].set_index("rule")
    assert price.loc["ltt", "value"] < price.loc["crc", "value"]  # the simultaneous bound costs local answers
    assert B == int(df.n_resplits.iloc[0])


def test_device_thresholds_carry_delta_groups_and_targets():
    """thresholds.json (cr2.deploy.export) round-trips δ, Mondrian grids and target points into cr2.deploy.runtime exactly;
    a reader that ignores groups sees τ = +inf (defer), never some group's threshold."""
    import json

    from cr2.crc import calibrate_group_tables, calibrate_table
    from cr2.core.errors import UncalibratedOperatingPointError
    from cr2.deploy.export import thresholds_json
    from cr2.deploy.runtime import DeviceThresholds

    pool = make_pool(3000, LAMS, seed=8)
    kw = dict(gate_fingerprint="fp", dist_id="d", label_source="s")
    ltt = calibrate_table(pool.score, pool.risk, LAMS, ALPHAS, rule="ltt", delta=0.1, **kw)
    t = DeviceThresholds.from_json(json.loads(json.dumps(thresholds_json(ltt))))
    assert t.rule == "ltt" and t.delta == 0.1 and t.group_taus is None
    np.testing.assert_array_equal(t.taus, ltt.taus)
    g = calibrate_group_tables(pool.score, pool.risk, pool.benchmark, LAMS, ALPHAS, small_group="defer", **kw)
    choice = {"mode": "accuracy", "target": 0.7, "delta": 0.1, "lam": 0.5, "alpha": 0.01,
              "tau": float(np.nextafter(np.float32(0.6), np.float32(1)))}
    t = DeviceThresholds.from_json(json.loads(json.dumps(thresholds_json(g, [choice]))))
    assert t.group_by == "benchmark" and set(t.group_taus) == {"bbh", "gpqa", "mbpp", "mmlu"}
    assert np.isposinf(t.taus).all()  # group-unaware readers defer everything
    for name in t.group_taus:
        assert t.tau(2.0, 0.05, name) == g.tau(2.0, 0.05, "fp", name)
    with pytest.raises(UncalibratedOperatingPointError, match="per benchmark"):
        t.tau(2.0, 0.05)
    assert t.target(target_accuracy=0.7)["tau"] == choice["tau"]
    with pytest.raises(UncalibratedOperatingPointError, match="exported: accuracy 0.7"):
        t.target(budget=0.3)


def test_calibration_config_and_cli_overrides():
    """calibration.rule/delta/group are typed config; `--rule ltt` needs δ, `--rule crc` drops a configured δ."""
    from cr2.config import load_config
    from cr2.core.errors import ConfigError
    from cr2_cli.commands.pipeline import calibration_overrides

    cfg = load_config()
    assert (cfg.calibration.rule, cfg.calibration.delta, cfg.calibration.group) == ("crc", None, None)
    ltt = load_config(overrides={"calibration": calibration_overrides("ltt", 0.1, "benchmark", "defer")})
    assert (ltt.calibration.rule, ltt.calibration.delta, ltt.calibration.group, ltt.calibration.small_group) == (
        "ltt", 0.1, "benchmark", "defer")
    with pytest.raises(ConfigError, match="needs calibration.delta"):
        load_config(overrides={"calibration": calibration_overrides("ltt", None, None, None)})
    with pytest.raises(ConfigError, match="applies to the ltt rules only"):
        load_config(overrides={"calibration": {"rule": "crc", "delta": 0.1}})
    assert calibration_overrides("crc", None, "none", None) == {"rule": "crc", "delta": None, "group": None}
    with pytest.raises(ConfigError, match="group"):
        load_config(overrides={"calibration": {"group": "question"}})


def _synthetic_pool(n_pool: int = 1200, groups: np.ndarray | None = None) -> tuple[dict, ResplitSpec]:
    """A synthetic pool in validity_pool's shape and a small spec over it (600 calibration queries, 12 re-splits)."""
    pool = make_pool(n_pool, LAMS, 3)
    target, budget = default_targets(pool.correct, pool.cost)
    arrays = {"score": pool.score, "risk": pool.risk, "proba": pool.proba, "cost": pool.cost, "correct": pool.correct,
              "groups": pool.benchmark if groups is None else groups, "lams": LAMS, "alphas": np.asarray(ALPHAS)}
    return arrays, ResplitSpec(n_calib=600, n_resplits=12, delta=0.1, target_accuracy=target, budget=budget,
                               crc_mean=False)


def test_each_run_draws_a_fresh_seed_stores_and_prints_it_and_seed_replays_it(home):
    from cr2_cli.render import console, print_guarantees
    from cr2_tasks.guarantees import validity_records

    pool, spec = _synthetic_pool()
    first, s1 = validity_records(pool, spec)
    second, s2 = validity_records(pool, spec)
    assert s1["seed"] != s2["seed"]  # fresh entropy: two runs, two streams
    value = [r["value"] for r in first if r["check_name"] == "mondrian_mean_risk"]
    assert value != [r["value"] for r in second if r["check_name"] == "mondrian_mean_risk"]
    again, s3 = validity_records(pool, spec, seed=s1["seed"])  # --seed replays the run, record for record
    assert s3["seed"] == s1["seed"] and pd.DataFrame(again).equals(pd.DataFrame(first))
    write_guarantees(home, first, "r-seed", "synthetic", "sim")
    with Warehouse(home, read_only=True) as wh:
        from cr2_warehouse.repository import guarantee_runs

        stored = wh.df("SELECT DISTINCT seed, stage FROM guarantees WHERE run_id = 'r-seed' AND stage = 'screening'")
        run = guarantee_runs(wh).set_index("run_id").loc["r-seed"]
    assert stored["seed"].tolist() == [s1["seed"]] and run["seed"] == s1["seed"]
    with console.capture() as cap:
        print_guarantees(home, "r-seed", "synthetic")
    assert f"--seed {s1['seed']}" in " ".join(cap.get().split())  # rich wraps lines anywhere


def test_a_flagged_family_is_rechecked_on_its_own_stream_with_more_resplits_and_that_verdict_is_reported(
        home, monkeypatch):
    """An injected flag (the screening verdict of Mondrian at α = 0.01 forced to "violation detected"): the run
    re-checks that family alone, with 5× the re-splits on the confirmatory stream, and reports the re-check's verdict
    with the screening one beside it."""
    import cr2.report.validity as validity
    from cr2.evaluation.guarantees import confirm_seed
    from cr2.evaluation.statistics import Verdict
    from cr2.evaluation.validity import VIOLATION, validity_verdict
    from cr2_cli.render import console, print_guarantees
    from cr2_tasks.guarantees import validity_records
    from cr2_warehouse.repository import guarantee_cells

    real = validity.flagged_families

    def injected(verdicts):
        v = verdicts.copy()
        hit = (v["rule"] == "mondrian-crc") & (v["alpha"] == 0.01)
        v["verdict"] = [Verdict(VIOLATION) if h else w for h, w in zip(hit, v["verdict"])]
        return real(v)

    monkeypatch.setattr(validity, "flagged_families", injected)
    pool, spec = _synthetic_pool()
    records, streams = validity_records(pool, spec, seed=7, confirm_factor=5)
    assert streams["n_flagged"] == 1 and streams["confirm_seed"] == confirm_seed(7) != 7
    df = pd.DataFrame(records)
    confirm = df[df["stage"] == "confirmatory"]
    assert set(zip(confirm["rule"], confirm["alpha"], confirm["check_name"])) == {
        ("mondrian-crc", 0.01, "mondrian_mean_risk")}  # the flagged family only
    assert (confirm["n_resplits"] == 60).all() and (confirm["seed"] == confirm_seed(7)).all()
    write_guarantees(home, records, "r-confirm", "synthetic", "sim")
    with Warehouse(home, read_only=True) as wh:
        cells = guarantee_cells(wh, "r-confirm")
    monkeypatch.setattr(validity, "flagged_families", real)
    v = validity.deployed_verdicts(cells).set_index(["rule", "check", "alpha"])
    row = v.loc[("mondrian-crc", "mondrian_mean_risk", 0.01)]
    mine = cells[(cells["stage"] == "confirmatory")]
    expected = validity_verdict(mine["value"], mine["se"], mine["bound"])
    assert row["stage"] == "confirmatory" and row["n_resplits"] == 60 and row["seed"] == confirm_seed(7)
    assert row["verdict"] == expected.verdict and row["p_holm"] == expected.p_holm  # the re-check's is THE verdict
    assert row["screening_n_resplits"] == 12 and row["screening_seed"] == 7 and isinstance(row["screening_verdict"], str)
    other = v.loc[("mondrian-crc", "mondrian_mean_risk", 0.005)]
    assert other["stage"] == "screening" and pd.isna(other["screening_verdict"])
    width = console.width
    console.width = 400
    try:
        with console.capture() as cap:
            print_guarantees(home, "r-confirm", "synthetic")
    finally:
        console.width = width
    text = cap.get()
    assert f"seed {confirm_seed(7)}" in text and "→ confirmatory: 60 re-splits" in text


def test_mondrian_over_one_group_is_reported_as_crc_without_a_verdict_of_its_own(home):
    from cr2.report.validity import ONE_GROUP_NOTE, deployed_display, deployed_verdicts
    from cr2_tasks.guarantees import validity_records

    pool, spec = _synthetic_pool(groups=np.full(1200, "mmlu-pro"))
    records, streams = validity_records(pool, spec, seed=5)
    v = deployed_verdicts(pd.DataFrame(records).query("check_name != 'price' and bound == bound"))
    mond = v[v["rule"] == "mondrian-crc"]
    assert len(mond) == len(ALPHAS) and mond["verdict"].isna().all() and (mond["note"] == ONE_GROUP_NOTE).all()
    assert streams["n_flagged"] == 0 or "mondrian-crc" not in {r["rule"] for r in records if r["stage"] == "confirmatory"}
    assert "one group: identical to crc" in deployed_display(v).to_string()
