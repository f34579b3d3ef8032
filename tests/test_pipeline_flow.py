"""End-to-end: the real `cr2 run` flow on a small slice in a temporary warehouse (slow: marked)."""
from __future__ import annotations

import contextlib

import pandas as pd
import pytest

from tests.conftest import copy_of
from cr2_warehouse.db import Warehouse, relation

pytestmark = [pytest.mark.flow, pytest.mark.slow]

# A variant `cr2 run` of the slice (another calibration group, another channel) evaluates at the tests' small B: the
# slice's first run (conftest.pipeline_slice) keeps the default B = 10,000, the one end-to-end path that runs it.
LIGHT_EVALUATION = "evaluation: {n_resplits: 10, bootstrap: {n_resamples: 200, n_resamples_compare: 1000}}\n"


@pytest.fixture(scope="module")
def pipeline(pipeline_slice, tmp_path_factory):
    """The run's slice warehouse, copied: these tests re-run, re-calibrate and re-deploy in it."""
    root = tmp_path_factory.mktemp("pipeline")
    home = copy_of(pipeline_slice["home"], root / "home")
    return {"cfg": pipeline_slice["cfg"], "home": home, "first": pipeline_slice["first"], "root": root}


def test_first_run_fills_every_stage(pipeline):
    first, home = pipeline["first"], pipeline["home"]
    assert not first["ingest"]["cached"] and not first["train"]["cached"]
    with Warehouse(home, read_only=True) as wh:
        n = wh.count("queries")
        assert n > 200
        assert wh.count("embeddings") == n and wh.count("splits") == n and wh.count("states") == n
        assert wh.count("labels") == 4 * n and wh.count("costs") == 4 * n
        # c_ref ≡ 1 for the reference model, on every row
        assert wh.scalar("SELECT max(abs(cost_norm - 1)) FROM costs WHERE model_id = 'qwen3-14b'") < 1e-9
        assert wh.scalar("SELECT count(DISTINCT version) FROM thresholds WHERE router = 'cr2'") == 1
        # the certify stage: one table per certified router <router>@<rule> (CR² by its gate, each baseline that
        # predicts p̂; rules crc, crc-oracle, crc-avoidable)
        certified = set(wh.df("SELECT DISTINCT router FROM thresholds WHERE router <> 'cr2'")["router"])
        assert certified == {f"{r}@{rule}" for r in ("cr2", "knn", "mlp", "embedllm", "llmrank", "llmrank-bench")
                             for rule in ("crc", "crc-oracle", "crc-avoidable")}
        ops = wh.df("SELECT * FROM operating_points WHERE method = 'cr2' AND benchmark = 'all'")
    assert len(ops) == 10 * 5 and ops["labels_simulated"].all()
    zero = ops[ops["lam"] == 0.0]
    assert (zero["local_rate"] == 0.0).all()  # λ = 0, the accuracy-only end: CR² defers everything
    assert ((ops["accuracy"] >= 0) & (ops["accuracy"] <= 1)).all()
    assert first["train"]["teacher"]["params"] == 398_340 and first["train"]["gate"]["params"] == 104_706
    routers = first["baselines"]["routers"]
    assert set(routers) == {"always-qwen3-1.7b", "always-qwen3-4b", "always-qwen3-8b", "always-qwen3-14b", "knn", "mlp",
                            "embedllm", "llmrank", "llmrank-bench"}
    assert routers["embedllm"]["params"] == 90_714
    with Warehouse(home, read_only=True) as wh:
        base = wh.df("SELECT * FROM operating_points WHERE method = 'knn' AND benchmark = 'all'")
        always = wh.df("SELECT * FROM operating_points WHERE method = 'always-qwen3-1.7b' AND benchmark = 'all'")
    from cr2.config import load_config

    # one λ sweep for every method: the baselines on exactly CR²'s grid, λ = 0 included
    assert sorted(base["lam"]) == sorted(set(ops["lam"])) == load_config(pipeline["cfg"]).grids.lam.values()
    assert base["alpha"].isna().all()
    assert (always["local_rate"] == 1.0).all()  # Always-1.7B answers everything on the device


def test_second_run_with_nothing_changed_does_no_work(pipeline):
    from cr2_flows.run import run_flow

    again = run_flow(config_path=str(pipeline["cfg"]), home=str(pipeline["home"]))
    assert again["ingest"]["cached"]
    assert all(step["cached"] for step in again["prepare"].values())
    assert again["train"]["cached"] and again["calibrate"]["cached"] and again["evaluate"]["cached"]
    assert again["baselines"]["cached"] and again["intervals"]["cached"] and again["certify"]["cached"]
    assert again["equal_risk"]["cached"]
    assert again["calibrate"]["version"] == pipeline["first"]["calibrate"]["version"]


