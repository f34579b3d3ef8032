"""Write data/benchmarks/mmlu_pro_sample2k.parquet: the pool sweep's 2,000-question MMLU-Pro sample (docs/pools.md).

Run from the repository root: `python scripts/make_mmlu_pro_sample.py`. Deterministic: the 2,000 questions of
data/benchmarks/mmlu_pro.parquet with the smallest salted hash of their MMLU-Pro question id — the same stable
subsample `cr2 simcheck` embeds (tasks/simcheck.subsample_rows, salt "cr2-simcheck", simcheck.n_questions 2000).
[cr2 decision] the sample exists because embedding all 12,032 questions takes over an hour on a loaded 2-core
machine; the sweep runs unchanged on the full set with configs/mmlu-pro-measured.yaml.
"""
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pandas as pd

from cr2_tasks.simcheck import subsample_rows

ROOT = Path(__file__).resolve().parents[1]
N_QUESTIONS = 2000

if __name__ == "__main__":
    full = pd.read_parquet(ROOT / "data/benchmarks/mmlu_pro.parquet")
    rows = subsample_rows(full["mmlu_pro_question_id"].to_numpy(), N_QUESTIONS)
    frame = full.iloc[rows].reset_index(drop=True)
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), ROOT / "data/benchmarks/mmlu_pro_sample2k.parquet",
                   compression="zstd", compression_level=19, write_statistics=False)
    print(f"{len(frame)} questions, {frame['subset'].nunique()} subsets")
