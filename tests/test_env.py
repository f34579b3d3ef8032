"""`import cr2` leaves the environment alone; every entry point sets the offline environment before its heavy imports.

Each check runs a fresh interpreter with none of cr2/core/env.py's variables set (pytest's own process has them from
tests/conftest.py). A meta-path probe records the environment at the first import of each heavy dependency, so
"set before torch loads OpenMP / before Prefect reads its settings" is checked, not only "set at the end".
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from cr2.config import REPO_ROOT, load_config
from cr2.core.env import OFFLINE_ENV, THREAD_ENV

EXPECTED = {**OFFLINE_ENV, **THREAD_ENV}
HEAVY = ("torch", "prefect", "duckdb", "transformers", "sentence_transformers", "great_expectations", "typer")

# argv: a module to import, then (optional) the arguments of `cr2`, run through the console script's function
PROBE = f'''
import atexit, json, os, sys
KEYS, HEAVY = {sorted(EXPECTED)!r}, {HEAVY!r}
before = dict(os.environ)
seen = {{}}

class Probe:
    def find_spec(self, name, path=None, target=None):
        if name in HEAVY and name not in seen:
            seen[name] = {{k: os.environ.get(k) for k in KEYS}}
        return None

def report():
    changed = sorted(k for k in set(os.environ) | set(before) if os.environ.get(k) != before.get(k))
    after = {{k: os.environ.get(k) for k in KEYS}}
    print("PROBE " + json.dumps({{"changed": changed, "after": after, "seen": seen}}), file=sys.stderr)

sys.meta_path.insert(0, Probe())
atexit.register(report)
module, args = sys.argv[1], sys.argv[2:]
if module.endswith(".py"):  # a deployment's entrypoint file, loaded as a Prefect worker loads it: by path
    from prefect.utilities.importtools import load_script_as_module
    seen.pop("prefect", None)  # the loader's own import, as in the worker
    load_script_as_module(module)
else:
    __import__(module)
if args:
    sys.argv = ["cr2", *args]
    sys.modules[module].main()
'''


def clean_env() -> dict[str, str]:
    """The test process's environment without cr2/core/env.py's variables, with the checkout importable."""
    env = {k: v for k, v in os.environ.items() if k not in EXPECTED}
    env["PYTHONPATH"] = str(REPO_ROOT)
    return env


def probe(module: str, *args: str) -> tuple[dict, subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-c", PROBE, module, *args], env=clean_env(), cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("PROBE ")]
    assert lines, f"{module} {args}: no probe report (rc {proc.returncode})\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1].removeprefix("PROBE ")), proc


def test_import_cr2_changes_no_environment_variable():
    # the library, its config loader and its catalogues: none of them writes os.environ
    report, proc = probe("cr2.config")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["changed"] == [], f"`import cr2.config` changed {report['changed']}"
    assert all(v is None for v in report["after"].values())


@pytest.mark.parametrize("module", ["cr2_cli.main", "cr2_flows.run", "cr2_tasks.train", "cr2_warehouse.db"])
def test_entry_point_sets_the_environment_before_any_heavy_import(module):
    report, proc = probe(module)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["after"] == EXPECTED
    assert report["seen"], f"{module} imported none of {HEAVY}: the probe checked nothing"
    for dep, env in report["seen"].items():
        assert env == EXPECTED, f"`import {module}` imported {dep} before setting {sorted(k for k in env if env[k] != EXPECTED[k])}"


ENTRYPOINTS = sorted({d["entrypoint"].split(":")[0]
                      for d in yaml.safe_load((REPO_ROOT / "prefect.yaml").read_text())["deployments"]})


@pytest.mark.parametrize("path", ENTRYPOINTS)
def test_a_deployment_entrypoint_loaded_by_path_sets_the_environment(path):
    # Prefect loads `flows/run.py:run_flow` as a file, not as cr2_flows.run, so flows/__init__.py runs only if the file
    # imports the package before anything heavy
    report, proc = probe(path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert report["after"] == EXPECTED
    for dep, env in report["seen"].items():
        assert env == EXPECTED, f"loading {path} imported {dep} before the offline environment was set"


def test_the_cr2_command_runs_with_the_environment_set():
    # `cr2 config show` through the console script's function (pyproject's [project.scripts]: cr2_cli.main:main)
    report, proc = probe("cr2_cli.main", "config", "show")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"# config hash: {load_config().section_hash()}" in proc.stdout
    assert report["after"]["HF_HUB_OFFLINE"] == "1" and report["after"]["OMP_WAIT_POLICY"] == "PASSIVE"
    assert report["after"] == EXPECTED


def test_a_value_the_user_set_wins():
    env = {**clean_env(), "HF_HUB_OFFLINE": "0"}
    out = subprocess.run([sys.executable, "-c", "import os, cr2_cli; print(os.environ['HF_HUB_OFFLINE'])"], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.strip() == "0"
