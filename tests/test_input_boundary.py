"""The input boundary (cr2/core/boundary.py) and what it closes on the command line.

N3 (text that is not UTF-8), N4 (terminal control sequences), N7 (YAML alias bombs, /dev/zero), the minor
points (a missing --home creates nothing, d = 1e-300 m, credentials in endpoint URLs), and a hypothesis
property over the CLI's arguments: arbitrary Unicode, bytes and huge numbers never end in "bug" (exit 1).
"""
from __future__ import annotations

import time
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cr2.core.boundary import check_text, check_texts, load_yaml, parse_number, printable
from cr2.core.errors import ConfigError, InvalidValueError
from cr2_cli.main import main

BOMB = "\n".join(["a: &a [x, x, x, x, x, x, x, x, x, x]"] +
                 [f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]" for p, n in zip("abcdefgh", "bcdefghi")]) + "\n"


@pytest.fixture(scope="module")
def ingested(small_data_dir, tmp_path_factory):
    from cr2.config import load_config
    from cr2_tasks.ingest import ingest_queries

    home = tmp_path_factory.mktemp("boundary") / "home"
    ingest_queries.fn(load_config(overrides={"data_dir": str(small_data_dir)}), str(home))
    return home


def run_cli(args, capsys) -> tuple[int, str]:
    """(exit code, stdout + stderr) of `cr2 ARGS` run in this process through the real entry point."""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out = capsys.readouterr()
    return code, out.out + out.err


# ------------------------------------------------------------------ the boundary functions
@pytest.mark.parametrize("value", [10 ** 400, -(10 ** 400), "1" * 401, "1e400", "nan", "-inf", True, [1], "0x10"])
def test_numbers_out_of_range_or_not_numbers_are_refused_naming_the_field(value):
    with pytest.raises(InvalidValueError, match="cr2_lam"):
        parse_number(value, "cr2_lam", 0.0)


def test_numbers_in_range_pass_exactly():
    assert parse_number("2", "x", 0.0) == 2.0 and parse_number(7, "x", 0.0, 10.0) == 7.0
    assert parse_number(" 0.5 ", "x", 0.0, 1.0) == 0.5
    with pytest.raises(InvalidValueError, match=r"in \(0, 1\)"):
        parse_number(1, "x", 0.0, 1.0)


@pytest.mark.parametrize("text", ["\udfff", "caf\udce9?", "\ud83d", "ok \ud800 no"])
def test_lone_surrogates_are_refused_naming_the_field(text):
    with pytest.raises(InvalidValueError, match="choice 2 is not valid UTF-8"):
        check_text(text, "choice 2")
    with pytest.raises(InvalidValueError, match=r"body\.messages\[0\]\.content"):
        check_texts({"messages": [{"role": "user", "content": text}]})
    assert check_text("café ✓ 😀", "q") == "café ✓ 😀"


@pytest.mark.parametrize("raw, shown", [
    ("\x1b]0;PWNED\x07\x1b[2Jhello", "hello"),          # retitle the window, clear the screen
    ("a\x1b[31mred\x1b[0m b", "ared b"),                 # colours
    ("x\x9b2Jy\x9d0;t\x9cz", "xyz"),                      # C1 CSI / OSC
    ("bell\x07 back\x08 del\x7f cr\r", "bell back del cr"),
    ("tab\tand\nnewline", "tab\tand\nnewline"),          # kept
    ("evil\u202egpj.exe", "evilgpj.exe"),                 # right-to-left override: the name would read reversed
    ("\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069\u200e\u200f\u061cok", "ok"),  # every bidi control
])
def test_printable_strips_every_control_sequence_but_newline_and_tab(raw, shown):
    assert printable(raw) == shown


def test_shown_cuts_a_huge_value_and_names_its_length():
    from cr2.core.boundary import MAX_SHOWN_CHARS, shown

    huge = "b" * 50_000_000
    t0 = time.perf_counter()
    text = shown(huge)
    assert time.perf_counter() - t0 < 0.05  # sliced before its repr is taken
    assert len(text) < MAX_SHOWN_CHARS + 30 and text.endswith("… (50,000,000 chars)")
    assert shown("math") == "'math'" and shown(3) == "3"
    assert "\x1b" not in shown("a\x1b[2Jb")


def test_yaml_alias_bomb_is_refused_fast():
    assert len(BOMB) < 600
    t0 = time.perf_counter()
    with pytest.raises(InvalidValueError, match="expands to more than"):
        load_yaml(BOMB, "bomb.yaml")
    assert time.perf_counter() - t0 < 2.0  # bounded: the budget is checked on distinct objects, not their expansion
    with pytest.raises(InvalidValueError, match="contains it"):
        load_yaml("a: &a [1, *a]", "loop.yaml")
    assert load_yaml("a: &a [1, 2]\nb: *a\n", "ok.yaml") == {"a": [1, 2], "b": [1, 2]}


DEEP = "a: " + "[" * 500 + "]" * 500 + "\n"
LONG_LIST = "a: [" + ", ".join(["1"] * 266_000) + "]\n"  # 800 kB: within the byte budget, not the value budget


@pytest.mark.parametrize("text, refusal", [(DEEP, "nested deeper than 64 levels"),
                                           (LONG_LIST, "more than 100,000 values")])
def test_deep_or_long_yaml_is_refused_while_parsing(text, refusal):
    t0 = time.perf_counter()
    with pytest.raises(InvalidValueError, match=refusal) as err:
        load_yaml(text, "big.yaml")
    assert time.perf_counter() - t0 < 1.0  # stopped at the first event past the budget, nothing constructed
    assert str(err.value).startswith("big.yaml")


def test_deep_yaml_is_refused_cleanly_wherever_a_file_is_read(tmp_path, capsys):
    from cr2.config import load_state_distribution

    deep = tmp_path / "deep.yaml"
    deep.write_text(DEEP)
    for args in (["config", "validate", str(deep)], ["config", "show", "-c", str(deep)]):
        code, out = run_cli(args, capsys)
        assert code == 2 and "nested deeper than" in out and "bug" not in out, (args, out)
    with pytest.raises(ConfigError, match="deep.yaml: nested deeper than"):
        load_state_distribution(deep)


@pytest.mark.parametrize("text, line, key", [
    ("a: 1\nb: 2\na: 3\n", 3, "'a'"),
    ("seed: 0\nchannel:\n  x: 1\n  y: 2\n  x: 3\n", 5, "'x'"),
    ("{p: 1, p: 2}\n", 1, "'p'"),
    ("1: a\n0x1: b\n", 2, "1"),                            # equal once constructed: 1 == 0x1
])
def test_duplicate_yaml_keys_are_refused_naming_file_line_and_key(text, line, key):
    with pytest.raises(InvalidValueError) as err:
        load_yaml(text, "dup.yaml")
    msg = str(err.value)
    assert msg.startswith("dup.yaml") and f"line {line}" in msg and f"key {key}" in msg, msg


def test_merge_keys_may_be_overridden_and_shipped_configs_have_no_duplicate_key():
    from cr2.config import REPO_ROOT
    from cr2.core.boundary import load_yaml_file

    assert load_yaml("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  x: 3\n", "m.yaml")["use"] == {"x": 3, "y": 2}
    assert load_yaml("a: &a {<<: {k: 1}, k: 2}\nb: {<<: *a, k: 3}\n", "m.yaml") == {"a": {"k": 2}, "b": {"k": 3}}
    files = sorted((REPO_ROOT / "configs").rglob("*.yaml")) + sorted((REPO_ROOT / "cr2").rglob("*.yaml"))
    assert len(files) > 10
    for f in files:
        load_yaml_file(f)


def test_config_validate_refuses_a_setting_given_twice(tmp_path, capsys):
    cfg = tmp_path / "twice.yaml"
    cfg.write_text("extends: default\nseed: 1\nseed: 2\n")
    code, out = run_cli(["config", "validate", str(cfg)], capsys)
    out = " ".join(out.split())
    assert code == 2 and "line 3" in out and "key 'seed'" in out and "twice.yaml" in out, out


# ------------------------------------------------------------------ N7 on the command line
def test_config_validate_refuses_an_alias_bomb_and_dev_zero(tmp_path, capsys):
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(BOMB + "baselines:\n  params:\n    knn: {bomb: *i}\n")
    t0 = time.perf_counter()
    code, out = run_cli(["config", "validate", str(bomb)], capsys)
    assert code == 2 and "expands to more than" in out and "bug" not in out, out
    code, out = run_cli(["config", "show", "-c", str(bomb)], capsys)
    assert code == 2 and "expands to more than" in out, out
    code, out = run_cli(["config", "validate", "/dev/zero"], capsys)
    assert code == 2 and "is a device, not a regular YAML file" in out and "bug" not in out, out
    big = tmp_path / "big.yaml"
    big.write_text("# padding\n" * 200_000)
    code, out = run_cli(["config", "validate", str(big)], capsys)
    assert code == 2 and "larger than" in out and "bug" not in out, out
    assert time.perf_counter() - t0 < 10


# ------------------------------------------------------------------ N3 / N4 on the command line
def test_arguments_that_are_not_utf8_are_refused_naming_the_argument(ingested, capsys):
    home = str(ingested)
    for args in (["route", "caf\udce9?", "--home", home], ["route", "q", "--choice", "\udcff", "--home", home],
                 ["sql", "SELECT '\udcff'", "--home", home]):
        code, out = run_cli(args, capsys)
        assert code == 2 and "not valid UTF-8" in out and "bug" not in out, (args, out)


def test_sql_output_carries_no_terminal_control_sequences(ingested, capsys):
    code, out = run_cli(["sql", "SELECT chr(27)||']0;PWNED'||chr(7)||chr(27)||'[2J' || 'visible' AS t",
                         "--home", str(ingested)], capsys)
    assert code == 0, out
    assert "visible" in out and "\x1b" not in out and "\x07" not in out and "\x9b" not in out


def test_server_log_lines_are_printable():
    import logging

    from cr2_cli.serve.server import PrintableLog

    record = logging.LogRecord("uvicorn.access", logging.INFO, __file__, 1, '%s - "GET %s"', ("127.0.0.1",
                               "/\x1b]0;PWNED\x07x"), None)
    assert PrintableLog().filter(record) and record.getMessage() == '127.0.0.1 - "GET /x"'


# ------------------------------------------------------------------ minor points
@pytest.mark.parametrize("args", [["results"], ["guarantees"], ["labels", "import", "nofile.csv", "--source", "x"],
                                  ["recalibrate", "--states", "far-rician"], ["train"], ["calibrate"]])
def test_commands_on_a_missing_home_create_nothing(tmp_path, capsys, monkeypatch, args):
    monkeypatch.delenv("PREFECT_HOME", raising=False)
    home = tmp_path / "nowhere"
    code, out = run_cli(args + ["--home", str(home)], capsys)
    assert code == 2 and "no warehouse" in out, out
    assert not home.exists(), sorted(p.name for p in home.rglob("*"))


def test_a_distance_below_the_path_loss_reference_is_refused_without_a_warning(ingested, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out = run_cli(["route", "What is 2 + 2?", "--distance-m", "1e-300", "--home", str(ingested)], capsys)
    assert code == 2 and "distance_m must be" in out and "non-finite" not in out, out


@pytest.mark.parametrize("url", ["http://user:pass@edge:8000/v1", "http://user@edge/v1", "ftp://edge/v1", "edge:8000",
                                 "http://edge:port/v1"])
def test_endpoint_urls_with_credentials_or_without_http_are_refused(url):
    from cr2.config import load_config

    with pytest.raises(ConfigError, match="serving.endpoints.qwen3-4b"):
        load_config(overrides={"serving": {"endpoints": {"qwen3-4b": url}}})
    assert load_config(overrides={"serving": {"endpoints": {"qwen3-4b": "https://edge:8000/v1"}}})


# ------------------------------------------------------------------ the property: never "bug"
_ANY_CHAR = st.characters(blacklist_characters="\x00", blacklist_categories=())
_ARG = st.one_of(
    st.text(_ANY_CHAR, max_size=40),
    st.binary(max_size=24).filter(lambda b: b"\x00" not in b).map(lambda b: b.decode("utf-8", "surrogateescape")),
    st.integers(min_value=-(10 ** 500), max_value=10 ** 500).map(str),
    st.sampled_from(["1e400", "-1e400", "nan", "inf", "1e-300", "0", "-0", "1" * 401, "0x1p3", "", " "]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(cmd=st.sampled_from(["route", "route-num", "sql", "config", "labels", "results", "export"]), a=_ARG, b=_ARG)
def test_no_argument_makes_the_cli_report_a_bug(ingested, capsys, cmd, a, b):
    home = str(ingested)
    args = {
        "route": ["route", a, "--choice", b, "--home", home],
        "route-num": ["route", "What is 2 + 2?", "--lam", a, "--distance-m", b, "--seed", a, "--home", home],
        "sql": ["sql", a, "--home", home, "--limit", b],
        "config": ["config", "validate", a],
        "labels": ["labels", "import", a, "--source", b, "--home", home],
        "results": ["results", "--alpha", a, "--home", home],
        "export": ["export", a, "--home", home],
    }[cmd]
    code, out = run_cli(args, capsys)
    assert code != 1 and "bug" not in out, (args, out)
