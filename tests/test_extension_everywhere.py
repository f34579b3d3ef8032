"""What a user adds appears everywhere it should, with no list of names edited: a scenario added to the scenarios
file (configs/scenarios.yaml's shape, named by $CR2_SCENARIOS) is a warehouse of the results page (resultsdoc.core
HOMES), a row of the equal-risk section's scenarios and a unit the router study may name (study_scenarios, the flow's
SCENARIOS). The readers build their tables at import, so each check runs in a fresh interpreter.

A router added by a catalogue entry only (a module and a catalogue file outside the tree, named by a config's
baselines.catalogues) is evaluated on the small `cr2 run` home and listed in every table of `cr2 results -c` and of the
results page that lists routers."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cr2.config.shipped import REPO_ROOT

ROOT = Path(__file__).resolve().parents[1]

TOY = """\
toy-scenario:
  title: "Toy scenario (a test's own)"
  config: configs/default.yaml
  home: var/toy-scenario
  make: run-toy
  command: run
"""

PROBE = """\
import json
from cr2.config.scenarios import scenarios_file
from cr2.studies.routers import study_scenarios
from cr2_cli.resultsdoc.core import HOMES
from cr2_cli.resultsdoc.equal_risk import SCENARIOS as PAGE_SCENARIOS
from cr2_flows.router_study import SCENARIOS as FLOW_SCENARIOS
print(json.dumps({"file": str(scenarios_file()), "homes": {k: list(v) for k, v in HOMES.items()},
                  "page": [k for k, _ in PAGE_SCENARIOS], "study": list(study_scenarios()),
                  "flow": list(FLOW_SCENARIOS)}))
"""


def _probe(env_extra: dict[str, str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "CR2_SCENARIOS"} | env_extra
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_scenario_added_to_a_scenarios_file_reaches_the_page_and_the_router_study(tmp_path):
    shipped = (REPO_ROOT / "configs" / "scenarios.yaml").read_text(encoding="utf-8")
    mine = tmp_path / "scenarios.yaml"
    mine.write_text(shipped.rstrip("\n") + "\n" + TOY, encoding="utf-8")
    before, after = _probe({}), _probe({"CR2_SCENARIOS": str(mine)})
    assert after["file"] == str(mine)
    assert "toy-scenario" not in before["homes"]  # the shipped file does not hold it: the addition is what shows
    assert after["homes"]["toy-scenario"] == ["var/toy-scenario", "make run-toy"]
    for where in ("page", "study", "flow"):
        assert after[where] == before[where] + ["toy-scenario"], where  # appended in file order, nothing else moved
    # a study over pools is not a scenario unit: the router study and the page's scenario rows skip it
    assert "pools" in after["homes"] and "pools" not in after["study"]


# ---------------------------------------------------------------- a router added to a catalogue

TOY_CONFIG = """\
extends: {base}
baselines:
  routers: [always, knn, mlp, prior]
  catalogues: [{catalogue}]
  params: {{prior: {{smoothing: 0.5}}}}
certify: {{routers: [cr2], rules: [crc]}}
"""

# the sections of `cr2 results` (and `--paper`) whose tables list every evaluated router: the header that opens each
RESULTS_ROUTER_TABLES = ("**Fixed-accuracy cost saving vs KNN, % [95 % CI]", "**Mean saving vs KNN over the validation",
                         "**… at the best grid point", "**Every router at λ", "**Router complexity (v_router_complexity)",
                         "**Router complexity (paper tab:router_complexity")


def _section(text: str, header: str) -> str:
    assert header in text, header
    return text.split(header, 1)[1].split("\n**", 1)[0]


def _page_tables(page: str) -> list[str]:
    """The markdown tables of a page, each as its lines."""
    tables, cur = [], []
    for line in page.splitlines():
        if line.startswith("|"):
            cur.append(line)
        elif cur:
            tables.append("\n".join(cur))
            cur = []
    return tables + (["\n".join(cur)] if cur else [])


@pytest.fixture
def toy_router_home(small_cli_run, tmp_path):
    """A copy of the small `cr2 run` home continued with a toy router registered by a catalogue entry only (a module
    and a catalogue file in tmp_path, named by the config's baselines.catalogues): the cached stages are reused, the
    baselines and the evaluation run again with it (three baselines and one certified rule: the tables need a router
    to list beside the toy, not the whole set)."""
    from cr2.routers import use_catalogues
    from cr2_flows.run import run_flow
    from tests.conftest import copy_of
    from tests.test_extending import CATALOGUE, TOY_ROUTER

    plugin = tmp_path / "plugin"
    plugin.mkdir()
    (plugin / "toy_router.py").write_text(TOY_ROUTER)
    # test_extending's entry, with a short name and the tags that put it into the page's groups
    (plugin / "catalogue.yaml").write_text(textwrap.dedent(CATALOGUE).lstrip("\n")
                                           + '  short: "Prior (toy)"\n  tags: [paper, compared, headline]\n')
    cfg = tmp_path / "toy.yaml"
    cfg.write_text(TOY_CONFIG.format(base=small_cli_run["cfg"], catalogue=plugin / "catalogue.yaml"))
    home = copy_of(small_cli_run["home"], tmp_path / "home")
    try:
        run_flow(config_path=str(cfg), home=str(home))
        use_catalogues([])  # what follows registers the catalogue the way a user's command does
        yield {"cfg": cfg, "home": home}
    finally:
        use_catalogues([])


@pytest.mark.slow
def test_a_router_added_to_a_catalogue_is_listed_in_every_router_table(toy_router_home):
    from typer.testing import CliRunner

    from cr2.routers import routers_tagged, use_catalogues
    from cr2_cli.main import app

    res = CliRunner().invoke(app, ["results", "--paper", "-c", str(toy_router_home["cfg"]),
                                   "--home", str(toy_router_home["home"])])
    assert res.exit_code == 0, res.output
    for header in RESULTS_ROUTER_TABLES:
        section = _section(res.output, header)
        assert "prior" in section or "Prior (toy)" in section, (header, section[:2000])

    # the page's tables: every table that lists the paper's baselines lists the toy router too. The page reads its
    # router groups from the catalogue when it renders, so the catalogue registered here is the one it lists.
    from cr2_cli.resultsdoc import SECTIONS, render_sections
    from cr2_cli.resultsdoc.core import Doc

    use_catalogues([toy_router_home["cfg"].parent / "plugin" / "catalogue.yaml"])
    assert "prior" in routers_tagged("paper", "compared")
    page = render_sections(Doc({"default": Path(toy_router_home["home"])}), SECTIONS)
    router_tables = [t for t in _page_tables(page) if "MLP" in t or "| mlp" in t]
    assert router_tables
    missing = [t.splitlines()[0] for t in router_tables if "prior" not in t and "Prior (toy)" not in t]
    assert not missing, f"page tables that keep a router list of their own: {missing}"
