"""Label diagnostics of every pool of a pool rule on ALL MMLU-Pro questions, straight from the outputs file.

`python scripts/pool_label_diagnostics.py [configs/pools/mmlu-pro.yaml]` prints one markdown row per pool: each
model's accuracy, the φ of device and m_ref correctness and the mean φ over the pool's 6 pairs, P(device right |
m_ref wrong), P(m_ref right | device wrong) and the share some model solves (cr2.diagnostics.label_rows; the
measured extraction rule of docs/measured.md: a null `pred` counts as wrong). No embeddings and no costs: the
headroom and the k-NN AUCs come from `cr2 study pools` (v_pool_diagnostics).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from cr2.diagnostics import label_rows
from cr2.pools import load_pool_rule, select_pools

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    rule = load_pool_rule(sys.argv[1] if len(sys.argv) > 1 else ROOT / "configs/pools/mmlu-pro.yaml")
    out = pd.read_parquet(ROOT / "data/measured/mmlu_pro_outputs.parquet",
                          columns=["model", "question_id", "pred", "correct"])
    out["ok"] = out["correct"].fillna(False).astype(bool) & out["pred"].notna()
    wide = out.pivot(index="question_id", columns="model", values="ok")
    print("| pool | n | accuracy (device / edges… / m_ref) | φ device–m_ref | mean φ | P(dev ✓ \\| ref ✗) | "
          "P(ref ✓ \\| dev ✗) | solvable |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for pool in select_pools(rule):
        names = [m.name for m in pool.models]
        y = wide[names].dropna().to_numpy(dtype=bool)
        ids = [m.pool_id for m in pool.models]
        ref = names.index(pool.reference.name)
        r = {(x["metric"], x["subject"], x["other"]): x["estimate"] for x in label_rows(y, ids, 0, ref)}
        phi = [v for (m, _, _), v in r.items() if m == "phi"]
        dev_ref = r.get(("phi", ids[0], ids[ref]))
        acc = " / ".join(f"{r[('accuracy', i, None)]:.3f}" for i in ids)
        print(f"| {pool.pool_id} | {len(y)} | {acc} | "
              f"{dev_ref:.2f} | {np.mean(phi):.2f} | "
              f"{r[('p_device_right_given_largest_wrong', ids[0], ids[ref])]:.3f} | "
              f"{r[('p_largest_right_given_device_wrong', ids[ref], ids[0])]:.3f} | "
              f"{r[('solvable_rate', 'any', None)]:.3f} |")
