"""The shipped scenarios (configs/scenarios.yaml): each one's title, config, warehouse home and the make target and
cr2 command that build it — one file that the router study, the results page and the Makefile test read.

    from cr2.config.scenarios import scenarios, scenario
    scenario("mmlu-pro").home            # 'var/mmlu-pro'
    [k for k, s in scenarios().items() if s.is_run]   # the pipeline-run scenarios, in file order
"""
from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from cr2.config.base import StrictModel
from cr2.config.files import format_validation, read_yaml
from cr2.config.shipped import shipped_path
from cr2.core.errors import ConfigError, did_you_mean

SCENARIOS_FILE = "configs/scenarios.yaml"
SCENARIOS_ENV = "CR2_SCENARIOS"  # names another scenarios file (scenarios_file)
DEFAULT_HOME = "var"  # the home a cr2 command uses without --home (cr2.config.shipped.default_home)


class Scenario(StrictModel):
    """One shipped scenario: where its warehouse is and how it is built."""

    title: str  # its name on the results page
    config: str | None  # config path relative to the repository root (None: the default config)
    home: str  # warehouse folder relative to the repository root
    make: str  # the make target that builds it
    command: Literal["run", "study pools"]  # the cr2 command that target runs

    @property
    def is_run(self) -> bool:
        """Whether it is one pipeline run (`cr2 run`), as opposed to a study over many (the pool sweep)."""
        return self.command == "run"

    def command_line(self) -> str:
        """The cr2 command line its make target runs (the Makefile's recipe, without the venv's path)."""
        return " ".join(["cr2", self.command, *(["-c", self.config] if self.config else []),
                         *(["--home", self.home] if self.home != DEFAULT_HOME else [])])


def scenarios_file() -> Path:
    """The scenarios file read: $CR2_SCENARIOS where set (a file of the same shape, e.g. a checkout's own scenario
    added for a test or a private study), else configs/scenarios.yaml (the checkout's or the installed package's)."""
    named = os.environ.get(SCENARIOS_ENV)
    return Path(named).expanduser() if named else shipped_path(SCENARIOS_FILE)


def scenarios() -> dict[str, Scenario]:
    """Key → Scenario of the scenarios file (scenarios_file), in file order; the file is read within the YAML budgets
    of every config (cr2.core.boundary) and an unknown or missing key is an error."""
    return _read_scenarios(scenarios_file())


@functools.lru_cache(maxsize=None)
def _read_scenarios(path: Path) -> dict[str, Scenario]:
    # cached per file, so a changed $CR2_SCENARIOS is read afresh and the shipped file only once
    out = {}
    for key, spec in read_yaml(path).items():
        try:
            out[str(key)] = Scenario.model_validate(spec)
        except ValidationError as exc:
            raise ConfigError(format_validation(path, exc).replace("invalid configuration", f"scenario '{key}'")) from None
    return out


def scenario(key: str) -> Scenario:
    """The scenario `key`; a miss says which ones exist, with a did-you-mean."""
    found = scenarios()
    if key not in found:
        raise did_you_mean("scenario", key, list(found))
    return found[key]
