"""No SQL is built from strings: every value travels as a parameter, every spliced name is a validated identifier.

The scan reads the source of every package and benchmark (and the tests): an f-string, `%`-format,
`.format()` or `+` that builds text containing SQL may splice in only calls to the identifier helpers of
warehouse/db.py (`ident`, `idents`, `relation`, `where_clause`, `view_sql`) or `named_query` (SQL files of
this repository). The hostile-name tests then feed names an attacker would choose through the paths that
once built SQL from them.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pandas as pd
import pytest

from cr2.config import REPO_ROOT
from cr2.core.errors import Cr2Error, UnknownNameError, WarehouseError
from cr2_warehouse.db import Warehouse, ident, relation, table_names

SCANNED = ("cr2", "tasks", "flows", "warehouse", "cr2_cli", "benchmarks", "tests")
SAFE_CALLS = {"ident", "idents", "relation", "where_clause", "view_sql", "named_query"}
SQL = re.compile(r"\b(SELECT|INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET|COPY|CREATE|DROP|ALTER|ATTACH|PRAGMA|"
                 r"INSTALL|LOAD|WHERE|FROM)\b")
HOSTILE = "cell' OR true; DELETE FROM thresholds; --"
SHOWN = "# sql-text: shown to the user, never run"


def _text(node: ast.AST) -> str:
    """The literal text of a string expression (f-string parts included)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    if isinstance(node, ast.BinOp):
        return _text(node.left) + _text(node.right)
    return ""


