"""An installed wheel works outside a checkout: its configs, catalogues and data load from the installed packages.

The wheel is built offline from a copy of the tree (`pip wheel --no-deps --no-build-isolation`), installed with
--no-deps into a fresh venv, and given this interpreter's dependencies through a .pth file (no network here); then
`cr2 config validate` / `cr2 config show` run from an empty folder and must read the packaged default config.
"""
from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

from cr2.config import REPO_ROOT, load_config

pytestmark = pytest.mark.slow

NOT_BUILT = {".git", ".venv", ".hypothesis", ".pytest_cache", "var", "build", "dist", "tests", "docs", "benchmarks",
             "scripts"}  # top-level folders the wheel does not need

WHERE = '''
import json
import cr2, cr2.config.dataset_defs, cr2.config as c, cr2.routers, cr2.config.shipped
from cr2.labels.lmeval.architectures import ARCHITECTURES_FILE
from cr2_warehouse.db import default_home
cfg = c.load_config()
files = [cfg.benchmark_file(b) for b in cfg.enabled_benchmarks] + [cfg.data_path / cfg.labels.simulator.accuracy_file]
print(json.dumps({"cr2": cr2.__file__, "in_checkout": cr2.config.shipped.IN_CHECKOUT, "default": str(c.DEFAULT_CONFIG),
                  "datasets": str(cr2.config.dataset_defs.DATASETS_DIR), "benchmarks": cr2.config.dataset_defs.available(),
                  "routers": str(cr2.routers.CATALOGUE), "architectures": str(ARCHITECTURES_FILE),
                  "data": [str(f) for f in files], "missing": [str(f) for f in files if not f.is_file()],
                  "home": str(default_home())}))
'''


def _copy_ignore(folder: str, names: list[str]) -> set[str]:
    top = NOT_BUILT if Path(folder) == REPO_ROOT else set()
    return {n for n in names if n in top or n == "__pycache__" or n.endswith(".egg-info")}


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    """(venv, an empty folder outside the checkout, the environment to run there): cr2's wheel installed alone."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "CR2_HOME", "VIRTUAL_ENV")}
    env["PIP_NO_INDEX"] = "1"  # never the network
    src, dist, venv, elsewhere = tmp / "src", tmp / "dist", tmp / "venv", tmp / "elsewhere"
    shutil.copytree(REPO_ROOT, src, ignore=_copy_ignore)  # the build writes build/ and *.egg-info beside the sources
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist),
                    str(src)], env=env, check=True, capture_output=True, timeout=600)
    (wheel,) = dist.glob("cr2-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], env=env, check=True, timeout=300)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "--no-deps", "-q",
                    str(wheel)], env=env, check=True, capture_output=True, timeout=600)
    # the dependencies of this interpreter, after the venv's own site-packages (a path line, so none of the .pth
    # files there — this checkout's editable install among them — runs)
    (pure,) = {Path(p) for p in (venv / "lib").glob("python3*/site-packages")}
    ours = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (pure / "_test_dependencies.pth").write_text("\n".join(ours) + "\n")
    elsewhere.mkdir()
    return venv, elsewhere, env


def run(installed, *args: str) -> subprocess.CompletedProcess:
    venv, elsewhere, env = installed
    proc = subprocess.run(args, cwd=elsewhere, env={**env, "COLUMNS": "200"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_cr2_config_validate_reads_the_packaged_configs(installed):
    venv, elsewhere, _ = installed
    cr2 = str(venv / "bin" / "cr2")
    default = load_config().section_hash()
    assert f"valid (hash {default}," in run(installed, cr2, "config", "validate", "configs/default.yaml").stdout
    assert f"valid (hash {default}," in run(installed, cr2, "config", "validate", "default").stdout
    measured = load_config(REPO_ROOT / "configs" / "mmlu-pro-measured.yaml").section_hash()
    assert f"valid (hash {measured}," in run(installed, cr2, "config", "validate", "mmlu-pro-measured").stdout
    assert f"# config hash: {default}" in run(installed, cr2, "config", "show").stdout
    # a config of the user's folder extends the packaged one
    (elsewhere / "mine.yaml").write_text("extends: default\nseed: 7\n")
    own = load_config(REPO_ROOT / "configs" / "default.yaml", overrides={"seed": 7}).section_hash()
    assert f"valid (hash {own}," in run(installed, cr2, "config", "validate", "mine.yaml").stdout
    assert not (elsewhere / "var").exists()  # validating writes no warehouse


def test_installed_cr2_finds_its_files_in_the_venv_not_the_checkout(installed):
    venv, elsewhere, _ = installed
    where = json.loads(run(installed, str(venv / "bin" / "python"), "-c", WHERE).stdout)
    assert where["in_checkout"] is False
    assert not where["missing"], f"shipped data missing from the wheel: {where['missing']}"
    assert "mmlu" in where["benchmarks"] and "mmlu_pro" in where["benchmarks"]
    for key in ("cr2", "default", "datasets", "routers", "architectures"):
        assert Path(where[key]).is_relative_to(venv), f"{key}: {where[key]} is not the installed wheel's"
    assert all(Path(p).is_relative_to(venv) for p in where["data"]), where["data"]
    assert Path(where["home"]) == elsewhere.resolve() / "var"  # the default home outside a checkout: ./var


INSTALLED_NAMES = {"cr2", "cr2_cli", "cr2_flows", "cr2_tasks", "cr2_warehouse", "cr2_configs", "cr2_data"}


def test_the_wheel_claims_only_cr2_prefixed_import_names(installed):
    """The repository's flows/, tasks/ and warehouse/ install as cr2_flows, cr2_tasks and cr2_warehouse (setup.py): a
    user's own `tasks.py` or `flows/` neither shadows cr2's nor is shadowed by it."""
    venv, _, _ = installed
    (pure,) = {Path(p) for p in (venv / "lib").glob("python3*/site-packages")}
    (record,) = pure.glob("cr2-*.dist-info/RECORD")
    tops = {line.split(",")[0].split("/")[0] for line in record.read_text().splitlines() if line.strip()}
    names = {t.removesuffix(".py") for t in tops if t != ".." and not t.endswith(".dist-info")}
    assert names == INSTALLED_NAMES, f"installed import names: {sorted(names)}"
    probe = ("import importlib.util, json; print(json.dumps({n: importlib.util.find_spec(n) is not None for n in "
             f"{sorted(INSTALLED_NAMES | {'tasks', 'flows', 'warehouse'})!r}}}))")
    found = json.loads(run(installed, str(venv / "bin" / "python"), "-c", probe).stdout)
    assert found == {n: n in INSTALLED_NAMES for n in found}, found
