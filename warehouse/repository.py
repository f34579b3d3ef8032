"""Named reads and writes of the routing stages (train, calibrate, baselines, evaluate, report, serving).

Every SQL statement these stages need lives here or in warehouse/queries/*.sql; tasks call these
functions and never write SQL themselves. Each write is one transaction: a failure leaves the
warehouse as it was.
"""
from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from cr2.crc import GroupedThresholdTable, ThresholdTable, table_from_records
from cr2.core.errors import DataValidationError, UncalibratedOperatingPointError
from cr2.core.files import atomic_write
from cr2_warehouse.db import Warehouse, relation, undefined_as_null
from cr2_warehouse.files import in_home

THRESHOLD_COLUMNS = ("version", "dist_id", "label_source", "gate_fingerprint", "lam", "alpha", "tau", "n_calib", "rule",
                     "score_dtype", "created_at", "delta", "group", "router")
CR2_ROUTER = "cr2"  # thresholds.router of CR²'s deployed tables (a certified router's: '<router>@<rule>')
METHOD_COLUMNS = ("run_id", "method", "router", "kind", "learned", "display", "colour", "reference", "sort_order")


def utc_now() -> dt.datetime:
    """The current UTC time as a naive timestamp (the warehouse's TIMESTAMP convention)."""
    return dt.datetime.now(dt.timezone.utc).replace(tzinfo=None)


# ---------------------------------------------------------------- meta
def warehouse_epoch(wh: Warehouse) -> str:
    """The warehouse's random epoch id, created on first use (a replaced warehouse never reuses cached results)."""
    row = wh.scalar("SELECT value FROM meta WHERE key = 'epoch'")
    if row is None:
        row = uuid.uuid4().hex
        with wh.transaction() as con:
            con.execute("INSERT INTO meta VALUES ('epoch', ?)", [row])
    return str(row)


def cost_scales_key(dist_id: str, label_source: str, split_seed: int) -> str:
    """The meta key under which the cost normalisation scales T0/E0 (and the train-split output-length estimates)
    of (dist_id, label_source, split seed) are stored."""
    return f"cost_scales:{dist_id}:{label_source}:{int(split_seed)}"


def cost_scales(wh: Warehouse, dist_id: str, label_source: str, split_seed: int) -> dict | None:
    """{t0_s, e0_j, output_token_estimates, …} of the stored costs under (dist_id, label_source, split seed), or None."""
    value = wh.scalar("SELECT value FROM meta WHERE key = ?", [cost_scales_key(dist_id, label_source, split_seed)])
    return None if value is None else json.loads(value)


def state_distribution_spec(wh: Warehouse, dist_id: str) -> dict | None:
    """The stored spec (JSON) of a state distribution, or None."""
    spec = wh.scalar("SELECT spec FROM state_distributions WHERE dist_id = ?", [dist_id])
    return None if spec is None else json.loads(spec)


# ---------------------------------------------------------------- artefacts
def register_artifacts(wh: Warehouse, rows: Sequence[dict[str, Any]]) -> None:
    """Insert (or replace, by kind + fingerprint) rows of the `artifacts` table."""
    with wh.transaction() as con:
        for r in rows:
            wh.delete_where("artifacts", {"kind": r["kind"], "fingerprint": r["fingerprint"]}, con)
        wh.insert_df("artifacts", pd.DataFrame(list(rows)), con)


def deployed_artifacts(wh: Warehouse, gate_fingerprint: str) -> dict:
    """Paths of the gate with this fingerprint and of the teacher trained with it (relative paths resolve
    against the home)."""
    arts = wh.df("SELECT kind, fingerprint, path, meta FROM artifacts WHERE kind IN ('gate', 'teacher')")
    gate = arts[(arts["kind"] == "gate") & (arts["fingerprint"] == gate_fingerprint)]
    if gate.empty:
        raise UncalibratedOperatingPointError(f"the gate {gate_fingerprint} of the threshold table is not registered; "
                                              "run `cr2 train` and `cr2 calibrate`")
    meta = json.loads(gate["meta"].iloc[0])
    if "teacher" in meta:  # the gate names the teacher it was distilled from
        teacher = arts[(arts["kind"] == "teacher") & (arts["fingerprint"] == meta["teacher"])]
    else:  # a gate registered before gates named their teacher: the teacher of the same train run
        teacher = arts[(arts["kind"] == "teacher") & arts["meta"].map(lambda m: json.loads(m)["key"] == meta["key"])]
    if teacher.empty:
        raise UncalibratedOperatingPointError(f"no teacher trained with gate {gate_fingerprint}; run `cr2 train`")
    out = {"teacher": {"path": str(in_home(wh.home, teacher["path"].iloc[0])), "fingerprint": teacher["fingerprint"].iloc[0]},
           "gate": {"path": str(in_home(wh.home, gate["path"].iloc[0])), "fingerprint": gate_fingerprint}}
    for k in ("teacher", "gate"):
        if not Path(out[k]["path"]).is_file():
            raise UncalibratedOperatingPointError(f"{k} checkpoint {out[k]['path']} is missing; run `cr2 train` again")
    return out


