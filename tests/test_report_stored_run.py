"""A stored run's pages read α and every setting from the run (eval_runs), never from the config in force today:
the config may change after the run, the run's report may not."""
from __future__ import annotations

from pathlib import Path

import pytest

from cr2.core.errors import DataValidationError
from tests.conftest import copy_of
from cr2_warehouse.repository import run_alpha


def test_a_run_without_a_stored_alpha_is_refused_with_what_to_do():
    with pytest.raises(DataValidationError, match="eval-old.*stores no default α.*--alpha"):
        run_alpha({"run_id": "eval-old", "default_alpha": None})
    with pytest.raises(DataValidationError, match="stores no default α"):
        run_alpha({"run_id": "eval-older"})  # a warehouse before schema 8 has no such column
    assert run_alpha({"run_id": "eval-new", "default_alpha": 0.05}) == 0.05



def test_the_results_page_reads_every_scenario_at_the_one_alpha_their_runs_store():
    from cr2.report.resultsdoc.equal_risk import page_alpha

    assert page_alpha({"default": 0.01, "mmlu-pro": 0.01, "zeroeval-qwen": None}) == 0.01
    assert page_alpha({}) is None
    with pytest.raises(DataValidationError, match="different α.*default: 0.01, mmlu-pro: 0.05"):
        page_alpha({"default": 0.01, "mmlu-pro": 0.05})

@pytest.fixture(scope="module")
def changed_after_run(pipeline_slice, tmp_path_factory) -> dict:
    """The slice run's warehouse (copied: the report is rebuilt into it) and its config with another default α."""
    from cr2.config import load_config

    home = copy_of(pipeline_slice["home"], tmp_path_factory.mktemp("stored-run") / "home")
    run_cfg = load_config(pipeline_slice["cfg"])
    changed = load_config(pipeline_slice["cfg"], overrides={"grids": {"default_alpha": 0.05}})
    assert run_cfg.grids.default_alpha == 0.01 and changed.grids.default_alpha == 0.05  # both on the α grid
    return {"home": home, "first": pipeline_slice["first"], "changed": changed}


@pytest.mark.flow
@pytest.mark.slow
def test_the_report_after_a_config_change_still_uses_the_runs_alpha(changed_after_run):
    from cr2_tasks.report import build_report

    home, first = changed_after_run["home"], changed_after_run["first"]
    tables = home / "report" / "tables"
    before = {p.name: p.read_text(encoding="utf-8") for p in sorted(tables.glob("*.csv"))}
    assert before, "the run wrote its report"
    counts = {b: row["queries"] for b, row in first["ingest"]["benchmarks"].items()}
    out = build_report.fn(changed_after_run["changed"], str(home), first["evaluate"], counts, first["train"],
                          first["baselines"], first.get("ablation"))
    after = {p.name: p.read_text(encoding="utf-8") for p in sorted(tables.glob("*.csv"))}
    # every table (CR² at α, the ablation at α, the realised risks at α) is the one the run itself wrote
    assert after == before
    page = Path(out["path"]).read_text(encoding="utf-8")
    assert "CR² at α = 0.01 " in page and "CR² at α = 0.05" not in page


@pytest.mark.flow
@pytest.mark.slow
def test_cr2_results_reads_the_runs_alpha_by_default(changed_after_run):
    from cr2_cli.results import comparison_markdown, results_markdown

    home = changed_after_run["home"]
    assert results_markdown(home) == results_markdown(home, 0.01)
    assert "**CR² at α = 0.01 [95 % CI]" in results_markdown(home)
    assert comparison_markdown(home) == comparison_markdown(home, 0.01)


@pytest.mark.flow
@pytest.mark.slow
def test_the_cli_summary_of_a_run_prints_the_runs_alpha(changed_after_run):
    from cr2_cli.render import console, print_operating_points

    with console.capture() as out:
        print_operating_points(changed_after_run["home"], changed_after_run["first"]["evaluate"])
    text = " ".join(out.get().split())  # the title wraps at the table's width
    assert "CR² on test, α = 0.01 " in text and "α = 0.05" not in text
