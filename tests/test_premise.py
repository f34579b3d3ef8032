"""The premise map: cell pricing, one cell end to end in arrays, and the study flow on a slice."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cr2.config import load_config, load_state_distribution
from cr2.studies.premise import (BEST_SINGLE, CR2_RECAL, CR2_RETRAIN, PAPER_TARGETS, Cell, PremiseInputs, cell_costs,
                         certified_knn_name, certified_sweep, device_edge_ratio, run_cell, scaled_device)
from cr2.evaluation.synthetic import make_routing_set

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def _inputs(n: int = 400, seed: int = 0, p_hat: dict | None = None, teacher=None,
            p_hat_val: dict | None = None) -> PremiseInputs:
    rs = make_routing_set(n, seed)
    rng = np.random.default_rng(seed)
    split = np.array(["train", "dev", "val", "test"])[rng.choice(4, n, p=[0.55, 0.1, 0.15, 0.2])]
    proba = np.clip(rs.correct * 0.8 + 0.1, 0, 1) if teacher is None else teacher.predict_proba(rs.embedding)
    return PremiseInputs(query_id=rs.query_id, benchmark=np.array(["mmlu"] * n), split=split, embedding=rs.embedding,
                         correct=rs.correct, prompt_tokens=rng.integers(40, 600, n).astype(float),
                         output_tokens=rng.integers(1, 300, (n, 4)).astype(float), teacher_proba=np.asarray(proba, float),
                         model_ids=rs.model_ids, p_hat_test=p_hat or {}, p_hat_val=p_hat_val or {})


def test_cost_ratio_falls_monotonically_as_the_device_gets_faster():
    cfg = load_config(None)
    inputs = _inputs()
    dist = load_state_distribution("default")
    ratios, edge = [], []
    for f in SPEEDS:
        c, c_est, _ = cell_costs(inputs, Cell(f, dist), cfg)
        ratios.append(device_edge_ratio(c_est))
        edge.append(c_est[:, 1:])
    assert all(a > b for a, b in zip(ratios, ratios[1:])), ratios
    for e in edge[1:]:  # only the device is re-priced: every edge model's ĉ is unchanged
        np.testing.assert_allclose(e, edge[0], rtol=1e-12)
    assert ratios[0] > 1.0 > ratios[-1]  # the grid spans both sides of the premise on the default pool


def test_a_farther_channel_makes_the_device_relatively_cheaper():
    cfg = load_config(None)
    inputs = _inputs()
    near = device_edge_ratio(cell_costs(inputs, Cell(1.0, load_state_distribution("default")), cfg)[1])
    far = device_edge_ratio(cell_costs(inputs, Cell(1.0, load_state_distribution("premise-beyond-edge")), cfg)[1])
    assert far < near


def test_scaling_the_device_leaves_an_edge_model_on_the_same_platform_alone():
    cfg = load_config(None)
    models = [cfg.models[0], cfg.models[1].model_copy(update={"platform": cfg.models[0].platform}), *cfg.models[2:]]
    scaled, hw = scaled_device(models, cfg.hardware, 4.0)
    assert scaled[1].platform == cfg.models[0].platform  # the edge model keeps the unscaled platform
    dev, base = hw.platforms[scaled[0].platform], cfg.hardware.platforms[cfg.models[0].platform]
    assert dev.prefill_flops_per_s == 4 * base.prefill_flops_per_s
    assert dev.memory_bandwidth_bytes_per_s == 4 * base.memory_bandwidth_bytes_per_s


def test_one_cell_compares_every_method_with_intervals_and_identical_gates_differ_by_zero():
    from cr2.method.gate import fit_gate
    from cr2.routers import get_router
    from cr2.method.teacher import fit_teacher

    cfg = load_config(overrides={"grids": {"lam": {"min": 0.05, "max": 20.0, "n_log": 8, "extra": [0.0, 1.0]}},
                                 "splits": {"seed": 0}})
    draft = _inputs(600)
    sets = {s: make_routing_set(600, 0).subset(np.flatnonzero(draft.split == s)) for s in ("train", "dev", "val", "test")}
    teacher = fit_teacher(sets["train"], sets["dev"], cfg.teacher.model_copy(update={"epochs": 2}))
    knn = get_router("knn").fit(sets["train"], sets["dev"])
    inputs = _inputs(600, teacher=teacher, p_hat={"knn": knn.predict_proba(sets["test"])},
                     p_hat_val={"knn": knn.predict_proba(sets["val"])})
    proba = {s: inputs.teacher_proba[inputs.split == s] for s in ("train", "dev")}
    c, c_est, d = cell_costs(inputs, Cell(1.0, load_state_distribution("default")), cfg)
    from cr2.studies.premise import routing_sets

    cell_sets = routing_sets(inputs, c, c_est, d)
    gate = fit_gate(cell_sets["train"], cell_sets["dev"], proba["train"], proba["dev"],
                    cfg.gate.model_copy(update={"epochs": 2}))
    calls = []

    def refit_mlp(train, dev):
        calls.append(len(train))
        return get_router("mlp", epochs=2).fit(train, dev)

    out = run_cell(inputs, Cell(1.0, load_state_distribution("default")), cfg, teacher, gate, {"mlp": refit_mlp},
                   n_resamples=200, seed=0, retrain_epochs=1, retrained_gate=gate)
    assert calls == [int((inputs.split == "train").sum())]  # the cost-reading baseline is re-trained on the cell
    rows = out.rows
    pairs = {(r["method"], r["reference"]) for r in rows if r["metric"] == "mean_saving_pct"}
    assert {(CR2_RECAL, "knn"), (CR2_RETRAIN, "knn"), ("mlp", "knn"), (BEST_SINGLE, "knn"),
            (CR2_RETRAIN, BEST_SINGLE), (CR2_RECAL, CR2_RETRAIN)} <= pairs
    same = [r for r in rows if (r["method"], r["reference"]) == (CR2_RECAL, CR2_RETRAIN) and np.isfinite(r["estimate"])]
    assert same and all(r["estimate"] == r["lower"] == r["upper"] == 0.0 for r in same)  # the same gate: exactly 0
    for r in rows:
        if r["lower"] is not None and np.isfinite(r["estimate"]) and np.isfinite(r["lower"]):
            assert r["lower"] <= r["estimate"] + 1e-9 or r["n_resamples"] < 200
    assert {r["target"] for r in rows if r["metric"] == "local_rate"} == set(PAPER_TARGETS)
    risks = [r["estimate"] for r in rows if r["metric"] == "risk_max"]
    assert len(risks) == 3 and all(0.0 <= v <= 1.0 for v in risks)  # CR² re-calibrated, retrained, certified KNN
    assert 0.0 < out.summary["cost_ratio_est"] and out.summary["n_resamples"] == 200
    _check_certified_knn(rows, cfg.grids.default_alpha, out.summary["n_evaluable"])


def _check_certified_knn(rows, alpha: float, n_evaluable: int) -> None:
    """A cell holds KNN certified at CR²'s α and rule: its savings vs KNN, CR² against it, and its test risk at α."""
    from cr2.evaluation.metrics import risk_tolerance

    certified = "knn@crc"  # the default config's rule
    pairs = {(r["method"], r["reference"]) for r in rows if r["metric"] == "mean_saving_pct"}
    assert {(certified, "knn"), (CR2_RETRAIN, certified), (CR2_RECAL, certified)} <= pairs
    per_target = [r for r in rows if (r["method"], r["reference"]) == (CR2_RETRAIN, certified)
                  and r["metric"] == "saving_pct"]
    assert {round(r["target"], 2) for r in per_target} >= set(PAPER_TARGETS)
    risk = {r["metric"]: r["estimate"] for r in rows if r["method"] == certified and r["reference"] is None
            and r["target"] is None}
    assert {"risk_max", "risk_all_max", "risk_mean", "local_rate_max"} <= set(risk)
    assert all(np.isfinite(risk[m]) and 0.0 <= risk[m] <= 1.0 for m in ("risk_max", "risk_all_max", "risk_mean"))
    assert risk["risk_mean"] <= risk["risk_max"]
    if n_evaluable * alpha >= 1.0:  # enough test queries to resolve a risk of α: the mean over λ stays near it
        # one-sided, 3 binomial standard errors (cr2.evaluation.metrics.risk_tolerance): CRC bounds the expected risk by α
        assert risk["risk_mean"] <= alpha + risk_tolerance(alpha, n_evaluable)


