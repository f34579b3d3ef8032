"""Label diagnostics of every pool of a pool rule on ALL MMLU-Pro questions, straight from the outputs file.

`python scripts/pool_label_diagnostics.py [configs/pools/mmlu-pro.yaml]` prints one markdown row per pool: each
model's accuracy, the φ of device and m_ref correctness and the mean φ over the pool's 6 pairs, P(device right |
m_ref wrong), P(m_ref right | device wrong) and the share some model solves (cr2.studies.pools.pool_label_table; the
measured extraction rule of docs/measured.md: a null `pred` counts as wrong). No embeddings and no costs: the
headroom and the k-NN AUCs come from `cr2 study pools` (v_pool_diagnostics). docs/results.md prints the same table
(cr2_cli/resultsdoc/pools.py) from the same function.
"""
from __future__ import annotations

import sys
from pathlib import Path

from cr2.studies.pools import load_pool_rule, pool_label_table, select_pools
from warehouse.measured_files import read_measured_correctness

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    rule = load_pool_rule(sys.argv[1] if len(sys.argv) > 1 else ROOT / "configs/pools/mmlu-pro.yaml")
    names, correct = read_measured_correctness(ROOT / "data")
    print("| pool | n | accuracy (device / edges… / m_ref) | φ device–m_ref | mean φ | P(dev ✓ \\| ref ✗) | "
          "P(ref ✓ \\| dev ✗) | solvable |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in pool_label_table(correct, names, select_pools(rule)):
        print(f"| {r['pool']} | {r['n']} | {' / '.join(f'{a:.3f}' for a in r['accuracy'])} | "
              f"{r['phi_device_ref']:.2f} | {r['phi_mean']:.2f} | {r['p_device_right_given_ref_wrong']:.3f} | "
              f"{r['p_ref_right_given_device_wrong']:.3f} | {r['solvable']:.3f} |")