def test_new_state_distribution_recomputes_only_states_and_costs(pipeline):
    from cr2_flows.prepare import prepare_flow

    cfg = pipeline["root"] / "far.yaml"
    cfg.write_text(pipeline["cfg"].read_text() + "channel: {distribution: far-rician}\n")
    out = prepare_flow(config_path=str(cfg), home=str(pipeline["home"]))
    assert {k for k, v in out.items() if not v["cached"]} == {"states", "costs"}
    with Warehouse(pipeline["home"], read_only=True) as wh:
        assert wh.scalar("SELECT count(DISTINCT dist_id) FROM states") == 2
        far = wh.scalar("SELECT avg(distance_m) FROM states WHERE dist_id LIKE 'far-rician%'")
    assert 100 <= far <= 300


def test_route_one_query_with_the_deployed_artefacts(pipeline):
    from cr2.config import load_config
    from cr2.core.errors import UncalibratedOperatingPointError
    from cr2_cli.online import route_query

    cfg = load_config(pipeline["cfg"])
    out = route_query(cfg, pipeline["home"], "What is 2 + 2?", ["3", "4", "5", "6"], lam=2.0, alpha=0.01, distance_m=80.0)
    assert out["distance_m"] == 80.0 and len(out["models"]) == 4
    assert out["accept_local"] == (out["score"] >= out["tau"])
    assert out["accept_local"] or out["chosen_model"] != "qwen3-1.7b"
    ref = [m for m in out["models"] if m["model_id"] == "qwen3-14b"][0]
    assert abs(ref["cost_norm"] - 1.0) < 1e-9
    with pytest.raises(UncalibratedOperatingPointError, match=r"λ=0.37 is not on the calibrated grid"):
        route_query(cfg, pipeline["home"], "What is 2 + 2?", None, lam=0.37, alpha=0.01)
    on_demand = cfg.model_copy(update={"routing": cfg.routing.model_copy(update={"on_demand_calibration": True})})
    out = route_query(on_demand, pipeline["home"], "What is 2 + 2?", None, lam=0.37, alpha=0.01, distance_m=80.0)
    assert out["lam"] == 0.37


def test_cli_reads_the_warehouse(pipeline):
    from typer.testing import CliRunner

    from cr2_cli.main import app

    runner = CliRunner()
    home = str(pipeline["home"])
    res = runner.invoke(app, ["sql", "SELECT count(*) AS n FROM queries", "--home", home])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["sql", "DELETE FROM queries", "--home", home])
    assert res.exit_code == 2 and "statements are not allowed" in res.output  # read-only, one read query only
    res = runner.invoke(app, ["labels", "list", "--home", home])
    assert res.exit_code == 0 and "simulated-irt-v" in res.output
    res = runner.invoke(app, ["route", "Is the sky blue?", "--lam", "2", "--distance-m", "60", "-c", str(pipeline["cfg"]),
                              "--home", home])
    assert res.exit_code == 0, res.output
    assert "ACCEPT" in res.output or "DEFER" in res.output


VIEW_COLUMNS = {
    "v_pareto": {"run_id", "method", "lam", "alpha", "accuracy", "cost", "on_frontier"},
    "v_fixed_accuracy": {"run_id", "method", "target", "cost", "knn_cost", "saving_vs_knn_pct"},
    "v_calibration_rules": {"run_id", "rule", "lam", "alpha", "accuracy", "cost", "risk"},
    "v_risk_vs_alpha": {"run_id", "lam", "alpha", "risk", "risk_mean", "risk_q05", "risk_q95", "risk_se"},
    "v_local_rate": {"run_id", "method", "lam", "alpha", "local_rate"},
    "v_variants": {"run_id", "method", "lam", "alpha", "accuracy", "cost"},
    "v_gate_errors": {"run_id", "lam", "alpha", "false_accept", "false_defer"},
    "v_benchmark_at_cost": {"run_id", "method", "target", "reachable", "benchmark", "accuracy"},
    "v_router_complexity": {"kind", "params", "flops"},
    "v_ablation": {"run_id", "method", "alpha", "lam", "cost", "accuracy", "local_rate"},
    "v_recalibration": {"run_id", "threshold_version", "threshold_dist_id", "test_dist_id", "lam", "alpha", "risk"},
}


@pytest.mark.parametrize("view", sorted(VIEW_COLUMNS))
def test_each_view_returns_its_declared_columns_with_rows(pipeline, view):
    with Warehouse(pipeline["home"], read_only=True) as wh:
        df = wh.df(f"SELECT * FROM {relation(view)}")
    assert VIEW_COLUMNS[view] <= set(df.columns)
    assert len(df) > 0, f"{view} is empty after a full run"


