"""The house's layers and no import circles, as an import-linter contract (.importlinter; issue 29).

cr2_cli > flows > tasks > warehouse > cr2: no module imports from a layer above its own (directly or through
another module; imports inside functions count), cr2 imports none of the others, and no two sibling modules of
a package import each other. `lint-imports` reads the source tree (nothing is imported), so this is quick.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> str:
    exe = Path(sys.executable).with_name("lint-imports")
    found = str(exe) if exe.is_file() else shutil.which("lint-imports")
    assert found, "lint-imports not found: install the dev extras (`make install-dev`: import-linter)"
    return found


def test_the_layer_and_acyclic_contracts_hold():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's packages, not an installed copy
    proc = subprocess.run([_lint_imports(), "--config", str(ROOT / ".importlinter"), "--no-cache"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    report = proc.stdout[proc.stdout.find("Contracts"):] + proc.stderr
    assert proc.returncode == 0, report
    assert "2 kept, 0 broken" in proc.stdout, report


def test_the_contract_catches_an_upward_import(tmp_path):
    # the same contract on a copy of the tree with one upward import added (cr2 → tasks) must fail
    for pkg in ("cr2_cli", "flows", "tasks", "warehouse", "cr2"):
        shutil.copytree(ROOT / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "cr2" / "upward.py").write_text("from tasks.common import make_key  # an upward import\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([_lint_imports(), "--config", str(ROOT / ".importlinter"), "--no-cache"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "cr2.upward -> tasks.common" in proc.stdout, proc.stdout[-3000:]
