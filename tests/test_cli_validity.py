"""What the command line tells a user about their own run: every certified router's validity, the same verdict in
`cr2 guarantees`, `cr2 results` and the HTML report (one stored source of re-splits), tables that say why a cell is
empty, and never a literal `nan`. Read from the shared small `cr2 run` (tests/conftest.py small_cli_run)."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

NAN = re.compile(r"(?<![\w-])nan(?![\w-])", re.IGNORECASE)


def _run_id(home: Path) -> str:
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import newest_eval_run

    with Warehouse(home, read_only=True) as wh:
        return newest_eval_run(wh)


def _expected(home: Path) -> pd.DataFrame:
    from cr2.report.validity import certified_verdicts
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import certified_validity

    with Warehouse(home, read_only=True) as wh:
        return certified_verdicts(certified_validity(wh, _run_id(home)))


def test_cli_tables_print_no_nan_and_say_why_a_cell_is_empty(small_cli_run):
    from typer.testing import CliRunner

    from cr2_cli.main import app
    from cr2_cli.results import comparison_markdown, equal_risk_markdown, results_markdown

    home, cfg = small_cli_run["home"], str(small_cli_run["cfg"])
    texts = {"default": results_markdown(home, 0.01), "paper": comparison_markdown(home, 0.01)}
    for t in (0.75, 0.99):
        texts[f"--targets {t}"] = results_markdown(home, 0.01, targets=(t,))
    for t in (0.5, 0.8, 0.99):
        texts[f"--equal-risk {t}"] = equal_risk_markdown(home, targets=(t,))
    res = CliRunner().invoke(app, ["results", "--targets", "0.75", "--home", str(home)])
    assert res.exit_code == 0, res.output
    texts["cli --targets 0.75"] = res.output
    for name, text in texts.items():
        assert not NAN.search(text), f"`cr2 results` ({name}) prints nan: …{text[max(NAN.search(text).start() - 200, 0):][:300]}"
    # the equal-risk cost table: every certified router × every side, a cost or a reason, never a blank
    table = texts["--equal-risk 0.8"].split("**Cost at accuracy 0.80")[1].split("\n\n")[1]
    lines = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| router")]
    assert lines and all("|  |" not in ln for ln in lines)
    assert "uncertified" in table.splitlines()[0] and "crc-avoidable α=0.05" in table.splitlines()[0]


def test_cost_table_names_what_does_not_reach_the_target():
    from cr2.report.headline import CostAtTarget

    def cost(router, rule, alpha, target):
        return {"question": "cost", "router": router, "rule": rule, "alpha": alpha, "target": target, "estimate": 0.4,
                "lower": 0.35, "upper": 0.45}

    rows = pd.DataFrame([cost("cr2", "crc", 0.01, 0.8), cost("knn", "crc", 0.01, 0.7), cost("knn", None, None, 0.8)])
    reach = pd.DataFrame({"method": ["cr2@crc", "knn@crc", "cr2@crc-oracle", "knn@crc-oracle", "cr2-fixed-0.5",
                                     "knn@uncertified", "knn"],
                          "alpha": [0.01, 0.01, 0.05, 0.05, None, None, None],
                          "max_accuracy": [0.85, 0.78, 0.74, 0.71, 0.9, 0.83, 0.83]})
    table = CostAtTarget(rows, reach, 0.8)
    notes = table.notes
    t = table.frame().set_index("router")
    assert list(t.columns) == ["uncertified", "crc α=0.01", "crc-oracle α=0.05"]  # a side no router reaches stays
    assert t.loc["cr2", "crc α=0.01"] == "0.400 [0.350, 0.450]"
    assert t.loc["knn", "crc α=0.01"] == "does not reach 0.80 (tops out at 0.780)"
    assert t.loc["cr2", "uncertified"] == "— (no cost row at 0.80)"  # reaches 0.80, but no stored cost: said
    assert len(notes) == 1 and "crc-oracle α=0.05: no router reaches 0.80" in notes[0] and "0.740" in notes[0]


def test_every_certified_router_gets_one_verdict_the_same_in_guarantees_results_and_report(small_cli_run, tmp_path):
    from typer.testing import CliRunner

    from cr2.evaluation.validity import WORDS
    from cr2_cli.main import app
    from cr2_cli.render import console
    from cr2_cli.results import validity_markdown
    from tests.conftest import copy_of
    from cr2_warehouse.db import Warehouse
    from cr2_warehouse.repository import methods_of_run

    home = Path(small_cli_run["home"])
    with Warehouse(home, read_only=True) as wh:
        methods = methods_of_run(wh, _run_id(home))
    certified = set(methods.loc[methods["kind"] == "certified", "method"])  # not @uncertified, not @no-device
    expected = _expected(home)
    # one verdict per (router, rule, α): every certified method at every α, and each a word (every rule here is crc)
    assert {f"{r}@{q}" for r, q in zip(expected["router"], expected["rule"])} == certified
    assert len(expected) == len(certified) * expected["alpha"].nunique() and expected["verdict"].isin(WORDS).all()
    assert (expected["n_resplits"] == 10).all()  # SMALL_RUN's evaluation.n_resplits, stored with the cells

    copy = copy_of(home, tmp_path / "home")
    width = console.width
    console.width = 400
    try:
        res = CliRunner().invoke(app, ["guarantees", "--resplits", "10", "-c", str(small_cli_run["cfg"]),
                                       "--home", str(copy)])
    finally:
        console.width = width
    assert res.exit_code == 0, res.output
    out = res.output
    assert "every certified router" in out and not NAN.search(out)
    certified_part = out.split("CR²'s deployed gate")[0]
    n_none = certified_part.count("no violation detected (")  # "violation detected (" counts both words
    assert n_none == int((expected["verdict"] == "no violation detected").sum()), certified_part[:2000]
    assert certified_part.count("violation detected (") - n_none == int((expected["verdict"] == "violation detected").sum())
    # `cr2 results`: the same rows at its α
    md = validity_markdown(home, _run_id(home), 0.01)
    at = expected[np.isclose(expected["alpha"], 0.01)]
    rows = [ln for ln in md.splitlines() if ln.startswith("| ") and "| 0.01 |" in ln]
    assert len(rows) == len(at)
    for r in at.itertuples():
        assert any(f"| {r.rule} |" in ln and f"{r.verdict} ({r.n_violated}/{r.n_cells}," in ln for ln in rows), r
    # beside each verdict, the deployed table's own test risk: how many λ of its grid are above α, and the largest
    assert all(re.search(r"\| \d+ of \d+ \| \d\.\d{4}.* \(λ = [\d.]+\) \|$", ln) for ln in rows), rows
    assert "in expectation over calibration draws" in md and "docs/guarantees.md" in md
    # the report of `cr2 run`: the same table, and no nan anywhere on the page
    page = (home / "report" / "index.html").read_text(encoding="utf-8")
    assert 'id="validity_certified"' in page and not NAN.search(page)
    section = page.split('id="validity_certified"')[1].split("</section>")[0]
    assert section.count("no violation detected (") == int((expected["verdict"] == WORDS[0]).sum())


def test_cr2_bands_are_the_resplits_of_cr2_at_crc(small_cli_run):
    """One stored source: the risk-vs-α bands of the evaluation (cr2-resplit) and cr2@crc's validity re-splits are the
    same draws, so every (λ, α) both hold has the same mean, SE and band."""
    from cr2_warehouse.db import Warehouse

    home = Path(small_cli_run["home"])
    with Warehouse(home, read_only=True) as wh:
        m = wh.df("SELECT method, lam, alpha, metric, value FROM metrics WHERE run_id = ? AND benchmark = 'all' AND "
                  "(method = 'cr2-resplit' OR (method = 'cr2@crc' AND metric LIKE 'resplit_%'))", [_run_id(home)])
    m["metric"] = m["metric"].str.removeprefix("resplit_")
    wide = m.pivot_table(index=["lam", "alpha", "metric"], columns="method", values="value").dropna()
    assert len(wide) >= 4 * 4 and set(wide.index.get_level_values("metric")) >= {"risk_mean", "risk_se", "risk_q95"}
    np.testing.assert_array_equal(wide["cr2-resplit"].to_numpy(), wide["cr2@crc"].to_numpy())
    assert (wide.xs("risk_n", level="metric")["cr2@crc"] == 10).all()


@pytest.mark.parametrize("text", ["| a | nan |", "x = NaN", "nan"])
def test_the_nan_check_catches_a_nan(text):
    assert NAN.search(text)


def test_markdown_tables_write_missing_text_cells_as_a_dash_and_no_target_line_has_no_nan():
    from cr2.report.markdown import markdown_table
    from cr2.report.headline import why_no_target

    md = markdown_table(pd.DataFrame({"router": ["cr2", "knn"], "cell": ["0.3 [0.2, 0.4]", np.nan],
                                      "n": [1.0, np.nan], "other": [None, "x"]}))
    assert not NAN.search(md) and "None" not in md and md.count("–") == 3
    reached = pd.DataFrame({"method": ["cr2"], "min_target": [np.nan], "max_target": [np.nan], "n_targets": [0]})
    assert "reach no common target" in why_no_target(reached, (0.75,))