def test_views_agree_with_the_metrics(pipeline):
    with Warehouse(pipeline["home"], read_only=True) as wh:
        variants = set(wh.df("SELECT DISTINCT method FROM v_variants")["method"])
        rules = set(wh.df("SELECT DISTINCT rule FROM v_calibration_rules")["rule"])
        bands = wh.df("SELECT * FROM v_risk_vs_alpha")
        ablated = set(wh.df("SELECT DISTINCT method FROM v_ablation")["method"])
    assert {"ablation:sign-only", "ablation:sign+margin", "ablation:w_mono=0.5", "ablation:w_mono=2"} <= ablated
    assert variants == {"cr2", "cr2-inclusive", "cr2-fallback", "full-info"}
    assert rules == {"cr2", "cr2-empirical", "cr2-fixed-0.5"}
    assert {"cr2-rate-0.1", "cr2-rate-0.2"} <= ablated  # the paper's fixed-local-rate rows
    assert (bands.loc[bands["lam"] == 0, "risk"] == 0).all()  # λ = 0: CR² defers everything, no bands there
    bands = bands[bands["lam"] > 0]
    assert (bands["risk_q05"] <= bands["risk_mean"] + 1e-12).all() and (bands["risk_mean"] <= bands["risk_q95"] + 1e-12).all()


def test_report_is_self_contained_and_has_every_figure(pipeline):
    rep = pipeline["first"]["report"]
    page = open(rep["path"], encoding="utf-8").read()
    assert set(rep["figures"]) == {"pareto_full", "pareto_zoom", "fixed_accuracy", "saving_intervals", "calibration_rules",
                                   "risk_control", "local_selection", "variants", "gate_errors", "realised_risk"}
    assert {"ablation", "per_benchmark_by_cost", "mean_saving", "operating_points_ci"} <= set(rep["tables"])
    assert "realised_risk" in rep["tables"]  # teacher-referenced vs realised risks, per rule
    for key in rep["figures"] + rep["tables"]:
        assert f'id="{key}"' in page
    assert page.count("data:image/png;base64,") == len(rep["figures"])
    assert "SIMULATED LABELS" in page and "http://" not in page and "https://" not in page
    from pathlib import Path

    tables = Path(rep["path"]).parent / "tables"
    for key in rep["tables"]:
        assert (tables / f"{key}.csv").is_file() and (tables / f"{key}.tex").is_file()


def test_recalibrate_on_a_new_state_distribution_keeps_the_gate(pipeline):
    from cr2_flows.recalibrate import recalibrate_flow

    out = recalibrate_flow(states="far-rician", config_path=str(pipeline["cfg"]), home=str(pipeline["home"]))
    first = pipeline["first"]
    assert out["new_dist_id"].startswith("far-rician@") and out["old_dist_id"] != out["new_dist_id"]
    assert out["new_thresholds"]["gate_fingerprint"] == first["train"]["gate"]["fingerprint"]
    assert out["new_thresholds"]["dist_id"] == out["new_dist_id"]
    assert out["new_thresholds"]["version"] > out["old_thresholds"]["version"]
    assert out["before"]["run_id"] != out["after"]["run_id"]
    with Warehouse(pipeline["home"], read_only=True) as wh:
        versions = wh.df("SELECT version, any_value(dist_id) AS dist_id FROM thresholds GROUP BY version ORDER BY version")
        runs = wh.df("SELECT run_id, dist_id, threshold_version FROM eval_runs")
    assert set(versions["dist_id"]) == {out["old_dist_id"], out["new_dist_id"]}  # the old table stays queryable
    assert set(runs.loc[runs["run_id"] == out["before"]["run_id"], "threshold_version"]) == {out["old_thresholds"]["version"]}
    with Warehouse(pipeline["home"], read_only=True) as wh:
        both = wh.df("SELECT DISTINCT run_id, threshold_dist_id, test_dist_id FROM v_recalibration WHERE run_id IN (?, ?)",
                     [out["before"]["run_id"], out["after"]["run_id"]]).set_index("run_id")
    assert both.loc[out["before"]["run_id"], "threshold_dist_id"] == out["old_dist_id"]
    assert (both["test_dist_id"] == out["new_dist_id"]).all()
    # operator speed by default: no Monte-Carlo bands, no baselines in the before/after runs
    with Warehouse(pipeline["home"], read_only=True) as wh:
        methods = set(wh.df("SELECT DISTINCT method FROM metrics WHERE run_id = ?", [out["after"]["run_id"]])["method"])
    assert "cr2" in methods and "cr2-resplit" not in methods and "knn" not in methods
    import json

    assert out["artifacts"] == ["cr2-recalibrate-summary", "cr2-drift", "cr2-recalibration"]
    arts = _artifacts_of_run_with("cr2-recalibrate-summary", out["new_dist_id"])
    assert "SIMULATED LABELS" in arts["cr2-recalibrate-summary"].data
    drift = json.loads(arts["cr2-drift"].data)  # cr2.report.tables.DriftTest's cells
    assert {r["feature"] for r in drift} == {"distance_m", "rate_ul_bps", "rate_dl_bps"}
    table = json.loads(arts["cr2-recalibration"].data)  # cr2.report.tables.Recalibration's cells
    assert table and {"risk before", "risk after", "cost before", "cost after"} <= set(table[0])


