"""A few facts are defined once in cr2/ and imported everywhere else (no re-coded copies)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
CODE_DIRS = ("cr2", "cr2_cli", "tasks", "flows", "warehouse", "benchmarks", "scripts")

# (what, pattern of a re-coded copy, the one file allowed to hold it)
SINGLE = [
    ("the simulated-source test (cr2.labels.is_simulated)", r"startswith\(\s*['\"]simulated", "cr2/config/names.py"),
    ("the headline λ (cr2.config.HEADLINE_LAMS)", r"0\.5,\s*2(\.0)?,\s*8(\.0)?\b", "cr2/config/method.py"),
    ("the calibration rule list (cr2.crc.RULE_REGISTRY)", r"\bCALIBRATION_RULES\b", None),
]


@pytest.mark.parametrize("what, pattern, home", SINGLE, ids=[s[0] for s in SINGLE])
def test_defined_once(what, pattern, home):
    rx = re.compile(pattern)
    hits = []
    for d in CODE_DIRS:
        for path in sorted((REPO / d).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel == home:
                continue
            hits += [f"{rel}:{i}" for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
                     if rx.search(line)]
    assert not hits, f"{what} is re-coded in {hits}; import it instead"


def test_the_definitions_exist():
    from cr2.config import HEADLINE_LAMS
    from cr2.labels import is_simulated

    assert HEADLINE_LAMS == (0.5, 2.0, 8.0)
    assert is_simulated("simulated-irt-v2") and not is_simulated("measured-mmlu-pro-v1")
