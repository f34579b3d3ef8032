"""docs/your_pool.md, followed literally: every code block of the guide runs, in order, on the toy pool it builds.

yaml blocks headed `# file: PATH` are written to PATH, python blocks are executed, and every line of a bash
block is one `cr2` command run through the CLI. The guide's folder `my-pool/` becomes a fresh folder (inside
the repository root, where the guide says to run; removed afterwards), the only change made to its text.

Also here: the pieces the guide relies on — optional gold targets (null accepted where the
dataset definition says so, refused with a clear message elsewhere, empty strings refused always), the schema 3 → 4
migration that lets `queries.target` be NULL, several hardware profiles in one config, and the closed-set type.
"""
from __future__ import annotations

import re
import shlex
import shutil
import uuid

import numpy as np
import pandas as pd
import pytest

from cr2.config import REPO_ROOT, load_config
from cr2.core.errors import ConfigError, DataValidationError

GUIDE = REPO_ROOT / "docs" / "your_pool.md"
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.S | re.M)


def guide_blocks(folder: str) -> list[tuple[str, str]]:
    """(language, text) of each fenced block of the guide with a language, `my-pool` renamed to `folder`."""
    return [(lang, text.replace("my-pool", folder)) for lang, text in BLOCK.findall(GUIDE.read_text(encoding="utf-8"))]


def test_guide_has_the_whole_path():
    blocks = guide_blocks("my-pool")
    commands = [line.split()[1] for lang, text in blocks if lang == "bash" for line in text.splitlines()
                if line.startswith("cr2 ")]
    assert commands[:1] == ["config"] and {"ingest", "labels", "run", "results", "sql"} <= set(commands)
    order = [c for c in commands if c in ("ingest", "labels", "run", "results")]
    assert order.index("ingest") < order.index("labels") < order.index("run") < order.index("results")
    imports = [line for lang, text in blocks if lang == "bash" for line in text.splitlines() if " labels import" in line]
    assert imports and all(" -c " in line for line in imports)
    assert any(lang == "yaml" and text.startswith("# file: ") for lang, text in blocks)


@pytest.mark.slow
@pytest.mark.flow
def test_guide_runs_as_written(prefect_harness, monkeypatch):
    """Every block of docs/your_pool.md, in order: dataset definition, questions, config, ingest, import, run,
    results, sql — on 240 toy questions and four models (≈ 2–4 min on a busy 2-core machine)."""
    from typer.testing import CliRunner

    from cr2_cli.main import app

    folder = f".your-pool-test-{uuid.uuid4().hex[:8]}"
    root = REPO_ROOT / folder
    monkeypatch.chdir(REPO_ROOT)
    outputs = []
    try:
        for lang, text in guide_blocks(folder):
            if lang == "yaml":
                head, _, body = text.partition("\n")
                assert head.startswith("# file: "), f"a yaml block without a `# file:` line: {head}"
                path = REPO_ROOT / head.removeprefix("# file: ").strip()
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
            elif lang == "python":
                exec(compile(text, str(GUIDE), "exec"), {"__name__": "guide"})
            elif lang == "bash":
                for line in text.splitlines():
                    if not line.strip() or line.startswith("#"):
                        continue
                    args = shlex.split(line)
                    assert args[0] == "cr2", line
                    result = CliRunner().invoke(app, args[1:], terminal_width=200)
                    assert result.exit_code == 0, f"{line}\n{result.output}"
                    outputs.append((line, result.output))
        from cr2_warehouse.db import Warehouse

        with Warehouse(root / "var", read_only=True) as wh:
            assert wh.scalar("SELECT count(*) FROM queries WHERE target IS NULL") == 240
            assert wh.scalar("SELECT count(*) FROM labels WHERE source = 'my-labels'") == 4 * 240
            assert wh.scalar("SELECT min(label_source) FROM eval_runs") == "my-labels"
            platforms = dict(wh.df("SELECT model_id, platform FROM models").itertuples(index=False))
        assert platforms["gemma-2-27b"] == "h100-80gb" and platforms["llama-3.1-70b"] == "2x-h100-80gb"
        assert (root / "var" / "report" / "index.html").is_file()
        sql_out = next(out for line, out in outputs if line.startswith("cr2 sql"))
        assert "llama-3.2-1b" in sql_out and "gemma-2-27b" in sql_out
    finally:
        shutil.rmtree(root, ignore_errors=True)