def test_certified_sweep_is_certify_applied_per_lambda():
    """With an oracle-perfect p̂ the certified sweep's τ is calibrate_certified's and its choices are
    certified_decisions' at every λ; its test risk is the rule's risk of those acceptances."""
    from cr2.routers.certify import calibrate_certified, calibration_risks, certified_decisions, margin_score

    val, test = make_routing_set(400, 3), make_routing_set(300, 4)
    p_val, p_test = val.correct.astype(np.float64), test.correct.astype(np.float64)  # the oracle's p̂
    t_val, t_test = np.clip(val.correct * 0.8 + 0.1, 0, 1), np.clip(test.correct * 0.8 + 0.1, 0, 1)
    lams = np.array([0.0, 0.1, 0.5, 1.0, 2.0, 8.0])
    alpha, keep = 0.1, np.ones(len(test), dtype=bool)
    sweep = certified_sweep(p_val, p_test, val, test, t_val, t_test, lams, alpha, "crc", keep, delta=None,
                            dist_id="d", label_source="s")
    table = calibrate_certified(margin_score(p_val, val.decision_cost, lams),
                                calibration_risks("crc", val, lams, t_val), lams, [alpha], fingerprint="f",
                                dist_id="d", label_source="s", rule="crc")
    np.testing.assert_array_equal(sweep.tau, table.taus[:, 0])
    s_test = margin_score(p_test, test.decision_cost, lams)
    labels = calibration_risks("crc", test, lams, t_test)
    for j, lam in enumerate(lams):
        dec = certified_decisions(s_test[:, j], float(table.taus[j, 0]), p_test, test.decision_cost, float(lam))
        np.testing.assert_array_equal(sweep.chosen[:, j], dec.chosen)
        assert sweep.risk[j] == sweep.risk_all[j] == np.mean(dec.extra["gate_accept"] & labels[:, j])
    assert 0 < (sweep.chosen == 0).mean() < 1  # the gate both accepts and defers: the check is not vacuous


