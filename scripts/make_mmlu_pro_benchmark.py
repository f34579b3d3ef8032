"""Write data/benchmarks/mmlu_pro.parquet from data/measured/mmlu_pro_questions.parquet (data/README.md).

Run from the repository root: `python scripts/make_mmlu_pro_benchmark.py`. Deterministic: the same
questions file gives the same table (tests/test_measured.py checks the shipped file against it).
"""
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from cr2.labels.measured import mmlu_pro_benchmark_frame

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    frame = mmlu_pro_benchmark_frame(pd.read_parquet(ROOT / "data/measured/mmlu_pro_questions.parquet"))
    table = pa.Table.from_pandas(frame, preserve_index=False)
    pq.write_table(table, ROOT / "data/benchmarks/mmlu_pro.parquet", compression="zstd", compression_level=19,
                   write_statistics=False)
    print(f"{len(frame)} questions, {frame['subset'].nunique()} subsets")
