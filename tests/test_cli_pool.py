"""Bring-your-own pool through the CLI, as a newcomer meets it: `cr2 labels import` says that the
pool comes from `cr2 ingest -c CONFIG` and takes that config; `cr2 sql` runs a single PIVOT and averages the
labels' correctness through v_labels; `cr2 results` picks targets the routers reach and says why a table is empty.
"""
from __future__ import annotations

import re

import pandas as pd
import pytest
from typer.testing import CliRunner

from cr2.config import CONFIG_DIR
from cr2_cli.main import app
from cr2_warehouse.db import DB_NAME, Warehouse


@pytest.fixture(scope="module")
def ingested(small_data_dir, tmp_path_factory):
    """A warehouse `cr2 ingest -c small.yaml` wrote (queries and pool only), its config, and a label file."""
    from cr2.config import load_config
    from cr2_tasks.ingest import ingest_queries

    root = tmp_path_factory.mktemp("cli-pool")
    home = root / "home"
    cfg_path = root / "small.yaml"
    cfg_path.write_text(f"extends: default\ndata_dir: {small_data_dir}\n")
    cfg = load_config(cfg_path)
    ingest_queries.fn(cfg, str(home))
    with Warehouse(home, read_only=True) as wh:
        qids = list(wh.df("SELECT query_id FROM queries ORDER BY query_id")["query_id"])
    # a known pattern: model j is right on every (j + 2)-th query
    rows = [{"query_id": q, "model": m, "correct": i % (j + 2) == 0}
            for i, q in enumerate(qids) for j, m in enumerate(cfg.model_ids)]
    labels = root / "labels.csv"
    pd.DataFrame(rows).to_csv(labels, index=False)
    return {"root": root, "home": home, "cfg": cfg_path, "labels": labels, "rows": pd.DataFrame(rows)}


def _invoke(args):
    from cr2_cli.console import console

    width, console.width = console.width, 200  # no wrapping of the cells checked below
    try:
        result = CliRunner().invoke(app, [str(a) for a in args])
    finally:
        console.width = width
    return result, " ".join(result.output.split())


def _cell_after(out: str, name: str, value: float) -> bool:
    """Whether the printed table has `value` (as `cr2 sql` formats it) right after `name` in a row."""
    return re.search(rf"{re.escape(name)}\W+{re.escape(f'{value:.6g}')}\b", out) is not None


def test_import_into_an_empty_home_names_the_ingest_command(ingested, tmp_path):
    home = tmp_path / "new-home"
    result, out = _invoke(["labels", "import", ingested["labels"], "--source", "mine", "-c", ingested["cfg"],
                           "--home", home])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit), out
    assert f"cr2 ingest -c {ingested['cfg']}" in out and "run it first" in out
    assert not (home / DB_NAME).exists()  # nothing written
    result, out = _invoke(["labels", "import", ingested["labels"], "--source", "mine", "--home", home])
    assert result.exit_code == 2 and "cr2 ingest -c CONFIG" in out and "the config you will train with" in out


def test_import_checks_the_config_pool_against_the_warehouse(ingested):
    other = CONFIG_DIR / "mmlu-pro-measured.yaml"  # another pool
    result, out = _invoke(["labels", "import", ingested["labels"], "--source", "mine", "-c", other,
                           "--home", ingested["home"]])
    assert result.exit_code == 2, out
    assert "holds the pool qwen3-1.7b" in out and f"cr2 ingest -c {other}" in out
    with Warehouse(ingested["home"], read_only=True) as wh:
        assert wh.scalar("SELECT count(*) FROM labels WHERE source = 'mine'") == 0


@pytest.fixture(scope="module")
def imported(ingested):
    result, out = _invoke(["labels", "import", ingested["labels"], "--source", "mine", "-c", ingested["cfg"],
                           "--home", ingested["home"]])
    assert result.exit_code == 0, out
    assert f"in {ingested['cfg']}" in out  # where to train on them
    return ingested


