"""configs/scenarios.yaml is the one list of shipped scenarios: the Makefile builds each with the command written
there, its config exists, and the router study and the results page read their scenarios and homes from it."""
from __future__ import annotations

import re

import pytest

from cr2.config import REPO_ROOT
from cr2.config.scenarios import scenario, scenarios


def _recipes() -> dict[str, list[str]]:
    """make target → its recipe lines (tab-indented, comments and blank lines skipped)."""
    out, target = {}, None
    for line in (REPO_ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+):(?!=)", line)
        if m:
            target = m.group(1)
            out[target] = []
        elif line.startswith("\t") and target is not None:
            out[target].append(line.strip())
        elif line.strip() and not line.startswith("#"):
            target = None
    return out


def test_each_scenarios_make_target_exists_and_runs_its_command():
    recipes = _recipes()
    assert len(scenarios()) >= 5
    for key, s in scenarios().items():
        assert s.make in recipes, f"{key}: no make target '{s.make}'"
        assert f"$(VENV)/bin/{s.command_line()}" in recipes[s.make], (key, recipes[s.make])


def test_each_scenarios_config_is_shipped():
    for key, s in scenarios().items():
        assert s.config is None or (REPO_ROOT / s.config).is_file(), key
    assert scenario("default").command_line() == "cr2 run"
    assert scenario("mmlu-pro").command_line() == "cr2 run -c configs/mmlu-pro-measured.yaml --home var/mmlu-pro"


def test_the_router_study_and_the_page_read_the_same_scenarios():
    from cr2_cli.resultsdoc.core import HOMES
    from cr2_cli.resultsdoc.equal_risk import SCENARIOS as PAGE_SCENARIOS
    from cr2_flows.router_study import POOLS_HOME, SCENARIOS

    assert list(HOMES) == list(scenarios())
    assert HOMES["zeroeval-gemma"] == ("var/zeroeval-gemma", "make run-gemma")
    assert list(SCENARIOS) == ["default", "mmlu-pro", "zeroeval-qwen", "zeroeval-gemma"]
    assert [k for k, _ in PAGE_SCENARIOS] == list(SCENARIOS)
    assert POOLS_HOME == HOMES["pools"][0] == "var/mmlu-pro-sample"


def test_an_unknown_scenario_is_named_with_a_suggestion():
    from cr2.core.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="did you mean 'mmlu-pro'"):
        scenario("mmlu-pr")
