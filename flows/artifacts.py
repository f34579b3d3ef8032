"""Prefect artifacts: what a cr2 flow run leaves to look at in the Prefect UI (Artifacts tab of the run).

Every user-facing flow ends by publishing, under stable keys (so the UI shows the latest next to the history):

| key | kind | what |
| --- | --- | --- |
| `cr2-summary` / `cr2-recalibrate-summary` | markdown | the run in a few lines, led by the label-source banner |
| `cr2-operating-points` | table | CR² at the default α over every calibrated λ: the risks, local rate, accuracy, cost (`cr2 run`'s CR² table) |
| `cr2-router-comparison` | table | every evaluated method at λ = 2 (CR² and its variants at the default α) |
| `cr2-recalibration` | table | before (old thresholds) vs after (re-calibrated), under the new states |
| `cr2-drift` | table | the drift test: KS statistic and Holm-adjusted p per state feature |
| `cr2-report` | link | the HTML report of the run (a file:// link on the machine that ran it) |

The numbers come from the warehouse (warehouse/queries/cr2_operating_points_at_alpha.sql, methods_at_lam.sql,
recalibration_before_after.sql), never from memory, so an artifact shows what `cr2 sql` would; every table is one of
cr2.report.tables' objects, rendered with .artifact() for the table and .markdown() for the summary, so its cells are
the ones `cr2 results` and the HTML report write. Simulated labels are flagged in every markdown summary and table description.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from cr2.config import HEADLINE_LAMS, Config
from cr2.labels import is_simulated
from cr2.report.markdown import label_banner
from cr2.report.tables import CR2OperatingPoints, DriftTest, Recalibration, RoutersAtLam
from cr2_warehouse.db import Warehouse
from cr2_warehouse.reads import recalibration
from cr2_warehouse.repository import artifact_frames, eval_run, run_alpha

COMPARE_LAM = 2.0  # the λ of the router-comparison table


def publish_evaluation(config: Config, home: Path, evaluated: dict, report: dict | None = None,
                       flow_name: str = "cr2-evaluate") -> list[str]:
    """Markdown summary, CR² operating points, router comparison (and the report link); returns the keys. α, labels
    and states are the stored run's (eval_runs), not the config's."""
    from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact
    from cr2.report.deploy import deploy_markdown, deploy_rows
    from cr2_warehouse.repository import run_deploy

    run_id = evaluated["run_id"]
    with Warehouse(home, read_only=True) as wh:
        run = eval_run(wh, run_id)
        alpha, source = run_alpha(run), str(run["label_source"])
        ops, compare = artifact_frames(wh, run_id, alpha, COMPARE_LAM)
        deploy_decisions, deploy_candidates = run_deploy(wh, run_id)
    sim = " — SIMULATED labels" if is_simulated(source) else ""
    create_table_artifact(CR2OperatingPoints(ops).artifact(), key="cr2-operating-points",
                          description=f"CR² on test at α = {alpha:g}, run {run_id}, labels {source}{sim}")
    create_table_artifact(RoutersAtLam(compare).artifact(), key="cr2-router-comparison",
                          description=f"every method at λ = {COMPARE_LAM:g} (CR² at α = {alpha:g}), run {run_id}, "
                                      f"labels {source}{sim}")
    keys = ["cr2-operating-points", "cr2-router-comparison"]
    if len(deploy_decisions):
        create_table_artifact(deploy_rows(deploy_decisions, deploy_candidates), key="cr2-deploy-decision",
                              description=f"which router to deploy (the stored deploy rule), run {run_id}, labels "
                                          f"{source}{sim}")
        keys.append("cr2-deploy-decision")
    md = [f"# {flow_name}: evaluation run `{run_id}`", "", label_banner(source), "",
          f"- state distribution: `{run['dist_id']}`",
          f"- test queries: {evaluated['n_test']:,} (risk); {evaluated['n_evaluable']:,} some model solves "
          "(accuracy, cost, local rate)", "",
          f"## CR² at α = {alpha:g}", "",
          CR2OperatingPoints(ops, HEADLINE_LAMS).markdown().rstrip("\n"), "",
          "Full tables: artifacts `cr2-operating-points` and `cr2-router-comparison`; in SQL: "  # sql-text: shown to the user, never run
          f"`cr2 sql \"SELECT * FROM operating_points WHERE run_id = '{run_id}'\"`.", "",
          deploy_markdown(deploy_decisions, deploy_candidates)]
    if report and report.get("path"):
        path = Path(report["path"]).resolve()
        create_link_artifact(link=path.as_uri(), link_text=f"cr2 report ({path})", key="cr2-report",
                             description=f"HTML report of run {run_id}{sim}")
        keys.append("cr2-report")
        md += ["", f"Report: [{path}]({path.as_uri()})"]
    create_markdown_artifact("\n".join(md), key="cr2-summary", description=f"{flow_name} summary{sim}")
    return ["cr2-summary", *keys]


def publish_recalibration(config: Config, home: Path, out: dict) -> list[str]:
    """Markdown summary, drift statistics and (when it ran) the before/after table; returns the keys. α and labels
    are the re-calibrated run's (eval_runs); without one (no drift), the labels this flow run read."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact

    source, alpha, both = config.labels.source, None, None
    if not out["skipped"]:
        with Warehouse(home, read_only=True) as wh:
            after = eval_run(wh, out["after"]["run_id"])
            source, alpha = str(after["label_source"]), run_alpha(after)
            both = recalibration(wh, out["before"]["run_id"], out["after"]["run_id"], alpha)
    sim = " — SIMULATED labels" if is_simulated(source) else ""
    drift = pd.DataFrame(out["drift"])
    create_table_artifact(DriftTest(drift).artifact(), key="cr2-drift",
                          description=f"KS drift test of {out['new_dist_id']} against the calibration states")
    keys = ["cr2-drift"]
    md = [f"# cr2-recalibrate: `{out['old_dist_id']}` → `{out['new_dist_id']}`", "", label_banner(source), "",
          "## Drift check (two-sample KS, Holm-corrected)", "",
          DriftTest(drift).markdown().rstrip("\n"), ""]
    if out["skipped"]:
        md.append("**No drift detected: thresholds kept as they are** (only_if_drift).")
    else:
        old, new = out["old_thresholds"], out["new_thresholds"]
        create_table_artifact(Recalibration(both).artifact(), key="cr2-recalibration",
                              description=f"CR² on test under {out['new_dist_id']} at α = {alpha:g}: thresholds "
                                          f"v{old['version']} (before) vs v{new['version']} (after){sim}")
        keys.append("cr2-recalibration")
        md += [f"Thresholds v{old['version']} → **v{new['version']}** (N_calib = {new['n_calib']:,}; gate "
               f"`{new['gate_fingerprint']}` unchanged).", "", f"## CR² on test at α = {alpha:g}: before → after", "",
               Recalibration(both, HEADLINE_LAMS).markdown().rstrip("\n")]
    create_markdown_artifact("\n".join(md), key="cr2-recalibrate-summary", description=f"cr2-recalibrate summary{sim}")
    return ["cr2-recalibrate-summary", *keys]
