"""Import correctness labels produced elsewhere (your own lm-eval runs, another lab's) under a source name.

All rows are validated first (cr2.labels.imported); then the `labels` rows of the source and one
`label_runs` row per model are written in one transaction, so a bad file writes nothing. Used by `cr2 labels
import` and by the measured-labels task (tasks/measured.py).
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import pandas as pd

from cr2.core.errors import DataValidationError
from cr2.labels import LABEL_SOURCES
from cr2.labels.imported import validate_imported_labels
from cr2.config.names import check_name
from cr2_warehouse.db import Warehouse
from cr2_warehouse.files import parse_table, read_table_bytes


def _refuse_existing(source: str, existing: int, replace: bool) -> None:
    if existing and not replace:
        raise DataValidationError(f"label source '{source}' already has {existing:,} rows; pass --replace to overwrite "
                                  "them, or import under another --source")


def import_labels(home: str | Path, path: str | Path, source: str, replace: bool = False) -> dict:
    """Validate and write the labels of `path` under `source`; returns rows per model."""
    data = read_table_bytes(path)  # read once, bounded: the table and its digest come from the same bytes
    digest = hashlib.sha256(data).hexdigest()[:12]
    return import_label_frame(home, parse_table(data, path), source, {"file": str(Path(path).resolve())}, digest,
                              replace)


def import_label_frame(home: str | Path, raw: pd.DataFrame, source: str, origin: dict, digest: str,
                       replace: bool = False) -> dict:
    """Validate the label table `raw` and write it under `source` in one transaction, with one `label_runs`
    row per model whose backend_args record `origin` (file, repository, commit, extraction rule, …)."""
    check_name(source, "label source")  # before anything is read or written
    if source in LABEL_SOURCES:
        raise DataValidationError(f"'{source}' names a built-in label source; pick another name for imported labels")
    # validate on a read-only connection: a refused import does not even open the file for writing
    with Warehouse(home, read_only=True) as wh:
        known_q = wh.df("SELECT query_id FROM queries")["query_id"]
        known_m = wh.df("SELECT model_id FROM models")["model_id"]
        existing = int(wh.scalar("SELECT count(*) FROM labels WHERE source = ?", [source]))
    if known_q.empty:
        raise DataValidationError("the warehouse has no queries yet; run `cr2 ingest` (or `cr2 run`) first")
    _refuse_existing(source, existing, replace)  # early, before a long validation; decided again under the lock
    rows = validate_imported_labels(raw, set(known_q), set(known_m))
    with Warehouse(home) as wh:  # the write lock: no other process writes until this import has committed
        now = dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)
        run_ids = {m: f"import:{source}:{m}:{digest}" for m in rows["model_id"].unique()}
        runs = pd.DataFrame([{"run_id": rid, "source": source, "model_id": m, "revision": None, "backend": "import",
                              "backend_args": json.dumps(origin, sort_keys=True), "lm_eval_version": None,
                              "task_config_hash": None, "started_at": now, "finished_at": now, "status": "finished",
                              "done": int((rows["model_id"] == m).sum()), "total": int((rows["model_id"] == m).sum())}
                             for m, rid in run_ids.items()])
        out = rows.assign(source=source, run_id=rows["model_id"].map(run_ids))
        # Int64 as validated (0 … MAX_OUTPUT_TOKENS): no narrowing cast here, which wrapped 2^31 + 5
        with wh.transaction() as con:
            # the check that decides, inside the lock and the transaction that writes: of N importers of one source
            # started at once, the first writes and every later one finds its rows and refuses
            _refuse_existing(source, int(con.execute("SELECT count(*) FROM labels WHERE source = ?",
                                                     [source]).fetchone()[0]), replace)
            wh.delete_where("labels", {"source": source}, con)
            con.execute("DELETE FROM label_runs WHERE source = ?", [source])
            wh.insert_df("label_runs", runs, con)
            wh.insert_df("labels", out[["source", "query_id", "model_id", "correct", "output_tokens", "run_id"]], con)
    return {"source": source, "rows": len(out), "per_model": out.groupby("model_id").size().to_dict(),
            "queries": int(out["query_id"].nunique())}
