"""Report: the self-contained HTML page of one evaluation run (figures embedded, tables as CSV and LaTeX).

Cached on the evaluation run, the gate, the baselines and ablations shown, the config and the code; a
cached page that was deleted since is built again.
"""
from __future__ import annotations

from pathlib import Path

from cr2.config import Config
from cr2_tasks.common import run_stage
from cr2_tasks.report import REPORT


def report(config: Config, home: Path, evaluated: dict, trained: dict, baselines: dict, data_counts: dict,
           ablated: dict | None = None) -> dict:
    return run_stage(REPORT, config, home, evaluated, data_counts, trained, baselines, ablated)