# ---------------------------------------------------------------- the pieces the guide relies on
def _toy_definition(tmp_path, target: str | None, answer: str = "generative", extra: str = "") -> str:
    path = tmp_path / "toy_gen.yaml"
    path.write_text(f"""description: toy
file: {tmp_path / 'toy_gen.parquet'}
answer: {answer}
{'target: ' + target if target else ''}
lm_eval: {{metric: exact_match}}
default_output_tokens: 8
{extra}""", encoding="utf-8")
    return str(path)


def _toy_questions(tmp_path, targets, choices=None) -> None:
    n = len(targets)
    pd.DataFrame({"query_id": [f"toy_gen/s/{i:05d}" for i in range(n)], "benchmark": "toy_gen", "subset": "s",
                  "question": [f"What is {i} plus {i}?" for i in range(n)],
                  "choices": choices if choices is not None else [None] * n, "target": targets,
                  "tests": [None] * n, "test_setup": [None] * n}).to_parquet(tmp_path / "toy_gen.parquet", index=False)


def _ingest(tmp_path, definition):
    from cr2_tasks.ingest import ingest_queries

    cfg = load_config(overrides={"benchmarks": {"mmlu": {"enabled": False}, "bbh": {"enabled": False},
                                                "gpqa": {"enabled": False}, "mbpp": {"enabled": False},
                                                "toy_gen": {"definition": definition}}})
    home = tmp_path / "home"
    return ingest_queries.fn(cfg, str(home)), home


def test_null_target_needs_the_dataset_definition_to_say_optional(tmp_path):
    from cr2_warehouse.db import Warehouse

    _toy_questions(tmp_path, [None, "2", None])
    with pytest.raises(DataValidationError, match=r"toy_gen/s/00000: no target; benchmark 'toy_gen' requires a gold "
                                                  r"answer .*`target: optional`"):
        _ingest(tmp_path, _toy_definition(tmp_path, None))
    assert not (tmp_path / "home" / "cr2.duckdb").exists() or Warehouse(tmp_path / "home").count("queries") == 0
    out, home = _ingest(tmp_path, _toy_definition(tmp_path, "optional"))
    with Warehouse(home, read_only=True) as wh:
        targets = wh.df("SELECT query_id, target FROM queries ORDER BY query_id")["target"].tolist()
    assert targets[1] == "2" and pd.isna(targets[0]) and pd.isna(targets[2])


@pytest.mark.parametrize("target", ["", "   "])
@pytest.mark.parametrize("declared", [None, "optional"])
def test_empty_target_is_refused_even_when_optional(tmp_path, target, declared):
    _toy_questions(tmp_path, ["4", target])
    with pytest.raises(DataValidationError, match=r"toy_gen/s/00001: empty target .*leave it null"):
        _ingest(tmp_path, _toy_definition(tmp_path, declared))


def test_lm_eval_docs_refuse_queries_without_a_target():
    from cr2.labels.lmeval.docs import build_docs
    from cr2.config.lmeval import TemplateSpec

    rows = pd.DataFrame({"query_id": ["gsm8k/test/00000"], "benchmark": ["gsm8k"], "subset": ["test"],
                         "question": ["1 + 1?"], "choices": [None], "target": [None], "tests": [None],
                         "test_setup": [None]})
    template = TemplateSpec(doc_to_text="{{question}}", doc_to_target="{{target}}", until=["\n"], max_gen_toks=8,
                            metric="exact_match")
    with pytest.raises(DataValidationError, match="no gold target .*cr2 labels import"):
        build_docs("gsm8k", rows, template)