def test_avg_correct_works_through_v_labels_and_a_boolean_average_says_how(imported):
    truth = imported["rows"].groupby("model")["correct"].mean()
    result, out = _invoke(["sql", "SELECT model_id, avg(correct) AS acc FROM v_labels WHERE source = 'mine' "
                           "GROUP BY model_id ORDER BY model_id", "--home", imported["home"]])
    assert result.exit_code == 0, out
    for model, acc in truth.items():
        assert _cell_after(out, model, acc), (model, acc, out)
    result, out = _invoke(["sql", "SELECT avg(correct) FROM labels", "--home", imported["home"]])
    assert result.exit_code == 2 and "avg(correct::INT)" in out and "v_labels" in out, out


def test_a_single_pivot_is_one_read_query(imported):
    truth = imported["rows"].groupby("model")["correct"].mean()
    result, out = _invoke(["sql", "PIVOT (FROM v_labels WHERE source = 'mine') ON model_id USING avg(correct) "
                           "GROUP BY source", "--home", imported["home"]])
    assert result.exit_code == 0, out
    assert all(m in out for m in truth.index) and _cell_after(out, "mine", truth["qwen3-1.7b"]), out
    with_cte = "WITH p AS (PIVOT v_labels ON model_id USING count(*) GROUP BY source) SELECT count(*) AS n FROM p"
    assert _invoke(["sql", with_cte, "--home", imported["home"]])[0].exit_code == 0


@pytest.mark.parametrize("sql, message", [
    ("CREATE TABLE p AS PIVOT v_labels ON model_id USING avg(correct)", "MULTI statements are not allowed"),
    ("CREATE TEMP TABLE p AS PIVOT v_labels ON model_id USING avg(correct)", "MULTI statements are not allowed"),
    ("PIVOT v_labels ON model_id USING avg(correct); DROP TABLE labels", "2 statements given"),
])
def test_a_pivot_that_is_not_one_read_is_still_refused(imported, sql, message):
    with Warehouse(imported["home"], read_only=True) as wh:
        before = wh.table_fingerprint("labels")
    result, out = _invoke(["sql", sql, "--home", imported["home"]])
    assert result.exit_code == 2 and message in out, out
    with Warehouse(imported["home"], read_only=True) as wh:
        assert wh.table_fingerprint("labels") == before
        assert "p" not in set(wh.df("SELECT table_name FROM information_schema.tables")["table_name"])


def test_results_targets_default_to_what_the_methods_reach():
    from cr2.report.markdown import markdown_table
    from cr2.report.headline import PAPER_TARGETS, default_targets, why_no_target
    from cr2_cli.results import parse_targets

    reached = pd.DataFrame({"method": ["cr2", "knn"], "max_target": [0.84, 0.86]})
    assert default_targets(reached)[0] == PAPER_TARGETS  # the paper's range where both reach it
    low = pd.DataFrame({"method": ["cr2", "knn"], "max_target": [0.79, 0.79]})  # as on BBH
    targets, line = default_targets(low)
    assert targets == (0.76, 0.77, 0.78, 0.79) and "0.79" in line and "paper" in line
    none = pd.DataFrame({"method": [], "max_target": []})
    assert default_targets(none)[0] == PAPER_TARGETS and "no common target" in default_targets(none)[1]
    why = why_no_target(low, PAPER_TARGETS)
    assert "0.79" in why and "--targets" in why
    assert markdown_table(pd.DataFrame(), why=why) == f"_(no rows: {why})_\n"
    assert parse_targets("0.7, 0.75,0.7") == (0.7, 0.75)


@pytest.mark.parametrize("text", ["0.795", "1.2", "0.3", "high", ""])
def test_results_refuses_targets_off_the_grid(text, tmp_path):
    result, out = _invoke(["results", "--targets", text, "--home", tmp_path])
    assert result.exit_code == 2 and "--targets takes comma-separated accuracies" in out, out
