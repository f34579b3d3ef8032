"""Warehouse I/O of the premise map: the base cell's inputs and artefacts, and the per-cell results."""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
import pandas as pd

from cr2.core.errors import DataValidationError
from cr2_warehouse.db import Warehouse, note_read, undefined_as_null
from cr2_warehouse.reads import has_table
from cr2_warehouse.files import in_home
from cr2_warehouse.repository import deployed_artifacts, utc_now
from cr2_warehouse.routing_data import named_query

CELL_COLUMNS = ("speed_factor", "channel", "dist_id", "mean_distance_m", "cost_ratio_est", "cost_ratio_realised",
                "device_dearer_share_est", "n_test", "n_evaluable", "n_resamples", "alpha")
RESULT_COLUMNS = ("method", "reference", "metric", "target", "estimate", "lower", "upper", "n_resamples", "p_value")


def query_tokens(wh: Warehouse, label_source: str, query_id: np.ndarray, model_ids: Sequence[str],
                 default_output_tokens: dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
    """(prompt_tokens [n], output_tokens [n, M]) of the rows `query_id`: recorded L_out, else the benchmark default."""
    note_read(named_query("premise_query_tokens"))
    df = wh.con.sql(named_query("premise_query_tokens"), params={"label_source": label_source}).df()
    per_query = df.drop_duplicates("query_id").set_index("query_id")
    missing = set(map(str, query_id)) - set(per_query.index)
    if missing:
        raise DataValidationError(f"{len(missing)} routing queries have no labels under '{label_source}'; run `cr2 prepare`")
    prompt = per_query["prompt_tokens"].reindex(query_id).to_numpy(dtype=np.float64)
    out = df.pivot(index="query_id", columns="model_id", values="output_tokens").reindex(columns=list(model_ids))
    out = out.reindex(query_id).to_numpy(dtype=np.float64)
    bench = per_query["benchmark"].reindex(query_id).to_numpy()
    defaults = np.array([default_output_tokens.get(b, np.nan) for b in bench], dtype=np.float64)
    out = np.where(np.isnan(out), defaults[:, None], out)
    if np.isnan(out).any():
        raise DataValidationError("no output length for some queries: add cost.default_output_tokens for their benchmark")
    return prompt, out


def base_artifacts(wh: Warehouse, label_source: str, dist_id: str) -> dict[str, Any]:
    """The base cell: the newest evaluation run under (label source, states), its gate and the teacher trained with it."""
    note_read(named_query("premise_base_run"))
    rows = wh.con.sql(named_query("premise_base_run"), params={"label_source": label_source, "dist_id": dist_id}).fetchall()
    if not rows:
        raise DataValidationError(f"no evaluation run under labels '{label_source}' and states '{dist_id}' in "
                                  f"{wh.path}; run `cr2 run` with this config first (the premise map varies its result)")
    run_id, version, gate_fp = rows[0]
    arts = deployed_artifacts(wh, str(gate_fp))
    return {"run_id": str(run_id), "threshold_version": int(version), **arts}


def baseline_artifacts(wh: Warehouse, label_source: str, names: Sequence[str]) -> dict[str, dict[str, str]]:
    """name → {fingerprint, path} of the newest fitted baseline of each name (error when one is missing)."""
    note_read(named_query("premise_router_artifacts"))
    df = wh.con.sql(named_query("premise_router_artifacts"), params={"label_source": label_source}).df()
    found = {k.split(":", 1)[1]: (fp, p) for k, fp, p in df[["kind", "fingerprint", "path"]].itertuples(index=False)}
    missing = [n for n in names if n not in found]
    if missing:
        raise DataValidationError(f"no fitted baseline {missing} under labels '{label_source}'; run `cr2 run` first")
    out = {}
    for n in names:
        fp, path = found[n]
        full = in_home(wh.home, path)
        if not full.is_file():
            raise DataValidationError(f"baseline '{n}' checkpoint {full} is missing; run `cr2 run` again")
        out[n] = {"fingerprint": str(fp), "path": str(full)}
    return out


def write_premise_cell(wh: Warehouse, study_id: str, label_source: str, key: str, summary: dict[str, Any],
                       rows: Sequence[dict[str, Any]]) -> None:
    """Replace one cell of a study: its premise_cells row and its premise_results rows (one transaction)."""
    cell = {"study_id": study_id, **{k: summary[k] for k in CELL_COLUMNS}, "label_source": label_source,
            "cell_key": key, "cell_seconds": float(summary["cell_s"]),
            "meta": json.dumps({k: summary[k] for k in ("gate_retrained", "gate_fit_s", "refit_s")}),
            "created_at": utc_now()}
    res = undefined_as_null(pd.DataFrame([{c: r.get(c) for c in RESULT_COLUMNS} for r in rows]),
                            ("target", "estimate", "lower", "upper", "p_value"))
    res.insert(0, "channel", summary["channel"])
    res.insert(0, "speed_factor", float(summary["speed_factor"]))
    res.insert(0, "study_id", study_id)
    wh.replace_study_unit("premise_cells", cell, "premise_results", res,
                          {"study_id": study_id, "speed_factor": float(summary["speed_factor"]), "channel": summary["channel"]})


def newest_premise_study(wh: Warehouse, reference: str | None = None) -> str | None:
    """The id of the newest premise study (with rows against `reference`, e.g. a certified KNN, when given)."""
    return wh.scalar("SELECT study_id FROM premise_cells c WHERE ? IS NULL OR EXISTS (SELECT 1 FROM premise_results r "
                     "WHERE r.study_id = c.study_id AND r.reference = ?) ORDER BY created_at DESC LIMIT 1",
                     [reference, reference])


def premise_view(wh: Warehouse, study_id: str) -> pd.DataFrame:
    """The rows of v_premise for one study."""
    return wh.df("SELECT * FROM v_premise WHERE study_id = ? ORDER BY speed_factor, channel, method, reference, target",
                 [study_id])


# ---------------------------------------------------------------- the studies' settings
STUDY_COLUMNS = ("study_id", "label_source", "config", "speeds", "channels", "n_resamples", "seed", "retrain_from",
                 "retrain_epochs", "base_run", "created_at")


def write_premise_study(wh: Warehouse, study: dict[str, Any]) -> None:
    """Record a study's settings (premise_studies); a study already recorded keeps its first row (its id covers
    every setting, so a second record could only repeat it)."""
    row = {**{c: study.get(c) for c in STUDY_COLUMNS}, "created_at": utc_now()}
    row["speeds"], row["channels"] = json.dumps([float(f) for f in study["speeds"]]), json.dumps(list(study["channels"]))
    with wh.transaction() as con:
        seen = con.execute("SELECT count(*) FROM premise_studies WHERE study_id = ?", [row["study_id"]]).fetchall()
        if seen[0][0]:
            return
        wh.insert_df("premise_studies", pd.DataFrame([row]), con)


_STUDIES_SQL = (
    "SELECT c.study_id, any_value(c.label_source) AS label_source, count(*) AS n_cells, "
    "sum(c.cell_seconds) AS cell_seconds, min(c.created_at) AS first_cell_at, max(c.created_at) AS last_cell_at, "
    "s.config, s.speeds, s.channels, s.n_resamples, s.seed, s.retrain_from, s.retrain_epochs, s.base_run "
    "FROM premise_cells c LEFT JOIN premise_studies s USING (study_id) "
    "GROUP BY ALL ORDER BY min(c.created_at), c.study_id")
# a warehouse read as it is, from before studies recorded their settings
_STUDIES_SQL_UNRECORDED = (
    "SELECT c.study_id, any_value(c.label_source) AS label_source, count(*) AS n_cells, "
    "sum(c.cell_seconds) AS cell_seconds, min(c.created_at) AS first_cell_at, max(c.created_at) AS last_cell_at, "
    "NULL AS config, NULL AS speeds, NULL AS channels, NULL AS n_resamples, NULL AS seed, NULL AS retrain_from, "
    "NULL AS retrain_epochs, NULL AS base_run FROM premise_cells c GROUP BY ALL ORDER BY min(c.created_at), c.study_id")


def premise_studies(wh: Warehouse) -> pd.DataFrame:
    """Every premise study of the warehouse, oldest first: its cells (count, cell seconds, first and last write) and
    its recorded settings (premise_studies; NULL for a study run before cr2 recorded them)."""
    if not has_table(wh, "premise_cells"):
        return pd.DataFrame(columns=["study_id", "label_source", "n_cells", "cell_seconds", *STUDY_COLUMNS[2:]])
    return wh.df(_STUDIES_SQL if has_table(wh, "premise_studies") else _STUDIES_SQL_UNRECORDED)


def premise_cell_count(wh: Warehouse, study_id: str) -> int:
    """How many cells of a premise study are stored."""
    return int(wh.scalar("SELECT count(*) FROM premise_cells WHERE study_id = ?", [study_id]) or 0)