def _artifacts_of_run_with(key: str, text: str) -> dict:
    """Every artifact of the flow run whose `key` artifact mentions `text`, read back through the Prefect API."""
    from prefect import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId, ArtifactFilterKey

    with get_client(sync_client=True) as c:
        marked = [a for a in c.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
                  if text in str(a.data)]
        assert marked, f"no '{key}' artifact mentions {text}"
        arts = c.read_artifacts(artifact_filter=ArtifactFilter(
            flow_run_id=ArtifactFilterFlowRunId(any_=[marked[0].flow_run_id])))
    return {a.key: a for a in arts}


def test_run_publishes_its_results_as_prefect_artifacts(pipeline):
    import json

    first = pipeline["first"]
    assert first["artifacts"] == ["cr2-summary", "cr2-operating-points", "cr2-router-comparison", "cr2-deploy-decision",
                                  "cr2-report"]
    arts = _artifacts_of_run_with("cr2-summary", first["evaluate"]["run_id"])
    assert set(first["artifacts"]) <= set(arts)
    assert arts["cr2-summary"].type == "markdown" and "SIMULATED LABELS" in arts["cr2-summary"].data
    ops = json.loads(arts["cr2-operating-points"].data)
    with Warehouse(pipeline["home"], read_only=True) as wh:
        n = wh.scalar("SELECT count(*) FROM operating_points WHERE run_id = ? AND method = 'cr2' AND benchmark = 'all' "
                      "AND alpha = 0.01", [first["evaluate"]["run_id"]])
        risk2 = wh.scalar("SELECT risk FROM operating_points WHERE run_id = ? AND method = 'cr2' AND benchmark = 'all' "
                          "AND alpha = 0.01 AND lam = 2.0", [first["evaluate"]["run_id"]])
    # the cells of cr2.report.tables.CR2OperatingPoints / RoutersAtLam, as `cr2 run` prints them
    assert len(ops) == n and abs(float(next(r["teacher risk"] for r in ops if r["λ"] == "2")) - risk2) < 1e-4
    methods = {r["router"] for r in json.loads(arts["cr2-router-comparison"].data)}
    assert {"CR²", "KNN", "MLP", "always-qwen3-14b"} <= methods
    assert arts["cr2-report"].type == "markdown" and first["report"]["path"].split("/")[-1] in arts["cr2-report"].data


def test_export_gate_for_the_device_and_drift_check(pipeline, tmp_path):
    import numpy as np
    from typer.testing import CliRunner

    from cr2.method.gate import load_gate
    from cr2.deploy.runtime import DeviceGate
    from cr2_cli.main import app

    runner = CliRunner()
    home = str(pipeline["home"])
    res = runner.invoke(app, ["export-gate", str(tmp_path / "device"), "--home", home])
    assert res.exit_code == 0, res.output
    device = DeviceGate.load(tmp_path / "device")
    gate = load_gate(pipeline["first"]["train"]["gate"]["path"])
    with Warehouse(pipeline["home"], read_only=True) as wh:
        emb = np.stack(wh.df("SELECT vector FROM embeddings ORDER BY query_id LIMIT 64")["vector"]).astype(np.float32)
    assert np.array_equal(device.score(emb, 2.0), gate.score(emb, 2.0))
    with Warehouse(pipeline["home"], read_only=True) as wh:  # the deployed table's distribution (recalibrated or not)
        deployed = wh.scalar("SELECT dist_id FROM thresholds ORDER BY version DESC LIMIT 1")
    other = "default" if deployed.startswith("far-rician") else "far-rician"
    res = runner.invoke(app, ["drift", "--states", other, "--n", "400", "--home", home, "-c", str(pipeline["cfg"])])
    assert res.exit_code == 0, res.output
    assert "DRIFT" in res.output and "recalibrate" in res.output