def test_inputs_keep_val_p_hat_through_a_file_and_read_files_without_it():
    base = _inputs(200)
    n_val, n_test = int((base.split == "val").sum()), int((base.split == "test").sum())
    inputs = _inputs(200, p_hat={"knn": np.full((n_test, 4), 0.5)}, p_hat_val={"knn": np.full((n_val, 4), 0.25)})
    back = PremiseInputs.from_arrays(inputs.arrays())
    np.testing.assert_array_equal(back.p_hat_val["knn"], inputs.p_hat_val["knn"])
    np.testing.assert_array_equal(back.p_hat_test["knn"], inputs.p_hat_test["knn"])
    assert certified_knn_name("crc", back) == "knn@crc"
    old = {k: v for k, v in inputs.arrays().items() if not k.startswith("p_hat_val:")}  # written before val p̂
    older = PremiseInputs.from_arrays(old)
    assert older.p_hat_val == {} and certified_knn_name("crc", older) is None  # the certified layer is skipped
    with pytest.raises(Exception, match="val p̂ of 'knn'"):
        _inputs(200, p_hat_val={"knn": np.full((0, 4), 0.5)})  # not one row per val query


# ---------------------------------------------------------------- the study flow on a slice (slow)
@pytest.fixture(scope="module")
def study(pipeline_slice, tmp_path_factory):
    """The study, run twice, on a copy of the run's slice warehouse (conftest.pipeline_slice)."""
    from cr2_flows.premise import run_premise
    from tests.conftest import copy_of

    home = copy_of(pipeline_slice["home"], tmp_path_factory.mktemp("premise") / "home")
    cfg = pipeline_slice["cfg"]
    args = (str(cfg), home, (1.0, 4.0), ("default", "premise-beyond-edge"), 1000, 0)
    first = run_premise(*args, retrain_epochs=2)
    second = run_premise(*args, retrain_epochs=2)
    return {"cfg": cfg, "home": home, "first": first, "second": second}


