"""Label diagnostics of every pool of a pool rule on ALL MMLU-Pro questions, straight from the outputs file.

`python scripts/pool_label_diagnostics.py [configs/pools/mmlu-pro.yaml]` prints one markdown row per pool: each
model's accuracy, the φ of device and m_ref correctness and the mean φ over the pool's 6 pairs, P(device right |
m_ref wrong), P(m_ref right | device wrong) and the share some model solves (cr2.studies.pools.pool_label_table; the
measured extraction rule of docs/measured.md: a null `pred` counts as wrong). No embeddings and no costs: the
headroom and the k-NN AUCs come from `cr2 study pools` (v_pool_diagnostics). docs/results.md prints the same table
through the same table object (cr2.report.pools.LabelDiagnostics) from the same function.
"""
from __future__ import annotations

import sys
from pathlib import Path

from cr2.studies.pools import load_pool_rule, pool_label_table, select_pools
from cr2.report.pools import LabelDiagnostics
from cr2_warehouse.measured_files import read_measured_correctness

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    rule = load_pool_rule(sys.argv[1] if len(sys.argv) > 1 else ROOT / "configs/pools/mmlu-pro.yaml")
    names, correct = read_measured_correctness(ROOT / "data")
    print(LabelDiagnostics(pool_label_table(correct, names, select_pools(rule))).markdown(), end="")