def test_serve_routes_over_http_and_forwards_openai_chat(pipeline):
    import contextlib

    import httpx
    import openai

    from cr2.config import load_config
    from cr2_cli.serve import create_app
    from tests.serve_helpers import fake_model_endpoint, running

    cfg = load_config(pipeline["cfg"])
    models = [m.id for m in cfg.models]
    with contextlib.ExitStack() as stack:
        endpoints = {m: stack.enter_context(running(fake_model_endpoint(m))) + "/v1" for m in models}
        cfg = cfg.model_copy(update={"serving": cfg.serving.model_copy(update={"endpoints": endpoints})})
        base = stack.enter_context(running(create_app(cfg, str(pipeline["home"]))))
        with httpx.Client(base_url=base, timeout=60) as http:
            health = http.get("/health").json()
            assert health["status"] == "ok" and health["models"] == models
            ok = http.post("/route", json={"query": "What is 2 + 2?", "lam": 2.0, "distance_m": 80}).json()
            tau = float(ok["tau"])  # "inf" / "-inf" when every / no point can be accepted
            assert ok["chosen_model"] in models and ok["accept_local"] == (ok["score"] >= tau)
            bad = http.post("/route", json={"query": "", "lam": -1})
            assert bad.status_code == 422 and "lam" in bad.text and "query" in bad.text
            off = http.post("/route", json={"query": "What is 2 + 2?", "lam": 0.37})
            assert off.status_code == 400 and "not on the calibrated grid" in off.json()["detail"]
        client = openai.OpenAI(base_url=base + "/v1", api_key="unused")
        raw = client.chat.completions.with_raw_response.create(
            model="cr2", messages=[{"role": "user", "content": "Name a prime number."}], extra_body={"cr2_lam": 2.0})
        decision = raw.headers["x-cr2-decision"]
        chosen = decision.split("model=")[1].split(";")[0]
        answer = raw.parse()
        assert answer.choices[0].message.content == f"answer from {chosen}"
        assert answer.model == next(m.hf_name for m in cfg.models if m.id == chosen)  # the endpoint's model name
        with pytest.raises(openai.UnprocessableEntityError):
            client.chat.completions.create(model="cr2", messages=[{"role": "system", "content": "no user turn"}])


# ---------------------------------------------------------------- guarantees users can choose (runs last:
# it calibrates a new, Mondrian LTT threshold version, which becomes the deployed one)
def test_ltt_mondrian_calibration_target_routing_and_validity_run(pipeline, tmp_path):
    import json

    import numpy as np
    from typer.testing import CliRunner

    from cr2.config import load_config
    from cr2.crc import GroupedThresholdTable
    from cr2.core.errors import TargetInfeasibleError
    from cr2.deploy.runtime import DeviceThresholds
    from cr2_cli.main import app
    from cr2_flows.calibrate import calibrate_flow
    from cr2_warehouse.repository import load_threshold_table
    from cr2_tasks.guarantees import check_guarantees
    from cr2_cli.online import load_online_router
    from cr2_cli.online import route_by_target

    cfg = load_config(pipeline["cfg"])
    home = str(pipeline["home"])
    out = calibrate_flow(config_path=str(pipeline["cfg"]), home=home,
                         calibration={"rule": "ltt", "delta": 0.2, "group": "benchmark", "small_group": "defer"})
    with Warehouse(pipeline["home"], read_only=True) as wh:
        rows = wh.df("SELECT * FROM thresholds WHERE version = ?", [out["version"]])
        table = load_threshold_table(wh, out["version"])
    assert set(rows["rule"]) == {"ltt"} and set(rows["delta"]) == {0.2}
    assert set(rows["group"]) == {f"benchmark={b}" for b in cfg.benchmarks}
    assert isinstance(table, GroupedThresholdTable) and table.delta == 0.2
    router = load_online_router(cfg, home)
    r = router.route("What is 2 + 2?", ["3", "4", "5", "6"], 2.0, 0.05, 80.0, benchmark="gpqa")
    assert r["tau"] == table.tau(2.0, 0.05, table.gate_fingerprint, "gpqa")
    try:  # a tiny val split: either a certified choice or a clear refusal
        t = route_by_target(cfg, home, "What is 2 + 2?", None, 0.3, None, 80.0, router=router)
        c = t["target_choice"]
        assert c["mode"] == "accuracy" and c["accuracy"] >= 0.3 and t["tau"] == c["tau"] and t["lam"] == c["lam"]
    except TargetInfeasibleError as exc:
        assert "Relax the target" in str(exc)
    res = CliRunner().invoke(app, ["export-gate", str(tmp_path / "dev"), "--home", home])
    assert res.exit_code == 0, res.output
    dev = DeviceThresholds.from_json(json.loads((tmp_path / "dev" / "thresholds.json").read_text()))
    assert dev.group_by == "benchmark" and dev.delta == 0.2 and np.isposinf(dev.taus).all()
    summary = check_guarantees.fn(cfg, home, n_resplits=10)
    with Warehouse(pipeline["home"], read_only=True) as wh:
        v = wh.df("SELECT * FROM v_guarantees WHERE run_id = ?", [summary["run_id"]])
    assert {"ltt_any_violation", "mondrian_mean_risk", "target_miss"} <= set(v["check_name"])
    assert "crc_mean_risk" not in set(v["check_name"])  # the certify stage's re-splits are the crc rules' one source