# ---------------------------------------------------------------- thresholds
def fitted_router_artifact(wh: Warehouse, router: str, fingerprint: str) -> dict:
    """The fitted baseline `router` with this fingerprint (the one a certified table was calibrated for):
    {"router": {"name", "path", "fingerprint"}}, its path resolved against the home; an error naming the fix."""
    path = wh.scalar("SELECT any_value(path) FROM artifacts WHERE kind = ? AND fingerprint = ?",
                     [f"router:{router}", fingerprint])
    if path is None:
        raise UncalibratedOperatingPointError(f"the fitted router '{router}' ({fingerprint}) the certified table was "
                                              "calibrated for is not registered; run `cr2 run` again")
    out = {"router": {"name": router, "path": str(in_home(wh.home, path)), "fingerprint": fingerprint}}
    if not Path(out["router"]["path"]).is_file():
        raise UncalibratedOperatingPointError(f"router file {out['router']['path']} is missing; run `cr2 run` again")
    return out


def certified_table_names(wh: Warehouse) -> list[str]:
    """The certified routers '<router>@<rule>' with a stored threshold table, sorted (none in an old warehouse)."""
    if not _has_router_column(wh):
        return []
    return sorted(wh.df("SELECT DISTINCT router FROM thresholds WHERE router LIKE '%@%'")["router"])


# a file beside the warehouse naming its newest threshold-table version, rewritten (atomically) after every
# committed write: a running `cr2 serve` polls it — a stat and a few bytes, no database lock — to pick up a
# re-calibration without a restart
THRESHOLDS_VERSION_FILE = "thresholds.version"


def write_thresholds(wh: Warehouse, table: ThresholdTable | GroupedThresholdTable, router: str = CR2_ROUTER) -> int:
    """Store `table` (pooled, or Mondrian: one block per group) as the next version of `thresholds`, under the name of
    the router it deploys (CR²: 'cr2'; a certified router: '<router>@<rule>', cr2.routers.certify); return the version.
    Only CR²'s versions are announced to a running `cr2 serve` (THRESHOLDS_VERSION_FILE)."""
    with wh.transaction() as con:
        version = _insert_thresholds(wh, con, table, router)
    if router == CR2_ROUTER:
        write_thresholds_version(wh.home, version)
    return version


def _insert_thresholds(wh: Warehouse, con: Any, table: ThresholdTable | GroupedThresholdTable, router: str) -> int:
    """Insert `table` as the next version of `thresholds` inside the open transaction `con`; return the version."""
    version = int(con.execute("SELECT coalesce(max(version), 0) + 1 FROM thresholds").fetchall()[0][0])
    rows = pd.DataFrame(table.to_records()).assign(version=version, created_at=utc_now(), router=router)
    rows["group"] = rows["group"].fillna("")  # '' = pooled (the column is part of the primary key)
    wh.insert_df("thresholds", rows[list(THRESHOLD_COLUMNS)], con)
    return version


def _has_router_column(wh: Warehouse) -> bool:
    """Whether `thresholds` names each table's router (schema ≥ 6); an older warehouse read as it is holds CR²'s only."""
    from cr2_warehouse.db import READABLE_OLD_VERSIONS

    version = getattr(wh, "schema_version", None)
    return not (version in READABLE_OLD_VERSIONS and int(version) < 6)


def newest_threshold_dist(wh: Warehouse) -> str | None:
    """The state distribution CR²'s newest threshold table was calibrated under (None: no table yet)."""
    from cr2_warehouse.routing_data import named_query

    if not _has_router_column(wh):
        return wh.scalar("SELECT dist_id FROM thresholds ORDER BY version DESC LIMIT 1")
    return wh.scalar(named_query("drift_newest_threshold_dist"))


def write_thresholds_version(home: str | Path, version: int) -> None:
    """Record `version` as the newest threshold table of the warehouse at `home` (THRESHOLDS_VERSION_FILE)."""
    # readers see the old number or the new one, never a partial file
    atomic_write(Path(home) / THRESHOLDS_VERSION_FILE, f"{int(version)}\n")