@pytest.mark.slow
@pytest.mark.flow
def test_study_on_a_slice_fills_a_2x2_grid_with_intervals_and_a_report(study):
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.premise import premise_view

    first, home = study["first"], study["home"]
    assert first["n_cells"] == 4 and first["n_cached"] == 0
    with Warehouse(home, read_only=True) as wh:
        cells = wh.df("SELECT * FROM premise_cells WHERE study_id = ?", [first["study_id"]])
        view = premise_view(wh, first["study_id"])
    assert len(cells) == 4 and set(cells["channel"]) == {"default", "premise-beyond-edge"}
    assert (cells["n_resamples"] == 1000).all()
    fast = cells.set_index(["speed_factor", "channel"])["cost_ratio_est"]
    assert fast[(4.0, "default")] < fast[(1.0, "default")]  # a faster device is relatively cheaper
    mean = view[view["mean_over_targets"]]
    for (f, ch), g in mean.groupby(["speed_factor", "channel"]):
        assert {("cr2-retrain", "knn"), ("cr2-recal", "knn"), ("cr2-recal", "cr2-retrain"),
                ("cr2-retrain", "best-single"), ("cr2-retrain", "knn@crc"), ("cr2-recal", "knn@crc"),
                ("knn@crc", "knn")} <= set(zip(g["method"], g["reference"]))
        assert g["verdict"].isin(["cheaper", "dearer", "no difference detected", "not reached"]).all()
    with Warehouse(home, read_only=True) as wh:
        results = wh.df("SELECT * FROM premise_results WHERE study_id = ?", [first["study_id"]])
    for (f, ch), g in results.groupby(["speed_factor", "channel"]):
        rows = [{k: (None if isinstance(v, float) and np.isnan(v) and k in ("reference", "target") else v)
                 for k, v in r.items()} for r in g.to_dict("records")]
        n_evaluable = int(cells.set_index(["speed_factor", "channel"]).loc[(f, ch), "n_evaluable"])
        _check_certified_knn(rows, float(cells["alpha"].iloc[0]), n_evaluable)
    base = mean[(mean["speed_factor"] == 1.0) & (mean["channel"] == "default") & (mean["method"] == "cr2-recal")
                & (mean["reference"] == "cr2-retrain")].iloc[0]
    assert base["saving_pct"] == 0.0 and base["verdict"] == "no difference detected"  # base cell: the same gate
    page = (home / "premise-report" / "index.html").read_text()
    assert page.count("data:image/png;base64") == 2 and "SIMULATED" in page and "v_premise" in page


@pytest.mark.slow
@pytest.mark.flow
def test_a_second_study_run_reuses_every_cell(study):
    from cr2_warehouse.db import Warehouse

    second = study["second"]
    assert second["study_id"] == study["first"]["study_id"]
    assert second["n_cached"] == second["n_cells"] == 4 and second["inputs"]["cached"]
    with Warehouse(study["home"], read_only=True) as wh:
        assert wh.scalar("SELECT count(*) FROM premise_cells") == 4  # re-written, not duplicated


@pytest.mark.slow
@pytest.mark.flow
def test_the_study_records_its_settings_and_the_results_page_shows_it(study):
    """premise_studies names how the study was run, and docs/results.md's premise section renders it with
    its command, every verdict word backed."""
    from cr2_cli.resultsdoc import render_sections
    from cr2_cli.resultsdoc.core import Doc, unbacked_words
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.premise import premise_studies

    sid = study["first"]["study_id"]
    with Warehouse(study["home"], read_only=True) as wh:
        st = premise_studies(wh)
    assert st["study_id"].tolist() == [sid] and int(st["n_cells"].iloc[0]) == 4
    row = st.iloc[0]
    assert row["retrain_from"] == "scratch" and pd.isna(row["retrain_epochs"]) and row["config"] == str(study["cfg"])
    page = render_sections(Doc({"default": study["home"]}), ("premise",), marked=True)
    assert unbacked_words(page) == [] and f"Study `{sid}`" in page
    assert f"cr2 study premise -c {study['cfg']} --home var --speeds 1,4 --channels default,premise-beyond-edge" in page
    assert "(trend test)" in page and "⸢" in page


@pytest.mark.slow
@pytest.mark.flow
def test_the_base_cell_prices_exactly_as_prepare_did(study):
    """cell_costs at speed ×1 under the config's states reproduces the warehouse's ĉ and c (one pricing, twice)."""
    from cr2_tasks.premise import inputs_path  # noqa: F401  (the study wrote its inputs there)
    from cr2_warehouse.db import Warehouse

    cfg = load_config(study["cfg"])
    with np.load(study["first"]["inputs"]["path"], allow_pickle=False) as data:
        inputs = PremiseInputs.from_arrays({k: data[k] for k in data.files})
    c, c_est, _ = cell_costs(inputs, Cell(1.0, cfg.channel.distribution), cfg)
    with Warehouse(study["home"], read_only=True) as wh:
        stored = wh.df("SELECT query_id, model_id, cost_norm, cost_est_norm FROM costs WHERE dist_id = ?",
                       [cfg.channel.distribution.dist_id])
    ids = [m.id for m in cfg.models]
    for col, mine in (("cost_norm", c), ("cost_est_norm", c_est)):
        wide = stored.pivot(index="query_id", columns="model_id", values=col).reindex(columns=ids)
        np.testing.assert_allclose(mine, wide.reindex(inputs.query_id).to_numpy(), rtol=1e-9)