# ---------------------------------------------------------------- realised risks and the rules on real labels
def test_realised_risks_rules_on_real_labels_and_the_risk_name_everywhere(pipeline, tmp_path):
    """Every method's operating points carry oracle disagreement / avoidable error / local accuracy; the new rules
    are evaluated (v_realised_risk), calibrate a deployable table, and route / serve / export / `cr2 results` /
    the report name the risk they control; the validity run checks them."""
    import json

    from typer.testing import CliRunner

    from cr2.config import load_config
    from cr2_cli.main import app
    from cr2_cli.online import load_online_router
    from cr2_cli.render import risk_line
    from cr2_cli.results import results_markdown
    from cr2_flows.calibrate import calibrate_flow
    from cr2_tasks.guarantees import check_guarantees

    cfg = load_config(pipeline["cfg"])
    home = str(pipeline["home"])
    run_id = pipeline["first"]["evaluate"]["run_id"]
    with Warehouse(pipeline["home"], read_only=True) as wh:
        ops = wh.df("SELECT * FROM operating_points WHERE run_id = ? AND benchmark = 'all'", [run_id])
        rr = wh.df("SELECT * FROM v_realised_risk WHERE run_id = ?", [run_id])
    for col in ("oracle_risk", "oracle_risk_all", "avoidable_risk", "avoidable_risk_all", "local_accuracy"):
        assert ops[col].notna().any(), col
    knn = ops[ops.method == "knn"]
    assert knn["oracle_risk_all"].notna().all() and (knn["avoidable_risk_all"] <= knn["local_rate"] + 1e-12).all()
    assert {"crc", "ltt", "crc-oracle", "crc-avoidable", "ltt-oracle", "ltt-avoidable"} <= set(rr["rule"])
    assert (rr[rr.lam == 0.0][["teacher_risk", "oracle_risk", "avoidable_risk"]] == 0).all().all()  # λ = 0 defers
    md = results_markdown(home, cfg.grids.default_alpha)
    assert "v_realised_risk" in md and "crc-avoidable" in md and "SIMULATED" in md

    out = calibrate_flow(config_path=str(pipeline["cfg"]), home=home, calibration={"rule": "crc-avoidable", "delta": None,
                                                                                   "group": None})
    with Warehouse(pipeline["home"], read_only=True) as wh:
        assert set(wh.df("SELECT rule FROM thresholds WHERE version = ?", [out["version"]])["rule"]) == {"crc-avoidable"}
    router = load_online_router(cfg, home)
    r = router.route("What is 2 + 2?", ["3", "4", "5", "6"], 2.0, 0.05, 80.0)
    assert (r["rule"], r["risk"], r["risk_display"]) == ("crc-avoidable", "avoidable-error", "avoidable error")
    assert router.describe()["risk"] == "avoidable-error"
    assert "avoidable error" in risk_line(r, 0.05)
    res = CliRunner().invoke(app, ["export-gate", str(tmp_path / "dev"), "--home", home])
    assert res.exit_code == 0, res.output
    exported = json.loads((tmp_path / "dev" / "thresholds.json").read_text())
    assert exported["rule"] == "crc-avoidable" and exported["risk"] == "avoidable-error"
    assert json.loads((tmp_path / "dev" / "manifest.json").read_text())["thresholds"]["risk"] == "avoidable-error"
    summary = check_guarantees.fn(cfg, home, n_resplits=10)
    with Warehouse(pipeline["home"], read_only=True) as wh:
        v = wh.df("SELECT * FROM v_guarantees WHERE run_id = ?", [summary["run_id"]])
    assert {"ltt-oracle", "ltt-avoidable"} <= set(v["rule"])  # crc-oracle / crc-avoidable: the certify stage's