def read_thresholds_version(home: str | Path) -> int | None:
    """The newest threshold-table version recorded beside the warehouse at `home`, or None (none recorded yet).

    Read bounded (cr2.core.boundary.read_bounded, a few bytes of a regular file): a version file that is something
    else — a link to /dev/zero, a FIFO, a large file — is an InvalidValueError naming it, never an unbounded read."""
    from cr2.core.boundary import read_bounded
    from cr2.core.errors import InvalidValueError

    path = Path(home) / THRESHOLDS_VERSION_FILE
    try:
        text = read_bounded(path, 64, "version file").decode("ascii").strip()
    except InvalidValueError:
        if not os.path.lexists(path):
            return None
        raise
    except UnicodeDecodeError:
        raise InvalidValueError(f"{path}: not a version number") from None
    try:
        return int(text)
    except ValueError:
        return None


def newest_threshold_version(wh: Warehouse, router: str = CR2_ROUTER) -> int:
    """The newest threshold-table version of `router` (CR²'s by default; a certified router's: '<router>@<rule>');
    an error naming the fix when there is none."""
    if not _has_router_column(wh):
        version = wh.scalar("SELECT max(version) FROM thresholds") if router == CR2_ROUTER else None
    else:
        version = wh.scalar("SELECT max(version) FROM thresholds WHERE router = ?", [router])
    if version is None:
        if router == CR2_ROUTER:
            raise UncalibratedOperatingPointError("no threshold table in the warehouse; run `cr2 calibrate` (or `cr2 run`)")
        raise UncalibratedOperatingPointError(f"no threshold table of router '{router}'; run `cr2 run` (its certify "
                                              "stage calibrates every certified router of certify.routers × certify.rules)")
    return int(version)


def load_threshold_table(wh: Warehouse, version: int | None = None,
                         router: str = CR2_ROUTER) -> ThresholdTable | GroupedThresholdTable:
    """The threshold table of `version` (default: `router`'s newest) from the warehouse (Mondrian: a
    GroupedThresholdTable); a version that calibrates another router's score is an error."""
    if version is None:
        version = newest_threshold_version(wh, router)
    df = wh.df("SELECT * FROM thresholds WHERE version = ?", [int(version)])
    if df.empty:
        raise UncalibratedOperatingPointError(f"no threshold table version {version}; see `cr2 sql \"SELECT DISTINCT version "  # sql-text: shown to the user, never run
                                              "FROM thresholds\"`")
    stored = str(df["router"].iloc[0]) if "router" in df.columns else CR2_ROUTER
    if stored != router:
        raise UncalibratedOperatingPointError(f"threshold table version {version} calibrates router '{stored}', not "
                                              f"'{router}'; pick a version of '{router}'")
    return table_from_records(df.drop(columns=["router"], errors="ignore").to_dict("records"))


# ---------------------------------------------------------------- baselines
def write_baselines(wh: Warehouse, artifacts: Sequence[dict[str, Any]], predictions: pd.DataFrame) -> None:
    """Register fitted baselines and their test predictions p̂ (replacing rows of the same router + fingerprint)."""
    with wh.transaction() as con:
        for a in artifacts:
            wh.delete_where("artifacts", {"kind": a["kind"], "fingerprint": a["fingerprint"]}, con)
            wh.delete_where("predictions", {"router": a["kind"].split(":", 1)[1], "fingerprint": a["fingerprint"]}, con)
        wh.insert_df("artifacts", pd.DataFrame(list(artifacts)), con)
        wh.insert_df("predictions", predictions, con)


def baseline_proba(wh: Warehouse, name: str, fingerprint: str, query_id: np.ndarray,
                   model_ids: Sequence[str]) -> np.ndarray:
    """p̂ [n, M] of a fitted baseline for the rows `query_id`, from `predictions`."""
    df = wh.df("SELECT query_id, model_id, p_hat FROM predictions WHERE router = ? AND fingerprint = ?", [name, fingerprint])
    wide = df.pivot(index="query_id", columns="model_id", values="p_hat").reindex(columns=list(model_ids))
    out = wide.reindex(query_id).to_numpy(dtype=np.float64)
    if np.isnan(out).any():
        raise DataValidationError(f"predictions of '{name}' ({fingerprint}) miss test queries; re-run `cr2 run`")
    return out


# ---------------------------------------------------------------- evaluation
def write_evaluation(wh: Warehouse, run: dict[str, Any], methods: pd.DataFrame, decisions: pd.DataFrame,
                     metrics: pd.DataFrame) -> None:
    """Replace evaluation run `run["run_id"]`: its eval_runs row, methods, per-query decisions and tidy metrics."""
    run_id = run["run_id"]
    with wh.transaction() as con:
        for t in ("metrics", "decisions", "methods", "eval_runs"):
            wh.delete_where(t, {"run_id": run_id}, con)
        wh.insert_df("eval_runs", pd.DataFrame([run]), con)
        wh.insert_df("methods", methods[list(METHOD_COLUMNS)], con)
        wh.insert_df("decisions", decisions, con)
        wh.insert_df("metrics", metrics, con)


