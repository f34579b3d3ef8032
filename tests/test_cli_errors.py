"""Bad inputs end cleanly: every CLI error path exits non-zero with one message, no traceback, and leaves the
warehouse exactly as it was (an empty label file imported with exit 0, `cr2 route ""` ended in a
traceback, a COPY through `cr2 sql` overwrote the warehouse).
"""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cr2_cli.main import app
from warehouse.db import DB_NAME, Warehouse, table_names

HEAVY = "SELECT count(*) FROM range(1000000000000) a"  # minutes of work: only a time limit ends it


@pytest.fixture(scope="module")
def ingested(small_data_dir, tmp_path_factory):
    """A warehouse with queries and models (ingest only), and a folder of bad input files."""
    from cr2.config import load_config
    from tasks.ingest import ingest_queries

    root = tmp_path_factory.mktemp("cli-errors")
    home = root / "home"
    cfg = load_config(overrides={"data_dir": str(small_data_dir)})
    ingest_queries.fn(cfg, str(home))
    files = root / "files"
    files.mkdir()
    (files / "empty.csv").write_text("")
    (files / "header-only.csv").write_text("query_id,model,correct\n")
    (files / "bad.yaml").write_text("models: [\n")
    (files / "broken").mkdir()
    (files / "broken" / DB_NAME).write_bytes(b"x" * 14)  # what the COPY probe left behind
    return {"home": home, "files": files, "root": root}


def _fingerprints(home):
    with Warehouse(home, read_only=True) as wh:
        return {t: wh.table_fingerprint(t) for t in table_names()}


def _invoke(args):
    return CliRunner().invoke(app, args)


BAD = [
    (["labels", "import", "{files}/empty.csv", "--source", "mine"], "not a readable csv"),
    (["labels", "import", "{files}/header-only.csv", "--source", "mine"], "has no rows"),
    (["labels", "import", "{files}/missing.csv", "--source", "mine"], "file not found"),
    (["labels", "import", "{files}/header-only.csv", "--source", "simulated-irt-v1"], "built-in label source"),
    (["route", ""], "query text is empty"),
    (["route", "   "], "query text is empty"),
    (["route", "What is 2 + 2?", "--lam", "nan"], "finite number > 0"),
    (["route", "What is 2 + 2?", "--lam", "0"], "finite number > 0"),
    (["route", "What is 2 + 2?", "--alpha", "1.5"], "α must be a number in (0, 1)"),
    (["route", "What is 2 + 2?", "--distance-m", "-3"], "distance_m must be"),
    (["route", "What is 2 + 2?", "--choice", ""], "non-empty"),
    (["route", "What is 2 + 2?"], "no threshold table"),
    (["export-gate", "{root}/gate-out"], "no threshold table"),
    (["sql", "COPY (SELECT 'x') TO '{home}/cr2.duckdb'"], "COPY statements are not allowed"),
    (["sql", "SELECT * FROM read_text('/etc/shadow')"], "file system operations are disabled"),
    (["sql", "SELECT * FROM read_text('/proc/self/environ')"], "file system operations are disabled"),
    (["sql", "SELECT * FROM glob('/root/*')"], "file system operations are disabled"),
    (["sql", "SELECT 1; DELETE FROM queries"], "2 statements given"),
    (["sql", "SET enable_external_access = true"], "SET statements are not allowed"),
    (["sql", "ATTACH '{root}/other.duckdb' AS o"], "ATTACH statements are not allowed"),
    (["sql", "INSERT INTO meta VALUES ('k', 'v')"], "INSERT statements are not allowed"),
    (["sql", "DROP TABLE queries"], "DROP statements are not allowed"),
    (["sql", "SELEC 1"], "Parser Error"),
    (["sql", ""], "no SQL statement given"),
    (["sql", HEAVY, "--timeout", "1"], "ran longer than 1 s"),
    (["sql", "SELECT 1", "--timeout", "0"], "number of seconds in [0.01, 86400]"),
    (["export", "querie"], "did you mean 'queries'"),
    (["export", "models", "--out", "/proc/cr2-cannot-be-here"], "cannot create the export folder"),
    (["recalibrate", "--states", "no-such-states"], "unknown states"),
    (["drift", "--states", "no-such-states"], "states"),
    (["config", "validate", "{files}/bad.yaml"], "bad.yaml"),
    (["serve", "--host", "0.0.0.0"], "CR2_SERVE_TOKEN"),
]


@pytest.mark.parametrize("args, message", BAD, ids=[" ".join(a)[:60] for a, _ in BAD])
def test_bad_input_is_one_clear_error_and_changes_nothing(ingested, monkeypatch, args, message):
    monkeypatch.delenv("CR2_SERVE_TOKEN", raising=False)
    home = ingested["home"]
    fmt = {"files": ingested["files"], "home": home, "root": ingested["root"]}
    argv = [a.format(**fmt) for a in args]
    if argv[0] not in ("config",):
        argv += ["--home", str(home)]
    before = _fingerprints(home)
    size = (home / DB_NAME).stat().st_size
    result = _invoke(argv)
    assert result.exit_code != 0, result.output
    assert isinstance(result.exception, SystemExit), repr(result.exception)  # not an uncaught exception
    assert "Traceback" not in result.output
    assert message in " ".join(result.output.split()), result.output
    assert _fingerprints(home) == before
    assert (home / DB_NAME).stat().st_size == size


def test_a_damaged_warehouse_is_named_as_such_not_as_locked(ingested):
    broken = ingested["files"] / "broken"
    result = _invoke(["sql", "SELECT 1", "--home", str(broken)])
    assert result.exit_code == 2 and "not a valid warehouse file" in " ".join(result.output.split())
    assert "another cr2 process" not in result.output and "locked" not in result.output
    assert (broken / DB_NAME).read_bytes() == b"x" * 14


def test_an_unexpected_error_is_one_line_with_a_way_to_the_traceback(ingested, monkeypatch):
    import warehouse.db

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(warehouse.db, "open_user_query", boom)
    result = _invoke(["sql", "SELECT 1", "--home", str(ingested["home"])])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "unexpected RuntimeError: boom" in result.output and "CR2_TRACEBACK=1" in result.output


def test_read_only_sql_still_answers(ingested):
    result = _invoke(["sql", "SELECT count(*) AS n FROM queries", "--home", str(ingested["home"])])
    assert result.exit_code == 0, result.output
    with Warehouse(ingested["home"], read_only=True) as wh:
        assert str(wh.count("queries")) in result.output
