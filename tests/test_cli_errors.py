"""Bad inputs end cleanly: every CLI error path exits non-zero with one message, no traceback, and leaves the
warehouse exactly as it was (an empty label file imported with exit 0, `cr2 route ""` ended in a
traceback, a COPY through `cr2 sql` overwrote the warehouse).
"""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from cr2_cli.main import app
from cr2_warehouse.db import DB_NAME, Warehouse, table_names

HEAVY = "SELECT count(*) FROM range(1000000000000) a"  # minutes of work: only a time limit ends it


@pytest.fixture(scope="module")
def ingested(small_data_dir, tmp_path_factory):
    """A warehouse with queries and models (ingest only), and a folder of bad input files."""
    from cr2.config import load_config
    from cr2_tasks.ingest import ingest_queries

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
    # before: 1e20 / 9999999999 an OverflowError traceback (and no limit), 1e-6 an interrupt before the query started
    (["sql", "SELECT 1", "--timeout", "1e20"], "number of seconds in [0.01, 86400]"),
    (["sql", "SELECT 1", "--timeout", "9999999999"], "number of seconds in [0.01, 86400]"),
    (["sql", "SELECT 1", "--timeout", "1e-6"], "number of seconds in [0.01, 86400]"),
    (["sql", "SELECT 1", "--timeout", "nan"], "number of seconds in [0.01, 86400]"),
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
    import cr2_warehouse.db

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(cr2_warehouse.db, "open_user_query", boom)
    result = _invoke(["sql", "SELECT 1", "--home", str(ingested["home"])])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "unexpected RuntimeError: boom" in result.output and "CR2_TRACEBACK=1" in result.output


def test_read_only_sql_still_answers(ingested):
    result = _invoke(["sql", "SELECT count(*) AS n FROM queries", "--home", str(ingested["home"])])
    assert result.exit_code == 0, result.output
    with Warehouse(ingested["home"], read_only=True) as wh:
        assert str(wh.count("queries")) in result.output


# ------------------------------------------------------------------ fourth round
def test_p7_sql_fetches_only_the_rows_it_prints(ingested):
    """Before: `--limit 2` fetched all 400M rows first (MemoryError "bug" under a 4 GB cap). Run under a 3 GiB
    address-space cap, so a regression fails here instead of taking the machine's memory."""
    import subprocess
    import sys

    capped = "import resource, sys; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); " \
             "import cr2_cli.main; cr2_cli.main.main(sys.argv[1:])"
    out = subprocess.run([sys.executable, "-c", capped, "sql", "SELECT range AS n FROM range(400000000)", "--limit", "2",
                          "--home", str(ingested["home"])], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.stdout + out.stderr)[-1000:]
    rows = [line for line in out.stdout.splitlines() if line.startswith("│")]
    assert [r.strip("│ ") for r in rows] == ["0", "1"], out.stdout
    assert "more rows not fetched" in out.stdout


def test_p8_the_time_limit_holds_when_the_interrupt_comes_before_execution(ingested):
    """Before: an interrupt that fired before DuckDB started executing was lost and the query ran unbounded. Here
    each statement takes 0.2 s to start (a busy machine, a long parse), longer than the 0.05 s limit."""
    import threading
    import time

    from cr2_warehouse.db import UserQueryError, open_user_query

    class SlowStart:
        def __init__(self, con):
            self._con = con

        def execute(self, *args, **kwargs):
            time.sleep(0.2)
            return self._con.execute(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._con, name)

    wh = open_user_query(ingested["home"])
    real = wh.con
    wh.con = SlowStart(real)
    outcome: dict = {}

    def run() -> None:
        try:
            wh.user_query(HEAVY, timeout_s=0.05)
        except UserQueryError as exc:
            outcome["error"] = str(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(30)
    try:
        assert not worker.is_alive(), "the query ran on past its time limit"
        assert "ran longer than 0.05 s" in outcome.get("error", ""), outcome
    finally:
        while worker.is_alive():  # a regression: stop the runaway query before the next test
            real.interrupt()
            worker.join(0.1)
        wh.close()


def _flipped(src, dst, offset: int = 12288 + 100):
    """A copy of the warehouse folder `src` at `dst` with one byte of the first data block flipped."""
    import shutil

    shutil.copytree(src, dst)
    with open(dst / DB_NAME, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0xFF]))
    return dst


@pytest.mark.parametrize("args", [["sql", "SELECT count(*) FROM queries"], ["labels", "list"],
                                  ["route", "What is 2 + 2?"]])
def test_p9_a_damaged_warehouse_file_is_named_not_a_bug(ingested, tmp_path, args):
    """Before: one flipped byte gave "unexpected Error: Corrupt database file … bug", exit 1."""
    home = _flipped(ingested["home"], tmp_path / "home")
    result = _invoke([*args, "--home", str(home)])
    out = " ".join(result.output.split())
    assert result.exit_code == 2 and f"{home / DB_NAME} is damaged" in out and "bug" not in out, out


