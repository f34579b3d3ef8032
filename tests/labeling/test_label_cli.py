"""`cr2 label` from the command line, against the tiny local Qwen3 (real flow, hf backend)."""
from __future__ import annotations

import pytest
import typer
from typer.testing import CliRunner

from cr2_cli.console import friendly
from cr2_cli.commands.label import label_command
from cr2_warehouse.db import Warehouse

CONFIG = """extends: default
data_dir: {data}
models:
  - {{id: qwen3-1.7b, hf_name: {tiny}, params: 1.7e9,  platform: jetson-agx-orin, role: device}}
  - {{id: qwen3-4b,   hf_name: Qwen/Qwen3-4B,   params: 4.0e9,  platform: rtx-4070-ti, role: edge, server_power_w: 150.0}}
  - {{id: qwen3-8b,   hf_name: Qwen/Qwen3-8B,   params: 8.2e9,  platform: rtx-4090,    role: edge, server_power_w: 300.0}}
  - {{id: qwen3-14b,  hf_name: Qwen/Qwen3-14B,  params: 14.8e9, platform: a40,         role: edge, server_power_w: 200.0}}
"""
LABELING = """labeling:
  hf: {dtype: float32, device: cpu, num_threads: 1}
  chunk_size: 2
  retries: 0
"""


def _app() -> typer.Typer:
    """The command wired exactly as cr2_cli/main.py wires it."""
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """cr2 (test app)."""

    app.command("label")(friendly(label_command, flow=True))
    return app


@pytest.fixture()
def cli_files(tmp_path, label_data_dir, tiny_model_dir):
    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(CONFIG.format(data=label_data_dir, tiny=tiny_model_dir))
    lab = tmp_path / "labeling.yaml"
    lab.write_text(LABELING)
    return cfg, lab


@pytest.mark.slow
@pytest.mark.flow
def test_cr2_label_against_the_tiny_model(prefect_harness, label_home, cli_files, tiny_model_dir):
    cfg, lab = cli_files
    result = CliRunner().invoke(_app(), [
        "label", "--models", "qwen3-1.7b,qwen3-4b", "--benchmarks", "mmlu", "-b", "mbpp", "--backend", "hf",
        "--limit", "3", "--model-path", f"qwen3-4b={tiny_model_dir}", "--labeling", str(lab),
        "--config", str(cfg), "--home", str(label_home),
    ])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "labels written" in out and "12 labels written" in out
    with Warehouse(label_home, read_only=True) as wh:
        labels = wh.df("SELECT l.model_id, q.benchmark, count(*) AS n FROM labels l JOIN queries q USING (query_id) "
                       "GROUP BY ALL ORDER BY ALL")
        runs = wh.df("SELECT run_id, status, backend_args FROM label_runs")
    assert labels.values.tolist() == [["qwen3-1.7b", "mbpp", 3], ["qwen3-1.7b", "mmlu", 3],
                                      ["qwen3-4b", "mbpp", 3], ["qwen3-4b", "mmlu", 3]]
    assert len(runs) == 4 and (runs["status"] == "finished").all()
    assert all(str(tiny_model_dir) in a for a in runs["backend_args"])  # hf_name and --model-path both resolved
    for rid in runs["run_id"]:
        assert f"  {rid}\n" in out  # the summary lists every run id, unwrapped


@pytest.mark.parametrize("args, message", [
    (["--backend", "vlm"], "did you mean 'vllm'"),
    (["--models", "qwen3-7b"], "unknown model 'qwen3-7b'"),
    (["--benchmarks", "mmlu,gsm9k"], "unknown benchmark 'gsm9k'"),  # (gsm8k has a dataset definition; gsm9k has none)
    (["--model-path", "qwen3-4b"], "MODEL_ID=FOLDER"),
])
def test_cr2_label_rejects_bad_arguments_with_a_clear_message(args, message, cli_files, label_home):
    cfg, _ = cli_files
    result = CliRunner().invoke(_app(), ["label", *args, "--config", str(cfg), "--home", str(label_home)])
    assert result.exit_code == 2, result.output
    assert message in result.output.replace("\n", " ")
    with Warehouse(label_home, read_only=True) as wh:
        assert wh.count("label_runs") == 0 and wh.count("labels") == 0