def test_schema_3_warehouse_migrates_to_a_nullable_target(tmp_path):
    """A schema-3 warehouse (queries.target NOT NULL) is upgraded in place by the first writable open."""
    import duckdb

    from cr2_warehouse.db import DB_NAME, SCHEMA_VERSION, Warehouse

    con = duckdb.connect(str(tmp_path / DB_NAME))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR NOT NULL)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '3')")
    con.execute("CREATE TABLE queries (query_id VARCHAR PRIMARY KEY, benchmark VARCHAR NOT NULL, subset VARCHAR NOT "
                "NULL, question VARCHAR NOT NULL, choices VARCHAR[], target VARCHAR NOT NULL, tests VARCHAR[], "
                "test_setup VARCHAR, prompt_tokens INTEGER NOT NULL, tokenizer VARCHAR NOT NULL, content_hash VARCHAR "
                "NOT NULL)")
    con.execute("INSERT INTO queries VALUES ('a/b/00000', 'a', 'b', 'q', NULL, 'x', NULL, NULL, 3, 't', 'h')")
    con.close()
    with Warehouse(tmp_path, read_only=True) as wh:
        assert wh.schema_version == "3" and wh.count("queries") == 1
    with Warehouse(tmp_path) as wh:
        assert wh.schema_version == SCHEMA_VERSION == "9"
        wh.con.execute("INSERT INTO queries VALUES ('a/b/00001', 'a', 'b', 'q', NULL, NULL, NULL, NULL, 3, 't', 'h')")
        assert wh.scalar("SELECT count(*) FROM queries WHERE target IS NULL") == 1


def test_several_hardware_profiles_merge_and_conflicts_are_refused(tmp_path):
    cfg = load_config(REPO_ROOT / "configs" / "zeroeval-gemma.yaml")
    assert cfg.hardware.name == "mmlu-pro-pool+datacenter-1gpu"
    assert {m.platform for m in cfg.models} == {"jetson-agx-orin", "rtx-4090", "h100-80gb", "2x-h100-80gb"}
    assert cfg.hardware.platforms["h100-80gb"].memory_bandwidth_bytes_per_s == 2680e9
    # one 80 GB GPU holds a 27B model in bf16 (54 GB of weights)
    gemma = next(m for m in cfg.models if m.id == "gemma-2-27b-it")
    assert gemma.params * cfg.hardware.platforms[gemma.platform].bytes_per_param < 80e9
    other = tmp_path / "other.yaml"
    other.write_text("name: other\nplatforms:\n  rtx-4090: {prefill_flops_per_s: 1.0e12, "
                     "memory_bandwidth_bytes_per_s: 1.0e9}\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"platform 'rtx-4090' differs between profiles 'default' .* and 'other'"):
        load_config(overrides={"hardware": ["default", str(other)]})
    with pytest.raises(ConfigError, match=r"platform 'h100-80gb'.*does not define.*merges profiles"):
        load_config(REPO_ROOT / "configs" / "zeroeval-gemma.yaml", overrides={"hardware": ["mmlu-pro-pool"]})


def test_closed_set_answers_are_checked_against_choices_or_answer_set(tmp_path):
    definition = _toy_definition(tmp_path, None, answer="closed-set", extra="answer_set: [valid, invalid]")
    _toy_questions(tmp_path, ["valid", "invalid"])
    out, _ = _ingest(tmp_path, definition)
    _toy_questions(tmp_path, ["valid", "maybe"])
    with pytest.raises(DataValidationError, match=r"toy_gen/s/00001: target 'maybe' not among its answers"):
        _ingest(tmp_path, definition)
    # per-query options that are not letters: "(A)", "12"
    definition = _toy_definition(tmp_path, None, answer="closed-set")
    _toy_questions(tmp_path, ["(B)", "12"], choices=[["(A)", "(B)"], ["10", "12", "14"]])
    _ingest(tmp_path, definition)
    _toy_questions(tmp_path, ["(C)", "12"], choices=[["(A)", "(B)"], ["10", "12", "14"]])
    with pytest.raises(DataValidationError, match=r"target '\(C\)' not among its answers \['\(A\)', '\(B\)'\]"):
        _ingest(tmp_path, definition)
    from cr2.config.dataset_defs import read_definition

    path = tmp_path / "toy_acc.yaml"
    path.write_text("file: x.parquet\nanswer: closed-set\nlm_eval: {metric: acc}\ndefault_output_tokens: 4\n")
    with pytest.raises(ConfigError, match="closed-set benchmark is exact_match"):
        read_definition(path)
