"""The house's layers and no import circles, as an import-linter contract (.importlinter).

cr2_cli > flows > tasks > warehouse > cr2: no module imports from a layer above its own (directly or through
another module; imports inside functions count), cr2 imports none of the others, and no two sibling modules of
a package import each other. Nothing below the CLI imports cr2_cli, and the results page imports nothing from
flows (what it needs of a study lives in cr2/studies). `lint-imports` reads the source tree (nothing is imported), so this is quick.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert "5 kept, 0 broken" in proc.stdout, report


@pytest.mark.parametrize("module, line, caught", [
    ("cr2/upward.py", "from cr2_tasks.store import cache_key  # an upward import\n", "cr2.upward -> cr2_tasks.store"),
    # allowed by the layers (cr2_cli is above flows), refused by the page's own contract
    ("cr2_cli/resultsdoc/flowish.py", "from cr2_flows.premise import premise  # the page reading a flow\n",
     "cr2_cli.resultsdoc.flowish -> cr2_flows.premise"),
])
def test_the_contract_catches_a_forbidden_import(tmp_path, module, line, caught):
    # the same contracts on a copy of the tree with one forbidden import added must fail, naming it
    for pkg, folder in (("cr2_cli", "cr2_cli"), ("cr2_flows", "flows"), ("cr2_tasks", "tasks"),
                        ("cr2_warehouse", "warehouse"), ("cr2", "cr2")):  # import name, repository folder (setup.py)
        shutil.copytree(ROOT / folder, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / module).write_text(line)
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([_lint_imports(), "--config", str(ROOT / ".importlinter"), "--no-cache"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert caught in proc.stdout, proc.stdout[-3000:]


# ---------------------------------------------------------------- database access only in warehouse/
# what a module calls on a Warehouse, its DuckDB connection or a relation when it reads or writes rows itself
DB_METHODS = frozenset({"df", "coded_df", "scalar", "execute", "executemany", "sql", "insert_df", "replace_where",
                        "delete_where", "transaction", "unregister", "fetchall", "fetchone", "fetchdf"})
OUTSIDE_WAREHOUSE = ("cr2", "cr2_cli", "flows", "tasks")
IO_WAITERS = frozenset({"sel", "selector", "poller"})  # names of selectors.Selector / select.poll objects
# modules another change is moving behind warehouse/ functions; each must still hold a direct call (so the entry is
# removed when it lands, and the list only shrinks)
PENDING: set[str] = set()


def database_calls(source: str) -> list[str]:
    """'line: call' of every direct database call in Python source: a Warehouse / connection method of DB_METHODS,
    the connection itself (`.con`) or a named SQL file (`named_query`)."""
    import ast

    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in DB_METHODS:
            if node.func.attr == "unregister" and ast.unparse(node.func.value) in IO_WAITERS:
                continue  # a selector's / poller's unregister(fd), not DuckDB's unregister(view)
            hits.append(f"{node.lineno}: {ast.unparse(node.func)}")
        elif isinstance(node, ast.Attribute) and node.attr == "con":
            hits.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Name) and node.id == "named_query":
            hits.append(f"{node.lineno}: named_query")
    return hits


def test_database_access_lives_in_warehouse():
    found = {}
    for pkg in OUTSIDE_WAREHOUSE:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            hits = database_calls(path.read_text(encoding="utf-8"))
            if hits:
                found[rel] = hits
    direct = {rel: hits for rel, hits in found.items() if rel not in PENDING}
    assert not direct, ("database calls outside warehouse/ — add a named read/write to the warehouse module that owns "
                        f"the concept and call it: {direct}")
    assert PENDING <= set(found), f"{sorted(PENDING - set(found))} no longer call the database: drop them from PENDING"


def test_the_scan_sees_each_kind_of_database_call():
    source = ("def f(wh, con):\n    wh.df(named_query('x'))\n    wh.scalar('SELECT 1')\n    con.execute('SELECT 1')\n"
              "    with wh.transaction() as c:\n        wh.insert_df('t', None, c)\n    wh.con.sql('SELECT 1')\n")
    calls = " ".join(database_calls(source))
    for call in ("wh.df", "named_query", "wh.scalar", "con.execute", "wh.transaction", "wh.insert_df", "wh.con"):
        assert call in calls, call
    assert not database_calls("def g(words, names):\n    return words.count('a') + len(names.split())\n")
