"""Write data/benchmarks/{gsm8k,cruxeval,math_l5}.parquet from data/measured/zeroeval/zeroeval_questions.parquet.

Run from the repository root: `python scripts/make_zeroeval_benchmarks.py`. Deterministic: the same
questions file gives the same tables (tests/test_zeroeval.py checks the shipped files against it).
Provenance of the source: data/measured/zeroeval/README.md and data/README.md.
"""
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from cr2.labels.zeroeval import BENCHMARKS, zeroeval_benchmark_frame

ROOT = Path(__file__).resolve().parents[1]

if __name__ == "__main__":
    questions = pd.read_parquet(ROOT / "data/measured/zeroeval/zeroeval_questions.parquet")
    for name in BENCHMARKS:
        frame = zeroeval_benchmark_frame(questions, name)
        schema = pa.schema([(c, pa.list_(pa.string()) if c in ("choices", "tests") else pa.string())
                            for c in frame.columns])  # choices/tests typed as in the other benchmark files
        table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
        pq.write_table(table, ROOT / f"data/benchmarks/{name}.parquet", compression="zstd", compression_level=19,
                       write_statistics=False)
        print(f"{name}: {len(frame)} questions")