def write_ablation(wh: Warehouse, run_id: str, methods: pd.DataFrame, metrics: pd.DataFrame) -> None:
    """Replace the ablation rows (methods 'ablation:*') of evaluation run `run_id`."""
    with wh.transaction() as con:
        con.execute("DELETE FROM metrics WHERE run_id = ? AND method LIKE 'ablation:%'", [run_id])
        con.execute("DELETE FROM methods WHERE run_id = ? AND method LIKE 'ablation:%'", [run_id])
        wh.insert_df("methods", methods[list(METHOD_COLUMNS)], con)
        wh.insert_df("metrics", metrics, con)


def write_certified(wh: Warehouse, run_id: str, tables: dict[str, ThresholdTable], methods: pd.DataFrame,
                    decisions: pd.DataFrame, metrics: pd.DataFrame) -> dict[str, int]:
    """In one transaction: store every certified router's threshold table (name '<router>@<rule>' → table; each the
    next version of `thresholds` under that name) and replace the certified rows (methods '<router>@…') of evaluation
    run `run_id` — methods, per-query decisions and metrics. Returns name → version."""
    with wh.transaction() as con:
        for t in ("metrics", "decisions", "methods"):
            con.execute(f"DELETE FROM {relation(t)} WHERE run_id = ? AND method LIKE '%@%'", [run_id])
        versions = {name: _insert_thresholds(wh, con, table, name) for name, table in tables.items()}
        wh.insert_df("methods", methods[list(METHOD_COLUMNS)], con)
        wh.insert_df("decisions", decisions, con)
        wh.insert_df("metrics", metrics, con)
    return versions


def eval_run(wh: Warehouse, run_id: str) -> dict[str, Any]:
    """The eval_runs row of `run_id`."""
    df = wh.df("SELECT * FROM eval_runs WHERE run_id = ?", [run_id])
    if df.empty:
        raise DataValidationError(f"no evaluation run '{run_id}'; run `cr2 run` (or `cr2 evaluate`)")
    return df.iloc[0].to_dict()


def run_alpha(run: Mapping[str, Any]) -> float:
    """The α a stored evaluation run compares at (eval_runs.default_alpha: its config's grids.default_alpha when it
    ran): every page, table and artefact of a stored run reads it here, never from the config in force today."""
    alpha = run.get("default_alpha")
    if alpha is None or pd.isna(alpha):
        raise DataValidationError(f"evaluation run '{run['run_id']}' stores no default α (a run stored before schema 8); "
                                  "pass --alpha, or re-run `cr2 evaluate` to store it")
    return float(alpha)


def stored_run_alpha(wh: Warehouse, run_id: str) -> float:
    """run_alpha of evaluation run `run_id`."""
    return run_alpha(eval_run(wh, run_id))