def _safe(node: ast.AST) -> bool:
    """A spliced-in expression that cannot carry a value: a string literal or a call of an identifier helper."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int)):
        return True
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join"
            and isinstance(node.func.value, ast.Constant) and len(node.args) == 1
            and isinstance(node.args[0], (ast.GeneratorExp, ast.ListComp))):
        return _safe(node.args[0].elt)  # ", ".join(<helper call> for …)
    if isinstance(node, ast.Call):
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
        return name in SAFE_CALLS
    if isinstance(node, ast.JoinedStr):
        return all(_safe(v.value) for v in node.values if isinstance(v, ast.FormattedValue))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _safe(node.left) and _safe(node.right)
    return False


def sql_built_from_strings(source: str) -> list[tuple[int, str]]:
    """(line, snippet) of every place that builds SQL text from something other than literals and helpers.

    Text that only shows a user a query to type (an error hint, a report caption) carries the marker
    `# sql-text: shown to the user, never run` on the line where it starts."""
    found = []
    lines = source.splitlines()
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        bad = False
        if isinstance(node, ast.JoinedStr) and not isinstance(parents.get(node), (ast.JoinedStr, ast.FormattedValue)):
            if SQL.search(_text(node)):
                bad = not _safe(node)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and SQL.search(_text(node.left)):
            bad = True
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and not isinstance(parents.get(node), ast.BinOp):
            if SQL.search(_text(node)):
                bad = not _safe(node)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
              and SQL.search(_text(node.func.value))):
            bad = not all(_safe(a) for a in [*node.args, *(k.value for k in node.keywords)])
        if bad and not any(SHOWN in lines[i] for i in range(max(0, node.lineno - 2), node.end_lineno)):
            found.append((node.lineno, ast.get_source_segment(source, node)[:120]))
    return found


def test_the_scan_catches_sql_built_from_strings():
    assert sql_built_from_strings('wh.table_fingerprint("states", f"WHERE dist_id = \'{dist_id}\'")')
    assert sql_built_from_strings('con.execute(f"COPY (SELECT * FROM {table}) TO \'{tmp}\' (FORMAT parquet)")')
    assert sql_built_from_strings('q = "SELECT * FROM t WHERE a = \'%s\'" % name')
    assert sql_built_from_strings('q = "DELETE FROM t WHERE a = \'{}\'".format(name)')
    assert sql_built_from_strings('q = "SELECT * FROM t WHERE a = \'" + name + "\'"')
    assert not sql_built_from_strings('con.execute(f"DELETE FROM {relation(t)}{where_clause(w)}", params)')
    assert not sql_built_from_strings('raise ValueError(f"unknown model {name}")')


@pytest.mark.parametrize("package", SCANNED)
def test_no_sql_is_built_from_strings(package):
    offenders = []
    for path in sorted((REPO_ROOT / package).rglob("*.py")):
        if path.name == "test_sql_safety.py":
            continue
        offenders += [f"{path.relative_to(REPO_ROOT)}:{line}: {snippet}"
                      for line, snippet in sql_built_from_strings(path.read_text(encoding="utf-8"))]
    assert not offenders, "SQL built from strings (use ? parameters or cr2_warehouse.db.ident/relation):\n" + "\n".join(offenders)


# ------------------------------------------------------------------ validated identifiers
@pytest.mark.parametrize("name", [HOSTILE, 'x"; DROP TABLE meta; --', "a b", "1abc", "", "ümlaut", "t\x00"])
def test_identifiers_that_are_not_plain_names_are_refused(name):
    with pytest.raises(WarehouseError, match="not a valid SQL identifier"):
        ident(name)
    with pytest.raises(UnknownNameError):
        relation(name)


def test_only_schema_tables_and_views_are_relations():
    assert relation("thresholds") == '"thresholds"'
    with pytest.raises(UnknownNameError, match="did you mean 'thresholds'"):
        relation("threshold")


# ------------------------------------------------------------------ hostile names through the writers
def _seed_thresholds(home: Path) -> int:
    row = {"version": 1, "gate_fingerprint": "g", "dist_id": "d", "label_source": "s", "rule": "crc", "lam": 1.0,
           "alpha": 0.1, "tau": 0.5, "n_calib": 10, "score_dtype": "float32", "created_at": pd.Timestamp("2026-01-01")}
    with Warehouse(home) as wh:
        wh.replace_where("thresholds", pd.DataFrame([row]))
        return wh.count("thresholds")


def _all_fingerprints(home: Path) -> dict:
    with Warehouse(home, read_only=True) as wh:
        return {t: wh.table_fingerprint(t) for t in table_names()}


def test_hostile_state_distribution_and_label_source_reach_sql_only_as_values(small_config, home):
    """The probe: a state distribution named `cell' OR true; DELETE FROM thresholds; --` made `cr2 prepare`
    delete every threshold. Now it is a value like any other."""
    from cr2_tasks.ingest import ingest_queries
    from cr2_tasks.prepare import COSTS, compute_costs_task, sample_states_task, simulate_labels_task

    ingest_queries.fn(small_config, str(home))
    n = _seed_thresholds(home)
    dist = small_config.channel.distribution.model_copy(update={"name": HOSTILE})
    cfg = small_config.model_copy(update={
        "channel": small_config.channel.model_copy(update={"distribution": dist}),
        "labels": small_config.labels.model_copy(update={"source": "simulated-irt-v1"})})
    assert HOSTILE in cfg.channel.distribution.dist_id
    sample_states_task.fn(cfg, str(home))
    simulate_labels_task.fn(cfg, str(home))
    COSTS.key(cfg, home)
    hostile_labels = cfg.model_copy(update={"labels": cfg.labels.model_copy(update={"source": HOSTILE})})
    COSTS.key(hostile_labels, home)
    out = compute_costs_task.fn(cfg, str(home))
    with Warehouse(home, read_only=True) as wh:
        assert wh.count("thresholds") == n
        assert wh.scalar("SELECT count(DISTINCT dist_id) FROM states WHERE dist_id = ?", [dist.dist_id]) == 1
        assert wh.scalar("SELECT count(*) FROM costs WHERE dist_id = ?", [dist.dist_id]) == out["rows"] > 0


def test_hostile_label_source_and_model_id_in_an_import(small_config, home, tmp_path):
    from cr2_tasks.ingest import ingest_queries
    from cr2_warehouse.labels_import import import_labels

    ingest_queries.fn(small_config, str(home))
    n = _seed_thresholds(home)
    with Warehouse(home, read_only=True) as wh:
        qids = wh.df("SELECT query_id FROM queries ORDER BY query_id LIMIT 3")["query_id"].tolist()
    f = tmp_path / "labels.csv"
    pd.DataFrame({"query_id": qids, "model": small_config.models[0].id, "correct": [1, 0, 1]}).to_csv(f, index=False)
    with pytest.raises(Cr2Error, match="label source .* is not a valid name"):  # one pattern for user-given names
        import_labels(home, f, HOSTILE)
    bad = tmp_path / "bad.csv"
    pd.DataFrame({"query_id": qids[:1], "model": [HOSTILE], "correct": [1]}).to_csv(bad, index=False)
    with pytest.raises(Cr2Error, match="outside the pool"):
        import_labels(home, bad, "other")
    with Warehouse(home, read_only=True) as wh:
        assert wh.count("thresholds") == n
        assert wh.scalar("SELECT count(*) FROM labels WHERE source = ?", [HOSTILE]) == 0
        wh.table_fingerprint("labels", {"source": HOSTILE, "model_id": HOSTILE})  # hostile values bind as values


def test_export_path_with_quotes_and_sql_is_only_a_path(home, tmp_path):
    """The probe: `cr2 export --out "…' (FORMAT csv); COPY … TO '…'"` ran the injected COPY."""
    _seed_thresholds(home)
    victim = tmp_path / "injected.csv"
    out = tmp_path / f"x' (FORMAT csv); COPY (SELECT 42) TO '{victim}"
    before = _all_fingerprints(home)
    with Warehouse(home, read_only=True) as wh:
        path = wh.export("thresholds", out)
    assert path == out / "thresholds.parquet" and path.is_file()
    assert pd.read_parquet(path)["version"].tolist() == [1]
    assert not victim.exists()
    assert _all_fingerprints(home) == before