# ---------------------------------------------------------------- a Mondrian `cr2 run`
def test_mondrian_cr2_run_evaluates_each_group_with_its_own_thresholds(pipeline):
    """`cr2 run` with calibration.group evaluates the Mondrian table instead of refusing it: CR² routes each test query
    with its own group's τ*(λ; α), and its metrics come pooled ('all') and per group (here: per benchmark)."""
    import numpy as np

    from cr2.config import load_config
    from cr2.crc import GroupedThresholdTable
    from cr2.deploy.deployment import deployed_router
    from cr2_flows.run import run_flow
    from cr2_warehouse.deployment import read_deployment

    path = pipeline["root"] / "mondrian.yaml"
    text = pipeline["cfg"].read_text().replace("grids: {lam: {", "grids: {alpha: [0.05, 0.2, 0.3], default_alpha: 0.2, lam: {")
    path.write_text(text + "calibration: {group: benchmark, small_group: defer}\n" + LIGHT_EVALUATION)
    out = run_flow(config_path=str(path), home=str(pipeline["home"]))
    assert out["train"]["cached"] and not out["calibrate"]["cached"] and not out["evaluate"]["cached"]
    cfg = load_config(path)
    deployment = read_deployment(pipeline["home"], cfg, out["calibrate"]["version"])
    table = deployment.table
    assert isinstance(table, GroupedThresholdTable) and table.group_by == "benchmark" and len(table.groups) == 4
    run_id, lam, alpha = out["evaluate"]["run_id"], 2.0, 0.3
    with Warehouse(pipeline["home"], read_only=True) as wh:
        dec = wh.df("SELECT query_id, gate_accept FROM decisions WHERE run_id = ? AND method = 'cr2' AND lam = ? "
                    "AND abs(alpha - ?) < 1e-12", [run_id, lam, alpha])
        ops = wh.df("SELECT benchmark, local_rate FROM operating_points WHERE run_id = ? AND method = 'cr2' AND lam = ? "
                    "AND abs(alpha - ?) < 1e-12", [run_id, lam, alpha])
    test = deployment.load_sets(("test",))["test"]
    router = deployed_router(cfg, deployment)
    taus = table.taus_for(test.benchmark, lam, alpha, table.gate_fingerprint)
    assert len(set(taus.tolist())) > 1  # the groups' thresholds differ: a pooled τ could not give these decisions
    expected = router.scores(test.embedding, lam).astype(np.float64) >= taus
    assert dec["query_id"].is_unique and len(dec) == len(test)
    got = dec.set_index("query_id").loc[test.query_id, "gate_accept"].to_numpy(dtype=bool)
    np.testing.assert_array_equal(got, expected)
    assert set(ops["benchmark"]) == {"all", *table.groups}  # pooled and per-group metrics
    from pathlib import Path

    assert Path(out["report"]["path"]).is_file() and "risk_control" in out["report"]["figures"]


def test_mondrian_per_subset_cr2_run_routes_each_query_at_its_subsets_threshold(pipeline):
    """calibration.group: subset (groups a RoutingSet does not carry) is evaluated too: the evaluate task reads each
    test query's subset from the warehouse and CR² routes it at that subset's τ*(λ; α); groups too small for an α
    defer (small_group: defer)."""
    import numpy as np

    from cr2.config import load_config
    from cr2.crc import GroupedThresholdTable
    from cr2.deploy.deployment import deployed_router
    from cr2_flows.run import run_flow
    from cr2_warehouse.deployment import read_deployment
    from cr2_warehouse.routing_data import query_groups

    path = pipeline["root"] / "mondrian-subset.yaml"
    text = pipeline["cfg"].read_text().replace("grids: {lam: {", "grids: {alpha: [0.05, 0.2, 0.3], default_alpha: 0.2, lam: {")
    path.write_text(text + "calibration: {group: subset, small_group: defer}\n" + LIGHT_EVALUATION)
    out = run_flow(config_path=str(path), home=str(pipeline["home"]))
    cfg = load_config(path)
    deployment = read_deployment(pipeline["home"], cfg, out["calibrate"]["version"])
    table = deployment.table
    assert isinstance(table, GroupedThresholdTable) and table.group_by == "subset"
    test = deployment.load_sets(("test",))["test"]
    run_id, lam, alpha = out["evaluate"]["run_id"], 2.0, 0.3
    with Warehouse(pipeline["home"], read_only=True) as wh:
        dec = wh.df("SELECT query_id, gate_accept FROM decisions WHERE run_id = ? AND method = 'cr2' AND lam = ? "
                    "AND abs(alpha - ?) < 1e-12", [run_id, lam, alpha])
        subsets = query_groups(wh, test.query_id, "subset")
    taus = table.taus_for(subsets, lam, alpha, table.gate_fingerprint)
    expected = deployed_router(cfg, deployment).scores(test.embedding, lam).astype(np.float64) >= taus
    got = dec.set_index("query_id").loc[test.query_id, "gate_accept"].to_numpy(dtype=bool)
    np.testing.assert_array_equal(got, expected)


def test_recalibrate_at_operator_speed_gives_the_full_evaluations_numbers(pipeline):
    """The fast path (CR² alone, scores from the per-gate cache, one task) writes the same thresholds
    and the same CR² metrics and decisions as the full evaluation of each table (the slow path, --baselines)."""
    from cr2_flows.recalibrate import recalibrate_flow

    kw = {"states": "far-rician", "config_path": str(pipeline["cfg"]), "home": str(pipeline["home"])}
    fast = recalibrate_flow(**kw)
    slow = recalibrate_flow(**kw, baselines=True)
    assert fast["new_thresholds"]["version"] == slow["new_thresholds"]["version"]  # the same table, not re-made
    with Warehouse(pipeline["home"], read_only=True) as wh:
        for phase in ("before", "after"):
            a, b = (fast[phase]["run_id"], slow[phase]["run_id"])
            assert a != b
            got = wh.df("SELECT method, lam, alpha, benchmark, metric, value FROM metrics WHERE run_id = ? ORDER BY ALL", [a])
            want = wh.df("SELECT method, lam, alpha, benchmark, metric, value FROM metrics WHERE run_id = ? "
                         "AND method = 'cr2' ORDER BY ALL", [b])
            assert len(got) > 0
            pd.testing.assert_frame_equal(got, want, check_exact=True)
            diff = wh.scalar("SELECT count(*) FROM (SELECT lam, alpha, query_id, chosen_model, accepted_local FROM decisions "
                             "WHERE run_id = ? EXCEPT SELECT lam, alpha, query_id, chosen_model, accepted_local "
                             "FROM decisions WHERE run_id = ? AND method = 'cr2')", [a, b])
            assert diff == 0


