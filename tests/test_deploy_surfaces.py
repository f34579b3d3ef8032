"""One deploy decision, every surface: the equal-risk stage stores the deploy rule's answer per rule
(deploy_decisions, deploy_candidates), and `cr2 results`, the HTML report with its csv table, the Prefect artifacts
and docs/results.md's section print that stored answer — none lacks it, none differs."""
from __future__ import annotations

import html
import json
from pathlib import Path

import pandas as pd
import pytest

from cr2.evaluation.deploy import ALWAYS_EDGE, RULE_SHA
from cr2.report.deploy import ANSWER_COLUMN, answer_text, deploy_rows

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def stored(pipeline_slice):
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import newest_eval_run, run_deploy

    with Warehouse(pipeline_slice["home"], read_only=True) as wh:
        run_id = newest_eval_run(wh)
        decisions, candidates = run_deploy(wh, run_id)
    answers = {d["rule"]: answer_text(d, candidates[candidates["rule"] == d["rule"]]) for _, d in decisions.iterrows()}
    return {"run_id": run_id, "decisions": decisions, "candidates": candidates, "answers": answers}


def test_the_stage_stores_one_answer_per_rule_with_its_candidates(stored, pipeline_slice):
    d, c = stored["decisions"], stored["candidates"]
    rules = pipeline_slice["first"]["certify"]["rules"]
    assert sorted(d["rule"]) == sorted(rules) and (d["rule_sha"] == RULE_SHA).all()
    assert set(d["answer"]) <= {"deploy", "no device", "undecided"}
    for rule, g in c.groupby("rule"):
        names = set(g["candidate"])
        assert ALWAYS_EDGE in names and any(n.endswith("@no-device") for n in names)
        assert any(n.endswith(f"@{rule}") for n in names)
        cr2 = g[g["candidate"] == f"cr2@{rule}"].iloc[0]
        assert cr2["flops_edge"] > 0 and cr2["flops_worst"] == cr2["flops_device"] + cr2["flops_edge"]  # gate + teacher
        assert list(g.sort_values("complexity_rank")["device"]) == sorted(g["device"])  # no device model ranks first
        row = d[d["rule"] == rule].iloc[0]
        out = set(g.loc[g["status"] == "out", "candidate"])
        assert row["recommended"] not in out  # never a candidate a test calls dearer
    with_pairs = stored["decisions"]["n_pairs"]
    assert (with_pairs == [len(c[c["rule"] == r]) * (len(c[c["rule"] == r]) - 1) // 2 for r in d["rule"]]).all()


def test_no_stored_answer_contradicts_a_detected_difference(stored, pipeline_slice):
    from cr2.evaluation.deploy import contradictions
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import run_equal_risk

    with Warehouse(pipeline_slice["home"], read_only=True) as wh:
        rows = run_equal_risk(wh, stored["run_id"]).to_dict("records")
    for _, d in stored["decisions"].iterrows():
        assert contradictions(d, rows) == []
    # the check itself bites: a stored "dearer" against the recommendation is found
    d = stored["decisions"].iloc[0].to_dict()
    d["answer"] = "deploy"
    fake = {"rule": d["rule"], "alpha": d["alpha"], "metric": "mean_saving_pct", "question": "certified-score",
            "method_a": d["recommended"], "method_b": "x@" + d["rule"], "verdict": "dearer"}
    assert contradictions(d, [fake])


def test_cr2_results_prints_the_stored_answer(stored, pipeline_slice):
    from cr2_cli.results import results_markdown

    text = results_markdown(pipeline_slice["home"])
    for rule, answer in stored["answers"].items():
        assert answer in text, (rule, answer)
    # every saving-vs-KNN table names its sides: certified CR² against the uncertified baselines
    titled = [line for line in text.splitlines() if line.startswith("**") and "vs KNN" in line]
    assert titled and all("sides" in line for line in titled), titled


def test_the_html_report_and_its_csv_print_the_stored_answer(stored, pipeline_slice):
    report = Path(pipeline_slice["home"]) / "report"
    page = (report / "index.html").read_text(encoding="utf-8")
    csv = pd.read_csv(report / "tables" / "deploy_decision.csv")
    assert "No deploy decision" not in page
    assert sorted(csv[ANSWER_COLUMN]) == sorted(stored["answers"].values())
    for answer in stored["answers"].values():
        assert html.escape(answer) in page
    assert (report / "tables" / "deploy_cost.csv").is_file()


def test_the_results_page_prints_the_stored_answer(stored, pipeline_slice):
    from cr2_cli.resultsdoc import render_sections
    from cr2_cli.resultsdoc.core import Doc

    page = render_sections(Doc({"default": Path(pipeline_slice["home"])}), ("equal_risk",), marked=True)
    for answer in stored["answers"].values():
        assert answer in page


def test_the_prefect_artifacts_carry_the_stored_answer(stored, pipeline_slice):
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from cr2.config import load_config
    from cr2_flows.artifacts import publish_evaluation

    @flow(name="deploy-artifact-check")
    def publish() -> list[str]:
        return publish_evaluation(load_config(pipeline_slice["cfg"]), Path(pipeline_slice["home"]),
                                  pipeline_slice["first"]["evaluate"], None, flow_name="deploy-artifact-check")

    assert "cr2-deploy-decision" in publish()
    with get_client(sync_client=True) as client:
        newest = {}
        for key in ("cr2-deploy-decision", "cr2-summary"):
            arts = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])))
            newest[key] = max(arts, key=lambda a: a.created)
    table = newest["cr2-deploy-decision"].data
    table = json.loads(table) if isinstance(table, str) else table
    assert table == deploy_rows(stored["decisions"], stored["candidates"])
    for answer in stored["answers"].values():
        assert answer in str(newest["cr2-summary"].data)
