"""What a user adds appears everywhere it should, with no list of names edited: a scenario added to the scenarios
file (configs/scenarios.yaml's shape, named by $CR2_SCENARIOS) is a warehouse of the results page (resultsdoc.core
HOMES), a row of the equal-risk section's scenarios and a unit the router study may name (study_scenarios, the flow's
SCENARIOS). The readers build their tables at import, so each check runs in a fresh interpreter."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

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