def test_a_new_state_distribution_reuses_the_teacher_and_retrains_only_the_gate(pipeline):
    """The teacher never sees a cost: a re-run under another channel-state distribution reuses it (the
    same fingerprint) and distils a new gate on the new costs."""
    from cr2_flows.run import run_flow

    first = pipeline["first"]
    cfg = pipeline["root"] / "far-run.yaml"
    cfg.write_text(pipeline["cfg"].read_text() + "channel: {distribution: far-rician}\n" + LIGHT_EVALUATION)
    out = run_flow(config_path=str(cfg), home=str(pipeline["home"]))
    assert not out["train"]["cached"] and out["train"]["teacher_reused"]
    assert out["train"]["teacher"]["fingerprint"] == first["train"]["teacher"]["fingerprint"]
    assert out["train"]["gate"]["fingerprint"] != first["train"]["gate"]["fingerprint"]
    # the first run's deployment still resolves to its teacher (the reused teacher was registered again)
    from cr2_warehouse.repository import deployed_artifacts

    with Warehouse(pipeline["home"], read_only=True) as wh:
        for run in (first, out):
            arts = deployed_artifacts(wh, run["train"]["gate"]["fingerprint"])
            assert arts["teacher"]["fingerprint"] == first["train"]["teacher"]["fingerprint"]


def test_a_live_server_follows_a_recalibration_without_a_restart(pipeline, tmp_path):
    """A new states file → `recalibrate` → the running `cr2 serve` (its own process, as an operator runs it) answers
    with the new table; no request fails under 8 concurrent clients, and each answer names the version that decided
    it. On a copy of the home: the deployed version of the other tests stays as it is."""
    import os
    import shutil
    import subprocess
    import sys
    import threading
    import time

    import httpx

    from cr2_flows.recalibrate import recalibrate_flow
    from tests.serve_helpers import free_port

    home = tmp_path / "home"
    shutil.copytree(pipeline["home"], home, ignore=shutil.ignore_patterns("prefect"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = subprocess.Popen([sys.executable, "-m", "cr2_cli.main", "serve", "--port", str(port), "--home", str(home),
                               "-c", str(pipeline["cfg"])], env={k: v for k, v in os.environ.items()
                                                                 if k != "PREFECT_API_URL"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    answers, failures, stop = [], [], threading.Event()
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, server.stdout.read()
            with contextlib.suppress(httpx.HTTPError):
                before = httpx.get(base + "/health", timeout=5).json()["thresholds_version"]
                break
            assert time.monotonic() < deadline, "cr2 serve did not start"
            time.sleep(0.25)

        def client(c: int) -> None:
            with httpx.Client(base_url=base, timeout=60) as http:
                while not stop.is_set():
                    r = http.post("/route", json={"query": f"What is {c} + {c}?", "lam": 2.0, "distance_m": 80})
                    if r.status_code != 200:
                        failures.append(r.text)
                    else:
                        answers.append((c, r.json()["thresholds_version"], int(r.headers["x-cr2-thresholds-version"])))

        threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
        for t in threads:
            t.start()
        out = recalibrate_flow(states="premise-far", config_path=str(pipeline["cfg"]), home=str(home))
        new = out["new_thresholds"]["version"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and httpx.get(base + "/health", timeout=30).json()["thresholds_version"] != new:
            time.sleep(0.1)
        time.sleep(0.5)
        stop.set()
        for t in threads:
            t.join(timeout=60)
        health = httpx.get(base + "/health", timeout=30).json()
    finally:
        stop.set()
        server.terminate()
        log = server.communicate(timeout=30)[0]
    assert new > before and health["thresholds_version"] == new and health["dist_id"] == out["new_dist_id"], log[-3000:]
    assert not failures, failures[:3]
    assert all(v == h for _, v, h in answers) and {v for _, v, _ in answers} == {before, new}
    for c in range(8):
        seen = [v for cc, v, _ in answers if cc == c]
        assert seen == sorted(seen)  # never back to the old table