def _labels_csv(home, path, field_for_first=None, header="query_id,model,correct"):
    with Warehouse(home, read_only=True) as wh:
        queries = wh.df("SELECT query_id FROM queries")["query_id"].tolist()
        models = wh.df("SELECT model_id FROM models")["model_id"].tolist()
    lines = [header] + [f"{q},{m},1" + (",0" * (header.count(",") - 2)) for q in queries for m in models]
    if field_for_first is not None:
        lines[1] = f"{field_for_first},{models[0]},1"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_p14_an_unknown_id_is_echoed_short_and_a_column_given_twice_is_refused(ingested, tmp_path):
    """Before: a 200 MB unknown query id was echoed whole (a 200 MB error line); a CSV with two `correct` columns
    imported silently with the first."""
    home = ingested["home"]
    before = _fingerprints(home)
    long_id = _labels_csv(home, tmp_path / "long.csv", field_for_first="q" * 200_000)
    result = _invoke(["labels", "import", str(long_id), "--source", "mine", "--home", str(home)])
    assert result.exit_code == 2 and "not in the warehouse" in result.output, result.output[:500]
    assert len(result.output) < 2000 and "200,002 characters" in result.output, result.output[:500]
    twice = _labels_csv(home, tmp_path / "twice.csv", header="query_id,model,correct,correct")
    result = _invoke(["labels", "import", str(twice), "--source", "mine", "--home", str(home)])
    out = " ".join(result.output.split())
    assert result.exit_code == 2 and "'correct' appears more than once" in out, out
    assert _fingerprints(home) == before


def test_p15_an_unterminated_osc_hides_nothing_and_the_table_stays_aligned(ingested):
    """Before: `ESC ]` without its terminator swallowed the rest of the cell and misaligned the table."""
    result = _invoke(["sql", "SELECT 'ab' || chr(27) || ']0;the rest' AS t, 'x' AS u UNION ALL SELECT 'plain', 'y'",
                      "--home", str(ingested["home"])])
    assert result.exit_code == 0, result.output
    assert "the rest" in result.output and "\x1b" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len({len(line) for line in lines}) == 1, lines  # every row as wide as the frame


def test_p12_every_file_the_cli_reads_is_read_bounded(ingested, tmp_path, monkeypatch):
    """Before: a YAML syntax error in --architectures was "unexpected ParserError … bug" (and /dev/zero a
    MemoryError), an `extends:` chain of 1,000 files a RecursionError, a --home symlink loop a RuntimeError."""
    import cr2_cli.prefect_api

    monkeypatch.setattr(cr2_cli.prefect_api, "prestart", lambda *_: None)  # no temporary Prefect server for a refusal
    bad = tmp_path / "arch.yaml"
    bad.write_text("architectures: {qwen: [unclosed\n")
    for arch, said in ((bad, "arch.yaml: malformed YAML at line"), ("/dev/zero", "/dev/zero: is a device")):
        result = _invoke(["label", "--estimate", "--architectures", str(arch), "--home", str(ingested["home"])])
        out = " ".join(result.output.split())
        assert result.exit_code == 2 and said in out and "bug" not in out, out
    chain = tmp_path / "chain"
    chain.mkdir()
    (chain / "c0.yaml").write_text("extends: default\n")
    for i in range(1, 1000):
        (chain / f"c{i}.yaml").write_text(f"extends: c{i - 1}.yaml\n")
    result = _invoke(["config", "validate", str(chain / "c999.yaml")])
    out = " ".join(result.output.split())
    assert result.exit_code == 2 and "chain is longer than" in out and "bug" not in out, out
    loop = tmp_path / "loop"
    loop.symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(loop)
    result = _invoke(["sql", "SELECT 1", "--home", str(loop)])
    out = " ".join(result.output.split())
    assert result.exit_code == 2 and "symbolic links form a loop" in out and "bug" not in out, out


def test_p12_a_fifo_as_the_config_is_refused_not_waited_on(tmp_path):
    """Before: `cr2 config validate` of a named pipe waited forever for a writer."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    try:
        out = subprocess.run([sys.executable, "-c", "from cr2_cli.main import main; main()", "config", "validate",
                              str(fifo)], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("cr2 config validate waited on a FIFO")
    assert out.returncode == 2 and "named pipe (FIFO)" in out.stderr, out.stderr[-500:]


def test_p11_a_full_disk_during_an_import_is_a_clean_error_naming_the_file(ingested, tmp_path):
    """Before: "unexpected TransactionException … No space left on device … bug" (the warehouse stayed intact)."""
    import shutil

    from tests.full_disk import FullDisk

    labels = _labels_csv(ingested["home"], tmp_path / "labels.csv")
    with FullDisk(tmp_path) as disk:
        home = disk.folder / "home"
        shutil.copytree(ingested["home"], home)
        before = _fingerprints(home)
        disk.fill()
        out = disk.run(["labels", "import", labels, "--source", "mine", "--home", home])
        text = " ".join(out.stdout.split())
        assert out.returncode == 2, (disk.mechanism, text[-800:])
        assert "the disk holding it is full" in text and str(home) in text and "bug" not in text, (disk.mechanism, text)
        assert _fingerprints(home) == before