def test_the_cheaper_retrain_fine_tunes_from_the_base_fits():
    """retrain_from 'base': the gate starts from the base gate (same shape required), MLP continues its fit."""
    from cr2.core.errors import ConfigError
    from cr2.method.gate import fit_gate
    from cr2.routers import get_router

    cfg = load_config(None)
    tr, dv = make_routing_set(300, 1), make_routing_set(80, 2)
    p_tr, p_dv = np.clip(tr.correct * 0.8 + 0.1, 0, 1), np.clip(dv.correct * 0.8 + 0.1, 0, 1)
    spec = cfg.gate.model_copy(update={"epochs": 1, "hidden": 32})
    base = fit_gate(tr, dv, p_tr, p_dv, spec)
    tuned = fit_gate(tr, dv, p_tr, p_dv, spec, init=base)
    fresh = fit_gate(tr, dv, p_tr, p_dv, spec)
    # one epoch from the base gate is not one epoch from a fresh initialisation
    assert any(not np.array_equal(a.detach().numpy(), b.detach().numpy())
               for a, b in zip(tuned.state_dict().values(), fresh.state_dict().values()))
    with pytest.raises(ConfigError, match="other hyperparameters"):
        fit_gate(tr, dv, p_tr, p_dv, spec.model_copy(update={"hidden": 16}), init=base)
    mlp = get_router("mlp", epochs=1).fit(tr, dv)
    before = mlp.predict_proba(dv).copy()
    assert mlp.fine_tune(tr, dv, 2) is mlp and len(mlp.history_) <= 2
    assert not np.array_equal(before, mlp.predict_proba(dv))


@pytest.mark.parametrize("args, message", [
    (["--speeds", "0,1"], "each > 0"),
    (["--speeds", "fast"], "comma-separated numbers"),
    (["--retrain-from", "scratc"], "did you mean 'scratch'"),
    (["--task-runner", "daks"], "did you mean 'dask'"),
])
def test_study_premise_rejects_bad_options_with_one_clear_error(args, message, tmp_path):
    from typer.testing import CliRunner

    from cr2_cli.main import app

    res = CliRunner().invoke(app, ["study", "premise", "--home", str(tmp_path), *args])
    assert res.exit_code == 2
    assert message in res.output and "Traceback" not in res.output


def test_studies_that_change_numbers_never_share_an_id():
    """Retraining mode and epochs, the grid, the bootstrap and its seed are all in the study id, so a from-scratch
    re-run never writes over a fine-tuned study (and each stays queryable)."""
    from cr2.config import load_config
    from cr2_tasks.premise import study_id

    cfg = load_config()
    base = {"teacher": {"fingerprint": "t"}, "gate": {"fingerprint": "g"}}
    bl = {"knn": {"fingerprint": "k"}}
    common = dict(speeds=(1.0, 2.0), channels=("default",), n_resamples=1000, seed=0)
    scratch = study_id(cfg, base, bl, **common, retrain_from="scratch", retrain_epochs=4)
    assert scratch == study_id(cfg, base, bl, **common, retrain_from="scratch", retrain_epochs=8)  # epochs unused
    ids = {scratch, study_id(cfg, base, bl, **common, retrain_from="base", retrain_epochs=4),
           study_id(cfg, base, bl, **common, retrain_from="base", retrain_epochs=8),
           study_id(cfg, base, bl, **{**common, "speeds": (1.0,)}, retrain_from="scratch", retrain_epochs=4),
           study_id(cfg, base, bl, **{**common, "seed": 1}, retrain_from="scratch", retrain_epochs=4),
           study_id(cfg, base, bl, **{**common, "n_resamples": 200}, retrain_from="scratch", retrain_epochs=4)}
    assert len(ids) == 6


def test_the_speed_trends_of_several_studies_are_one_holm_family():
    """Each study's Spearman permutation test of a monotone trend over its cells, Holm over the studies; a study
    with fewer than three cells with a saving has no test."""
    import numpy as np

    from cr2.evaluation.statistics import holm_adjust, spearman_permutation_test
    from cr2.studies.premise import speed_trends

    speed = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 8.0])
    up, flat = speed * 3.0, np.array([1.0, -1.0, 0.5, -0.5, 0.2, -0.2])
    few = (speed[:3], np.array([1.0, np.nan, np.nan]))
    got = speed_trends([(speed, up), (speed, flat), few], seed=0, n_permutations=2_000)
    want = [spearman_permutation_test(speed, y, np.random.default_rng(0), 2_000) for y in (up, flat)]
    assert [g.rho for g in got[:2]] == [w.rho for w in want] and [g.p_value for g in got[:2]] == [w.p_value for w in want]
    assert [g.p_holm for g in got[:2]] == list(holm_adjust(np.array([w.p_value for w in want])))
    assert np.isnan(got[2].p_value) and got[2].n == 1 and got[2].method == "–" and np.isnan(got[2].p_holm)
