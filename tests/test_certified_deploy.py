"""Deploying a certified router by name: `cr2 route`, `cr2 serve` and `cr2 export-gate` with --router knn --rule
crc-avoidable, on a real slice warehouse whose `cr2 run` stages certified KNN.

What a user relies on: the served decision is CertifiedRouter's library decision for the same request-time inputs
(embedding, λ, α, ĉ); the answer and /health name the router, its rule and the risk α bounds like CR²'s; CR² stays
the default; a wrong name, a rule with no stored table and an off-grid operating point are one-line errors naming the
fix; and the device export decides exactly like the host.
"""
from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from cr2.config import load_config
from cr2_cli.main import app as cli
from tests.conftest import run_stages_to_evaluate, write_small_benchmarks
from tests.serve_helpers import running
from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.slow]

NAME = "knn@crc-avoidable"
LAM, ALPHA = 2.0, 0.1  # on the slice's grids (grids.lam.extra, certify.alphas)
SLICE = {"teacher": {"epochs": 2}, "gate": {"epochs": 2}, "evaluation": {"n_resplits": 0, "bootstrap": {"n_resamples": 200, "n_resamples_compare": 1000}},
         "grids": {"lam": {"min": 0.1, "max": 20.0, "n_log": 4, "extra": [2.0]}, "default_alpha": ALPHA,
                   "alpha": [0.05, ALPHA, 0.2]},
         "certify": {"rules": ["crc-avoidable"], "routers": ["knn"], "alphas": [0.05, ALPHA, 0.2]},
         "baselines": {"routers": ["knn"], "params": {"knn": {"k_grid": [3]}}}}
QUESTION = "Which gas do plants absorb for photosynthesis?"
CHOICES = ["Oxygen", "Carbon dioxide", "Nitrogen", "Helium"]


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, one_torch_thread):
    """A slice home after the stages of `cr2 run` up to certify (CR²'s table and knn@crc-avoidable's)."""
    from cr2_tasks.certify import CERTIFY

    root = tmp_path_factory.mktemp("certified-deploy")
    data = write_small_benchmarks(root / "data", per_subset=20, subsets_per_benchmark=2)
    overrides = {"data_dir": str(data), **SLICE}
    config_path = root / "slice.yaml"
    config_path.write_text(yaml.safe_dump({"extends": "default", **overrides}))
    config = load_config(config_path)
    home = root / "home"

    def run(stage, *inputs):
        return stage.task.fn(config, str(home), *inputs)

    done = run_stages_to_evaluate(run)
    trained, baselines, evaluated = done["train"], done["baselines"], done["evaluate"]
    certified = run(CERTIFY, trained, baselines, evaluated)
    return {"config": config, "config_path": config_path, "home": home, "versions": certified["versions"]}


def _library_router(deployed, name: str = NAME):
    """The certified router as the library builds it from the stored artefacts, without cr2.deploy.deployment."""
    from cr2.routers.certify import CertifiedRouter
    from cr2.routers import load_router
    from cr2_warehouse.files import in_home
    from cr2_warehouse.repository import load_threshold_table

    with Warehouse(deployed["home"], read_only=True) as wh:
        table = load_threshold_table(wh, router=name)
        path = wh.scalar("SELECT path FROM artifacts WHERE kind = 'router:knn' AND fingerprint = ?",
                         [table.gate_fingerprint])
    return CertifiedRouter(load_router(in_home(deployed["home"], path)), "knn", "crc-avoidable").set_threshold_table(table)


def _embedding(config, question, choices, home):
    from cr2.inputs.embed import embed_texts, load_encoder, router_text
    from cr2_tasks.store import tool_dir

    encoder = load_encoder(config.embedding.max_seq_length, backend=config.embedding.backend,
                           cache_dir=tool_dir(home, "encoders"))
    return embed_texts([router_text(question, choices)], progress=False, encoder=encoder,
                       max_seq_length=config.embedding.max_seq_length)


def _invoke(deployed, *args):
    return CliRunner().invoke(cli, [*args, "--config", str(deployed["config_path"]), "--home", str(deployed["home"])])


# ---------------------------------------------------------------- serve
def test_served_certified_decision_is_the_library_decision_with_cr2s_fields(deployed):
    from cr2.routers.certify import request_set
    from cr2_cli.serve import create_app

    config, home = deployed["config"], deployed["home"]
    app = create_app(config, str(home), router_name=NAME)
    answers = []
    with running(app) as base:
        health = httpx.get(base + "/health", timeout=30).json()
        for distance_m in (20.0, 150.0, 400.0):  # three channel states: three decision costs ĉ
            r = httpx.post(base + "/route", json={"query": QUESTION, "choices": CHOICES, "lam": LAM, "alpha": ALPHA,
                                                  "distance_m": distance_m}, timeout=120)
            assert r.status_code == 200, r.text
            answers.append(r)
    assert health["router"] == NAME and health["rule"] == "crc-avoidable" and health["risk"] == "avoidable-error"
    assert health["risk_display"] and health["thresholds_version"] == deployed["versions"][NAME]
    library = _library_router(deployed)
    emb = _embedding(config, QUESTION, CHOICES, deployed["home"])
    model_ids = [m.id for m in config.models]
    for r in answers:
        out = r.json()
        assert out["router"] == NAME and out["rule"] == "crc-avoidable" and out["risk"] == "avoidable-error"
        assert r.headers["x-cr2-thresholds-version"] == str(deployed["versions"][NAME])
        # the library decision for the same request-time inputs: e(x), λ, α and the ĉ the server decided with
        cost = np.array([[m["cost_norm"] for m in out["models"]]])
        dec = library.decide(request_set(emb, cost, model_ids), LAM, ALPHA)
        assert out["tau"] == library.threshold(LAM, ALPHA)
        assert out["score"] == float(dec.score[0])
        assert out["accept_local"] == bool(dec.extra["gate_accept"][0])
        assert out["chosen_model"] == model_ids[int(dec.chosen[0])]
        assert [m["p_correct"] for m in out["models"]] == pytest.approx(
            library.predict_proba(request_set(emb, cost, model_ids))[0].tolist(), abs=0)


