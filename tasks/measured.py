"""Measured labels task: published model outputs (data/measured/) → the configured label source.

Reads the outputs file named by `labels.measured` (any measured pool), matches its items onto the ingested
queries through `labels.measured.join` and its model names onto the pool (cr2.labels.measured), and writes the labels through the same validated, all-or-nothing
path as `cr2 labels import`, with a `label_runs` row per model recording the origin (repository, commit,
files, extraction rule, characters per token). Cached: same file, pool, mapping and queries → no work.
"""
from __future__ import annotations

import hashlib

import pandas as pd
from prefect import task

from cr2.config import Config
from cr2.core.boundary import parse_table, read_table_bytes, read_table_file
from cr2.core.errors import DataValidationError
from cr2_tasks.common import Reads, Rows, Stage
from cr2_warehouse.db import Warehouse
from cr2_warehouse.inputs import benchmark_query_ids
from cr2_warehouse.labels_import import import_label_frame

@task(name="prepare-measured-labels")
def import_measured_labels_task(config: Config, home: str) -> dict:
    """MEASURED y_m(x) and L_out,m(x) of the pool's models under labels.source (replacing that source's rows)."""
    from cr2.labels.measured import join_measured_labels

    spec = config.labels.measured
    path = config.data_path / spec.outputs_file
    if not path.is_file():
        raise DataValidationError(f"{path}: measured outputs file not found; restore it (data/README.md) or fix "
                                  "labels.measured.outputs_file")
    with Warehouse(home, read_only=True) as wh:
        ingested = {b: benchmark_query_ids(wh, b) for b in spec.benchmarks}
    frames = []
    for bench in spec.benchmarks:
        file = config.benchmark_file(bench)
        frame = read_table_file(file)
        absent = [c for c in spec.join.values() if c not in frame.columns]
        if absent:
            raise DataValidationError(f"{file}: no column {', '.join(absent)} to match the measured outputs on "
                                      f"(labels.measured.join: {spec.join})")
        frame = frame[frame["query_id"].isin(ingested[bench])]
        frames.append(frame[["query_id", *dict.fromkeys(spec.join.values())]].assign(benchmark=bench))
    queries = pd.concat(frames, ignore_index=True)
    raw = read_table_bytes(path, "measured outputs file")  # read once, bounded: the table and its digest agree
    outputs = parse_table(raw, path, columns=["model", "correct", "generated_chars", *spec.join])
    for out_col, bench_col in spec.join.items():  # one key type on both sides (an integer id kept as text in one file)
        if queries[bench_col].dtype != outputs[out_col].dtype:
            queries[bench_col], outputs[out_col] = queries[bench_col].astype(str), outputs[out_col].astype(str)
    frame = join_measured_labels(outputs, queries, spec.join, spec.models, spec.chars_per_token)
    origin = {**spec.origin.model_dump(), "file": spec.outputs_file, "chars_per_token": spec.chars_per_token,
              "model_names": spec.models, "sha256": hashlib.sha256(raw).hexdigest()}
    return import_label_frame(home, frame, config.labels.source, origin, origin["sha256"][:12], replace=True)


MEASURED_LABELS = Stage(import_measured_labels_task, Reads(
    config=("labels", "data_dir", "benchmarks"),
    rows=(Rows("queries", columns=("query_id", "benchmark")),),
    files=lambda c: [c.data_path / c.labels.measured.outputs_file,
                     *(c.benchmark_file(b) for b in c.labels.measured.benchmarks)],
    writes=("labels", "label_runs")))