def methods_of_run(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """The `methods` rows of one evaluation run (what each evaluated method is, from the catalogue)."""
    return wh.df("SELECT * FROM methods WHERE run_id = ? ORDER BY sort_order, method", [run_id])


def view_for_run(wh: Warehouse, view: str, run_id: str) -> pd.DataFrame:
    """The rows of view `view` (a name from warehouse/views/) for one evaluation run, in the order of their columns
    (a reader that picks the first of equal rows gets the same one whatever order DuckDB's threads produced)."""
    from cr2_warehouse.db import relation

    return wh.df(f"SELECT * FROM {relation(view)} WHERE run_id = ? ORDER BY ALL", [run_id])


def whole_view(wh: Warehouse, view: str) -> pd.DataFrame:
    """All rows of view `view`."""
    from cr2_warehouse.db import relation

    return wh.df(f"SELECT * FROM {relation(view)}")


GUARANTEE_COLUMNS = ("run_id", "source", "label_source", "check_name", "rule", "metric", "lam", "alpha", "group", "delta",
                     "target", "value", "se", "bound", "n_resplits", "n_calib", "created_at", "seed", "stage")


def replace_guarantee_run(wh: Warehouse, run_id: str, rows: pd.DataFrame) -> None:
    """Replace the rows of validity run `run_id` in `guarantees`."""
    wh.replace_where("guarantees", rows[list(GUARANTEE_COLUMNS)], {"run_id": run_id})


def newest_guarantees(wh: Warehouse) -> tuple[dict | None, pd.DataFrame, pd.DataFrame]:
    """The newest validity run (`cr2 guarantees`): its row of guarantee_runs (source, labels, re-splits, N_calib), its
    bounded cells (guarantee_cells) and v_guarantee_price; (None, empty, empty) when there is none."""
    runs = guarantee_runs(wh)
    if runs.empty:
        return None, pd.DataFrame(), pd.DataFrame()
    head = runs.iloc[0].to_dict()
    return head, guarantee_cells(wh, str(head["run_id"])), guarantee_price(wh, str(head["run_id"]))


def guarantee_runs(wh: Warehouse, label_source: str | None = None) -> pd.DataFrame:
    """The validity runs (`cr2 guarantees`) of the warehouse, newest first (of `label_source` when given); empty
    when there is none or the warehouse predates the table."""
    from cr2_warehouse.routing_data import named_query

    if getattr(wh, "schema_version", "2") == "1":
        return pd.DataFrame(columns=["run_id", "source", "label_source", "n_resplits", "n_calib", "created_at", "seed",
                                     "confirm_seed", "confirm_n_resplits"])
    df = wh.df(named_query(_guarantee_query(wh, "guarantee_runs")))
    return df if label_source is None else df[df["label_source"] == label_source].reset_index(drop=True)


def guarantee_cells(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """Every bounded cell (rule, check, λ, α) of one validity run: Monte-Carlo mean, SE and bound."""
    from cr2_warehouse.routing_data import named_query

    return wh.df(named_query(_guarantee_query(wh, "guarantee_cells")), {"run_id": run_id})


def _guarantee_query(wh: Warehouse, name: str) -> str:
    """The named query `name` over `guarantees`, or its `<name>_before_9` twin on a warehouse read as it is from
    before schema 9 (no seed or stage: every row a screening row, its seed unknown)."""
    from cr2_warehouse.reads import has_column

    return name if has_column(wh, "guarantees", "stage") else f"{name}_before_9"


def guarantee_price(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """v_guarantee_price of one validity run: each rule's mean local rate, cost, accuracy and risks over re-splits."""
    return wh.df("SELECT * FROM v_guarantee_price WHERE run_id = ? ORDER BY lam, alpha, rule", [run_id])


def realised_risk_ci(wh: Warehouse, run_id: str, alpha: float, lams: Sequence[float]) -> pd.DataFrame:
    """CR² under every rule at (α, λ ∈ lams): the teacher-referenced and realised risks, local rate, cost and accuracy,
    each with its stored 95 % paired-bootstrap interval (the realised-risk table of `cr2 results` and of docs/results.md)."""
    from cr2_warehouse.routing_data import named_query

    return wh.df(named_query("realised_risk_with_ci"),
                 {"run_id": run_id, "alpha": float(alpha), "lams": [float(v) for v in lams]})


# ---------------------------------------------------------------- headline results (docs/results.md)
def newest_eval_run(wh: Warehouse, label_source: str | None = None, *, full_only: bool = False) -> str | None:
    """The run_id of the newest full evaluation run (of `label_source` when given): one that evaluated KNN, the
    reference every summary compares with. A re-calibration's CR²-only before/after runs are passed
    over; when no run has KNN (a config without it), the newest run — or None with `full_only`. No run at all is
    an error, or None with `full_only`."""
    from cr2_warehouse.routing_data import named_query

    row = wh.df(named_query("newest_full_eval_run"), {"label_source": label_source or None})
    if row.empty or (full_only and not bool(row["is_full"].iloc[0])):
        if full_only:
            return None
        raise DataValidationError("no evaluation run in the warehouse; run `cr2 run` first")
    return str(row["run_id"].iloc[0])


def headline_results(wh: Warehouse, run_id: str, *, targets: Sequence[float], cost_anchor: float, alpha: float,
                     lams: Sequence[float]) -> dict[str, pd.DataFrame]:
    """The frames docs/results.md compares with the paper, from the views of one evaluation run."""
    from cr2_warehouse.routing_data import named_query

    params = {"run_id": run_id}
    run = eval_run(wh, run_id)
    return {
        "fixed_accuracy": wh.df(named_query("fixed_accuracy_at_targets"),
                                {**params, "targets": [round(float(t), 2) for t in targets]}),
        "local_at_cost": wh.df(named_query("cr2_local_rate_at_cost"), {**params, "cost": float(cost_anchor)}),
        "sweep": wh.df(named_query("sweep_extremes"), {**params, "alpha": float(alpha)}),
        "operating_points": wh.df(named_query("cr2_operating_points_ci"),
                                  {**params, "alpha": float(alpha), "lams": [float(v) for v in lams]}),
        "realised_risk": wh.df(named_query("realised_risk_at_lams"),
                               {**params, "alpha": float(alpha), "lams": [float(v) for v in lams]}),
        "mean_saving": wh.df(named_query("mean_saving_vs_knn"), params),
        "at_lams": wh.df(named_query("methods_at_lams_ci"),
                         {**params, "alpha": float(alpha), "lams": [float(v) for v in lams]}),
        "ablation": view_for_run(wh, "v_ablation", run_id),
        "complexity": whole_view(wh, "v_router_complexity").drop_duplicates("kind"),
        "cost_assumptions": wh.df("SELECT * FROM v_cost_assumptions WHERE dist_id = ? AND label_source = ?",
                                  [run["dist_id"], run["label_source"]]),
        "run": pd.DataFrame([run]),
    }


# ---------------------------------------------------------------- intervals and the seed study
INTERVAL_COLUMNS = ("run_id", "method", "lam", "alpha", "benchmark", "metric", "target", "estimate", "lower", "upper",
                    "level", "n_resamples", "n_targets", "seed", "p_value", "family", "family_size", "p_holm", "verdict")


def run_decisions(wh: Warehouse, run_id: str, skip_kinds: Sequence[str] = (), *,
                  only: tuple[Sequence[str], Sequence[str]] | None = None) -> pd.DataFrame:
    """The per-query decisions of evaluation run `run_id` (method, λ, α, query, chosen model, gate acceptance; text
    columns as Categoricals), without those of the methods whose `methods.kind` is one of `skip_kinds`;
    only=(kinds, methods): just those of the methods of these kinds and of these methods."""
    kinds, methods = only if only is not None else ((), ())
    return wh.coded_df("SELECT method, lam, alpha, query_id, chosen_model, accepted_local, gate_accept FROM decisions "
                 "WHERE run_id = ? AND method NOT IN (SELECT method FROM methods WHERE run_id = ? "
                 "AND list_contains(?::VARCHAR[], kind)) AND (NOT ? OR list_contains(?::VARCHAR[], method) OR method IN "
                 "(SELECT method FROM methods WHERE run_id = ? AND list_contains(?::VARCHAR[], kind)))",
                 [run_id, run_id, list(skip_kinds), only is not None, list(methods), run_id, list(kinds)])


def write_intervals(wh: Warehouse, run_id: str, rows: pd.DataFrame) -> None:
    """Replace the bootstrap intervals of evaluation run `run_id`."""
    rows = undefined_as_null(rows.assign(run_id=run_id), ("estimate", "lower", "upper", "p_value", "p_holm"))
    for c in ("family", "family_size", "p_holm", "verdict"):  # rows of estimates only carry no test columns
        if c not in rows.columns:
            rows[c] = None
    with wh.transaction() as con:
        wh.delete_where("intervals", {"run_id": run_id}, con)
        wh.insert_df("intervals", rows[list(INTERVAL_COLUMNS)], con)


EQUAL_RISK_COLUMNS = ("run_id", "question", "router", "against", "rule", "alpha", "method_a", "method_b", "metric",
                      "target", "estimate", "lower", "upper", "level", "n_resamples", "n_targets", "p_value", "p_holm",
                      "verdict", "seed", "family", "family_size", "dropped_targets")


def write_equal_risk(wh: Warehouse, run_id: str, rows: pd.DataFrame) -> None:
    """Replace the equal-risk comparison of evaluation run `run_id` (cr2.evaluation.equal_risk)."""
    rows = undefined_as_null(rows.assign(run_id=run_id), ("estimate", "lower", "upper", "p_value", "p_holm"))
    for c in ("family", "family_size"):
        if c not in rows.columns:
            rows[c] = None
    if "dropped_targets" not in rows:
        rows = rows.assign(dropped_targets=None)
    rows = rows.assign(dropped_targets=rows["dropped_targets"].astype(object).where(rows["dropped_targets"].notna(), None))
    with wh.transaction() as con:
        wh.delete_where("equal_risk", {"run_id": run_id}, con)
        wh.insert_df("equal_risk", rows[list(EQUAL_RISK_COLUMNS)], con)


def run_equal_risk(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """The `equal_risk` rows of evaluation run `run_id`."""
    return wh.df("SELECT * FROM equal_risk WHERE run_id = ?", [run_id])


def certified_validity(wh: Warehouse, run_id: str) -> pd.DataFrame:
    """The certified routers' validity over re-splits in run `run_id`: per (method, λ, α) the mean test risk over the
    random calibration/test re-splits, its Monte-Carlo standard error, the number of re-splits and the exact
    expectation the mean estimates (metrics resplit_risk_mean / _se / _n, resplit_exact_mean; NULL n or exact for a
    run stored before they were), and the confirmatory re-check of a flagged (method, α) (resplit_confirm_risk_*:
    confirm_mean, confirm_se, confirm_n; NULL where none ran), whose verdict is the one reported."""
    from cr2_warehouse.db import view_sql

    # the view's own SELECT as a subquery: one definition, and a warehouse opened read-only before its views were
    # re-created (one built by an older cr2) still answers
    return wh.df(f"SELECT method, lam, alpha, risk_mean, risk_se, n_resplits, exact_mean, confirm_mean, confirm_se, "
                 f"confirm_n FROM "
                 f"({view_sql('v_certified_validity')}\n) "
                 "WHERE run_id = ? ORDER BY method, alpha, lam", [run_id])


def router_flops(wh: Warehouse, label_source: str) -> dict[str, int]:
    """FLOPs per routing decision of every fitted router of `label_source`, newest artefact per kind: CR²'s is its
    gate's (the on-device decision), a baseline's its own (artifacts kind 'router:<name>')."""
    rows = wh.df("SELECT kind, arg_max(flops, created_at) AS flops FROM artifacts WHERE label_source = ? "
                 "AND (kind = 'gate' OR starts_with(kind, 'router:')) GROUP BY kind", [label_source])
    return {("cr2" if k == "gate" else k.split(":", 1)[1]): int(f) for k, f in zip(rows["kind"], rows["flops"])}


def router_heads(wh: Warehouse, label_source: str) -> dict[str, dict[str, Any]]:
    """What every fitted router of `label_source` computes and holds, newest artefact per kind: router → flops_choose /
    params_choose (the p̂ that picks a deferred query's edge model: a baseline's head, CR²'s teacher), flops_gate /
    params_gate (CR²'s on-device gate; None for a baseline, whose head also decides), bytes_choose / bytes_gate (the
    size of their stored files: what a deployment loads, a KNN's index included) and fit_seconds (everything it
    holds). CR² appears only where both its teacher and gate are stored."""
    rows = wh.df("SELECT kind, arg_max(flops, created_at) AS flops, arg_max(params, created_at) AS params, "
                 "arg_max(fit_seconds, created_at) AS fit_seconds, arg_max(path, created_at) AS path FROM artifacts "
                 "WHERE label_source = ? AND (kind IN ('gate', 'teacher') OR starts_with(kind, 'router:')) GROUP BY kind",
                 [label_source])
    got = {k: r for k, r in zip(rows["kind"], rows.to_dict("records"))}

    def num(v, cast):
        return None if v is None or pd.isna(v) else cast(v)

    def stored_bytes(path) -> int | None:  # what a deployment loads: the fitted router's stored file(s)
        p = in_home(wh.home, path) if isinstance(path, str) and path else None
        if p is None or not p.exists():
            return None
        return p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())

    out: dict[str, dict[str, Any]] = {}
    for kind, r in got.items():
        if kind.startswith("router:") and num(r["flops"], int) is not None:
            out[kind.split(":", 1)[1]] = {"flops_choose": int(r["flops"]), "params_choose": num(r["params"], int),
                                          "flops_gate": None, "params_gate": None,
                                          "bytes_choose": stored_bytes(r["path"]), "bytes_gate": None,
                                          "fit_seconds": num(r["fit_seconds"], float)}
    gate, teacher = got.get("gate"), got.get("teacher")
    if gate is not None and teacher is not None and num(gate["flops"], int) is not None \
            and num(teacher["flops"], int) is not None:
        fits = [num(x["fit_seconds"], float) for x in (gate, teacher)]
        out["cr2"] = {"flops_choose": int(teacher["flops"]), "params_choose": num(teacher["params"], int),
                      "flops_gate": int(gate["flops"]), "params_gate": num(gate["params"], int),
                      "bytes_choose": stored_bytes(teacher["path"]), "bytes_gate": stored_bytes(gate["path"]),
                      "fit_seconds": None if None in fits else float(sum(fits))}
    return out


DEPLOY_DECISION_COLUMNS = ("run_id", "rule", "alpha", "answer", "recommended", "undecided_with", "cheapest",
                           "margin_pct", "rule_sha", "n_pairs", "n_noninferiority")
DEPLOY_CANDIDATE_COLUMNS = ("run_id", "rule", "alpha", "candidate", "router", "device", "runs_router", "flops_device",
                            "flops_edge", "flops_worst", "flops_expected", "defer_share", "params", "stored_bytes", "fit_seconds",
                            "complexity_rank", "geo_mean_cost", "geo_mean_cost_lower", "geo_mean_cost_upper",
                            "status", "out_by")


def write_deploy(wh: Warehouse, run_id: str, decisions: pd.DataFrame, candidates: pd.DataFrame) -> None:
    """Replace the deploy decisions of evaluation run `run_id` (cr2.evaluation.deploy) and their candidates, in one
    transaction."""
    with wh.transaction() as con:
        for table, frame, columns in (("deploy_decisions", decisions, DEPLOY_DECISION_COLUMNS),
                                      ("deploy_candidates", candidates, DEPLOY_CANDIDATE_COLUMNS)):
            wh.delete_where(table, {"run_id": run_id}, con)
            if len(frame):
                wh.insert_df(table, frame.assign(run_id=run_id)[list(columns)], con)


def run_deploy(wh: Warehouse, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(decisions, candidates) of evaluation run `run_id`: the stored deploy rule's answer per rule, and every
    candidate with the whole cost of its decisions (empty frames for a run stored before the rule)."""
    from cr2_warehouse.reads import has_table

    if not (has_table(wh, "deploy_decisions") and has_table(wh, "deploy_candidates")):
        return pd.DataFrame(columns=DEPLOY_DECISION_COLUMNS), pd.DataFrame(columns=DEPLOY_CANDIDATE_COLUMNS)
    return (wh.df("SELECT * FROM deploy_decisions WHERE run_id = ? ORDER BY rule", [run_id]),
            wh.df("SELECT * FROM deploy_candidates WHERE run_id = ? ORDER BY rule, complexity_rank", [run_id]))


def run_intervals(wh: Warehouse, run_id: str, metric: str | None = None) -> pd.DataFrame:
    """The `intervals` rows of evaluation run `run_id` (of one metric where given)."""
    if metric is None:
        return wh.df("SELECT * FROM intervals WHERE run_id = ?", [run_id])
    return wh.df("SELECT * FROM intervals WHERE run_id = ? AND metric = ? ORDER BY ALL", [run_id, metric])


def write_simcheck(wh: Warehouse, run_id: str, n_questions: int, shape: dict[str, Any], pool: Any,
                   rows: Sequence[dict[str, Any]]) -> int:
    """Replace simcheck run `run_id` — its `simcheck_runs` record (shape and pool as JSON) and its tidy `simcheck`
    rows — in one transaction: a re-run overwrites, a failure leaves the previous run as it was. Returns the rows
    written."""
    import json

    frame = pd.DataFrame(list(rows))
    frame.insert(0, "run_id", run_id)
    frame["seed"] = frame["seed"].astype("Int64")
    if frame["value"].map(lambda v: isinstance(v, float) and np.isinf(v)).any():
        raise ValueError(f"simcheck run {run_id} produced an infinite value; this is a bug")
    run = pd.DataFrame([{"run_id": run_id, "n_questions": int(n_questions), "shape": json.dumps(shape, sort_keys=True),
                         "pool": json.dumps(pool), "created_at": utc_now()}])
    with wh.transaction() as con:
        wh.delete_where("simcheck", {"run_id": run_id}, con)
        wh.delete_where("simcheck_runs", {"run_id": run_id}, con)
        wh.insert_df("simcheck_runs", run, con)
        wh.insert_df("simcheck", frame, con)
    return int(len(frame))


def write_seed_result(wh: Warehouse, run: dict[str, Any], results: pd.DataFrame) -> None:
    """Replace one seed's row of `seed_runs` and its headline statistics in `seed_results`."""
    key = {"study_id": run["study_id"], "seed": int(run["seed"])}
    results = undefined_as_null(results.assign(**key), ("value", "lower", "upper"))
    with wh.transaction() as con:
        wh.delete_where("seed_results", key, con)
        wh.delete_where("seed_runs", key, con)
        wh.insert_df("seed_runs", pd.DataFrame([run]), con)
        wh.insert_df("seed_results", results[["study_id", "seed", "method", "lam", "alpha", "benchmark", "metric",
                                              "target", "value", "lower", "upper"]], con)


def newest_seed_study(wh: Warehouse) -> str | None:
    """The id of the newest seed study in the warehouse, or None."""
    return wh.scalar("SELECT study_id FROM seed_runs ORDER BY created_at DESC LIMIT 1")


def seed_study_runs(wh: Warehouse, study_id: str) -> pd.DataFrame:
    """The seeds of seed study `study_id`: seed, evaluation run, home (relative: '.' is the base seed's), test size."""
    return wh.df("SELECT seed, run_id, home, n_test FROM seed_runs WHERE study_id = ? ORDER BY seed", [study_id])


def seed_equal_risk(wh: Warehouse, study_id: str) -> pd.DataFrame:
    """Every seed's equal-risk mean savings in a seed study (seed_results rows `equal-risk:<question>`)."""
    return wh.df("SELECT seed, method, alpha, metric, value FROM seed_results WHERE study_id = ? "
                 "AND starts_with(metric, 'equal-risk:')", [study_id])


def seed_spread(wh: Warehouse, study_id: str | None = None) -> pd.DataFrame:
    """v_seed_spread of `study_id` (default: the newest seed study); empty when there is none."""
    if study_id is None:
        study_id = newest_seed_study(wh)
        if study_id is None:
            return pd.DataFrame()
    return wh.df("SELECT * FROM v_seed_spread WHERE study_id = ?", [study_id])


def artifact_frames(wh: Warehouse, run_id: str, alpha: float, lam: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The Prefect artefacts of an evaluation run: CR²'s operating points at α and every method at λ."""
    from cr2_warehouse.routing_data import named_query

    return (wh.df(named_query("cr2_operating_points_at_alpha"), {"run_id": run_id, "alpha": float(alpha)}),
            wh.df(named_query("methods_at_lam"), {"run_id": run_id, "lam": lam, "alpha": alpha}))