def test_cr2_stays_the_default_and_names_itself(deployed):
    from cr2_cli.serve import create_app

    app = create_app(deployed["config"], str(deployed["home"]))
    with running(app) as base:
        health = httpx.get(base + "/health", timeout=30).json()
        r = httpx.post(base + "/route", json={"query": QUESTION, "lam": LAM, "alpha": ALPHA, "distance_m": 50.0},
                       timeout=120)
    assert health["router"] == "cr2" and r.json()["router"] == "cr2"
    with Warehouse(deployed["home"], read_only=True) as wh:
        from cr2_warehouse.repository import newest_threshold_version

        assert health["thresholds_version"] == newest_threshold_version(wh)  # CR²'s own table, not a certified one
    assert health["thresholds_version"] != deployed["versions"][NAME]


def test_served_certified_router_refuses_off_grid_and_target_requests(deployed):
    from cr2_cli.serve import create_app

    app = create_app(deployed["config"], str(deployed["home"]), router_name=NAME)
    with running(app) as base:
        off_lam = httpx.post(base + "/route", json={"query": QUESTION, "lam": 0.37, "alpha": ALPHA}, timeout=60)
        off_alpha = httpx.post(base + "/route", json={"query": QUESTION, "lam": LAM, "alpha": 0.03}, timeout=60)
        target = httpx.post(base + "/route", json={"query": QUESTION, "target_accuracy": 0.6}, timeout=60)
    assert off_lam.status_code == 400 and "grid" in off_lam.json()["detail"] and "0.37" in off_lam.json()["detail"]
    assert off_alpha.status_code == 400 and "grid" in off_alpha.json()["detail"]
    assert target.status_code == 400 and "--lam" in target.json()["detail"]


# ---------------------------------------------------------------- route
def test_cli_route_certified_names_router_and_risk(deployed):
    result = _invoke(deployed, "route", QUESTION, "--lam", str(LAM), "--alpha", str(ALPHA), "--distance-m", "80",
                     "--router", "knn", "--rule", "crc-avoidable")
    assert result.exit_code == 0, result.output
    assert f"router {NAME}" in result.output and "avoidable" in result.output


@pytest.mark.parametrize("args, message", [
    (["--router", "knnn", "--rule", "crc-avoidable"], "did you mean 'knn'"),
    (["--router", "knn"], "add --rule"),
    (["--router", "knn", "--rule", "crc-oracle"], "run `cr2 run`"),  # a rule certify.rules did not store
    (["--router", "knn", "--rule", "crc-avoidable", "--lam", "0.37"], "not on the calibrated grid"),
    (["--router", "knn", "--rule", "crc-avoidable", "--alpha", "0.03"], "not on the calibrated grid"),
    (["--router", "knn", "--rule", "crc-avoidable", "--target-accuracy", "0.6"], "--lam and --alpha"),
])
def test_cli_route_errors_name_the_fix(deployed, args, message):
    result = _invoke(deployed, "route", QUESTION, *args)
    assert result.exit_code != 0
    assert message in result.output.replace("\n", " "), result.output
    assert "Traceback" not in result.output


# ---------------------------------------------------------------- export
def test_export_certified_knn_is_self_contained_and_decides_like_the_host(deployed, tmp_path):
    from cr2.deploy.certified_export import DeviceCertifiedRouter
    from cr2_warehouse.routing_data import load_routing_sets

    out = tmp_path / "knn-export"
    result = _invoke(deployed, "export-gate", str(out), "--router", "knn", "--rule", "crc-avoidable")
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["router"] == NAME and manifest["thresholds"]["risk"] == "avoidable-error"
    assert manifest["parity"]["n_decisions_differing"] == 0
    assert sorted(p.name for p in out.iterdir()) == ["costs.json", "manifest.json", "router.npz", "thresholds.json"]
    assert manifest["bytes_total"] == sum((out / n).stat().st_size for n in ("router.npz", "thresholds.json",
                                                                           "costs.json"))
    config = deployed["config"]
    costs = json.loads((out / "costs.json").read_text())
    assert costs["models"] == [m.id for m in config.models] and costs["cost_model"]["cost"]["normalisation"] == "fixed"

    device = DeviceCertifiedRouter.load(out)
    library = _library_router(deployed)
    with Warehouse(deployed["home"], read_only=True) as wh:
        test = load_routing_sets(wh, tuple(costs["models"]), dist_id=config.channel.distribution.dist_id,
                                 label_source=config.labels.source, seed=int(config.splits.seed),
                                 encoder=config.embedding.store_name, decision_cost=config.routing.decision_cost)["test"]
    for lam in library.threshold_table_.lams:
        host = library.route(test, lam, ALPHA)
        dev = device.decide(test.embedding, test.decision_cost, lam, ALPHA)
        assert np.array_equal(host.chosen, dev.chosen) and np.array_equal(host.score, dev.score)

    (out / "router.npz").write_bytes((out / "router.npz").read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(Exception, match="sha256"):
        DeviceCertifiedRouter.load(out)


def test_export_certified_unknown_rule_is_an_error_and_writes_nothing(deployed, tmp_path):
    out = tmp_path / "none"
    result = _invoke(deployed, "export-gate", str(out), "--router", "knn", "--rule", "crc-oracle")
    assert result.exit_code != 0 and "run `cr2 run`" in result.output.replace("\n", " ")
    assert not out.exists()
