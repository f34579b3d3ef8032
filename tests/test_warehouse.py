"""Warehouse: schema creation, version check, transactions roll back, export, read-only access."""
from __future__ import annotations

import duckdb
import pandas as pd
import pytest

from cr2.core.errors import WarehouseError
from cr2_warehouse.db import SCHEMA_VERSION, Warehouse, table_names

LATER_TABLES = {"labels", "label_runs", "splits", "embeddings", "state_distributions", "states", "costs",
                "thresholds", "decisions", "metrics", "queries", "models", "eval_runs"}


def test_schema_creates_every_table_with_version(home):
    with Warehouse(home) as wh:
        have = set(wh.df("SELECT table_name FROM information_schema.tables")["table_name"])
        assert LATER_TABLES <= have
        assert wh.scalar("SELECT value FROM meta WHERE key='schema_version'") == SCHEMA_VERSION
        assert wh.df("DESCRIBE embeddings").set_index("column_name").loc["vector", "column_type"] == "FLOAT[384]"
    assert LATER_TABLES <= set(table_names())


def test_other_schema_version_is_a_clear_error(home):
    with Warehouse(home) as wh:
        wh.con.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(WarehouseError, match=r"schema version 0, this cr2 expects .*cr2 export TABLE"):
        Warehouse(home)


def test_failed_write_rolls_back(home):
    row = {"model_id": "m", "hf_name": "h", "params": 1.0, "platform": "p", "role": "device", "position": 0}
    with Warehouse(home) as wh:
        wh.replace_where("models", pd.DataFrame([row]))
        with pytest.raises(duckdb.ConstraintException):
            wh.replace_where("models", pd.DataFrame([row | {"model_id": "x"}, row | {"model_id": "x"}]))
        assert list(wh.df("SELECT model_id FROM models")["model_id"]) == ["m"]


def test_export_and_read_only(home, tmp_path):
    with Warehouse(home) as wh:
        wh.replace_where("models", pd.DataFrame([{"model_id": "m", "hf_name": "h", "params": 1.0, "platform": "p",
                                                   "role": "device", "position": 0}]))
    with Warehouse(home, read_only=True) as ro:
        path = ro.export("models", tmp_path / "out")
        with pytest.raises(duckdb.Error):
            ro.con.execute("DELETE FROM models")
    assert pd.read_parquet(path)["model_id"].tolist() == ["m"]


def test_read_only_on_missing_warehouse(tmp_path):
    with pytest.raises(WarehouseError, match="no warehouse"):
        Warehouse(tmp_path / "nothing", read_only=True)


def test_schema_1_warehouse_is_readable_and_migrates_on_the_first_write(tmp_path):
    """A version-1 warehouse (thresholds without delta/group) opens read-only as it is and is upgraded in place,
    in one transaction, by the first writable open; its thresholds load as pooled crc tables."""
    import duckdb

    from cr2_warehouse.db import DB_NAME

    tmp_path.mkdir(exist_ok=True)
    con = duckdb.connect(str(tmp_path / DB_NAME))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("""CREATE TABLE thresholds (version INTEGER NOT NULL, dist_id VARCHAR NOT NULL, label_source VARCHAR NOT NULL,
        gate_fingerprint VARCHAR NOT NULL, lam DOUBLE NOT NULL, alpha DOUBLE NOT NULL, tau DOUBLE NOT NULL,
        n_calib INTEGER NOT NULL, rule VARCHAR NOT NULL, score_dtype VARCHAR NOT NULL, created_at TIMESTAMP NOT NULL,
        PRIMARY KEY (version, lam, alpha))""")
    con.execute("INSERT INTO thresholds VALUES (1, 'd', 's', 'fp', 1.0, 0.01, 0.5, 100, 'crc', 'float32', now()), "
                "(1, 'd', 's', 'fp', 1.0, 0.05, 0.25, 100, 'crc', 'float32', now())")
    con.close()
    from cr2.crc import ThresholdTable, table_from_records

    with Warehouse(tmp_path, read_only=True) as wh:
        assert wh.schema_version == "1"
        table = table_from_records(wh.df("SELECT * FROM thresholds").to_dict("records"))
        assert isinstance(table, ThresholdTable) and table.delta is None and table.group is None
    with Warehouse(tmp_path) as wh:
        assert wh.schema_version == SCHEMA_VERSION == "9"  # 1 → 2 → … → 9 in one transaction
        df = wh.df("SELECT * FROM thresholds ORDER BY alpha")
        assert df["group"].tolist() == ["", ""] and df["delta"].isna().all() and df["tau"].tolist() == [0.5, 0.25]
        assert df["router"].tolist() == ["cr2", "cr2"]  # every table before schema 6 calibrated CR²'s gate
        assert wh.count("guarantees") == 0
        table = table_from_records(df.to_dict("records"))
        assert table.tau(1.0, 0.05, "fp") == 0.25 and table.group is None


def test_schema_4_costs_without_a_split_seed_are_dropped_by_the_migration(home):
    """Schema-4 costs cannot say which split seed their estimate ĉ came from: a version-4 warehouse opens
    read-only as it is, and the first writable open replaces its costs table by the seeded one (empty, for
    `cr2 prepare` to fill) and gives eval_runs their split_seed column."""
    with Warehouse(home) as wh:
        wh.con.execute("DROP TABLE costs")
        wh.con.execute("""CREATE TABLE costs (dist_id VARCHAR NOT NULL, label_source VARCHAR NOT NULL,
            query_id VARCHAR NOT NULL, draw INTEGER NOT NULL, model_id VARCHAR NOT NULL, latency_s DOUBLE NOT NULL,
            energy_j DOUBLE NOT NULL, cost_raw DOUBLE NOT NULL, cost_norm DOUBLE NOT NULL, cost_est_norm DOUBLE NOT NULL,
            PRIMARY KEY (dist_id, label_source, query_id, draw, model_id))""")
        wh.con.execute("INSERT INTO costs VALUES ('d', 's', 'q', 0, 'm', 1, 1, 1, 1, 1)")
        wh.con.execute("ALTER TABLE eval_runs DROP COLUMN split_seed")
        wh.con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    with Warehouse(home, read_only=True) as wh:
        assert wh.schema_version == "4" and wh.count("costs") == 1
    with Warehouse(home) as wh:
        assert wh.schema_version == SCHEMA_VERSION == "9"
        assert wh.count("costs") == 0
        assert "split_seed" in set(wh.df("DESCRIBE costs")["column_name"])
        assert "split_seed" in set(wh.df("DESCRIBE eval_runs")["column_name"])


def test_schema_6_pool_results_gain_a_resample_count_by_the_migration(home):
    """A schema-6 warehouse (pool_results without n_resamples, the view v_pool_savings without it) opens read-only
    as it is — its rows read with the count unknown, thresholds still name their router — and the first writable
    open adds the column (old rows NULL, `n` untouched) and recreates the view; a pool written then keeps each
    interval's count."""
    from cr2_warehouse.pools import has_resample_counts, pool_equal_risk, pool_savings, write_pool
    from cr2_warehouse.repository import _has_router_column

    run = {"label_source": "measured-x", "models": [{"id": "d", "role": "device"}], "reference": "d", "run_id": "r",
           "home": ".", "n_test": 10, "n_evaluable": 8, "n_queries": 20, "cost_ratio_realised": 1.0,
           "cost_ratio_est": 1.0, "n_resamples": 1000, "seconds": 1.0}
    rows = [{"subject": "cr2", "other": "knn", "metric": "mean_saving_pct", "target": None, "estimate": -2.0,
             "lower": -5.0, "upper": 1.0, "n": 12, "n_resamples": 873},
            {"subject": "cr2", "other": "knn", "metric": "saving_pct", "target": 0.6, "estimate": -1.0, "lower": -3.0,
             "upper": 1.0, "n": 990, "n_resamples": 990},
            {"subject": "cr2-fixed-0.5", "other": "knn@uncertified", "metric": "equal-risk:gate-quality",
             "target": None, "estimate": 1.0, "lower": -1.0, "upper": 3.0, "n": 9, "n_resamples": 951},
            {"subject": "d", "other": None, "metric": "accuracy", "target": None, "estimate": 0.4, "lower": None,
             "upper": None, "n": 20}]
    with Warehouse(home) as wh:
        write_pool(wh, "pools-old", "p", run, rows)
        # back to schema 6: the column and the view as they were, the digest of the older files
        wh.con.execute("DROP VIEW v_pool_savings")
        wh.con.execute("ALTER TABLE pool_results DROP COLUMN n_resamples")
        wh.con.execute("CREATE VIEW v_pool_savings AS SELECT study_id, pool, subject AS method, other AS reference, "
                       "estimate AS mean_saving_pct, n AS n_targets FROM pool_results WHERE metric = 'mean_saving_pct'")
        wh.con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
        wh.con.execute("UPDATE meta SET value = 'schema-6-files' WHERE key = 'schema_digest'")
    with Warehouse(home, read_only=True) as wh:
        assert wh.schema_version == "6" and not has_resample_counts(wh) and _has_router_column(wh)
        er = pool_equal_risk(wh, "pools-old")
        assert er["n"].tolist() == [9] and er["n_resamples"].isna().all()
        assert "n_resamples" not in pool_savings(wh, "pools-old")
    with Warehouse(home) as wh:
        assert wh.schema_version == SCHEMA_VERSION == "9" and has_resample_counts(wh)
        old = wh.df("SELECT metric, n, n_resamples FROM pool_results ORDER BY metric")
        assert old["n"].tolist() == [20, 9, 12, 990] and old["n_resamples"].isna().all()
        assert pool_savings(wh, "pools-old")["n_resamples"].isna().all()
        write_pool(wh, "pools-old", "p", run, rows)  # the study run again
        new = wh.df("SELECT metric, n, n_resamples FROM pool_results ORDER BY metric")
        assert new["n"].tolist() == [20, 9, 12, 990]
        assert new["n_resamples"].tolist()[1:] == [951, 873, 990] and pd.isna(new["n_resamples"].iloc[0])
        sav = pool_savings(wh, "pools-old")
        assert sav[["n_targets", "n_resamples"]].values.tolist() == [[12, 873]]
        assert pool_equal_risk(wh, "pools-old")["n_resamples"].tolist() == [951]


def test_views_are_created_after_the_views_they_read():
    from cr2_warehouse.db import _READ_FROM, view_names, view_sql

    order = view_names()
    assert sorted(order) == sorted(set(order))
    for i, name in enumerate(order):
        for dep in set(_READ_FROM.findall(view_sql(name))) & set(order) - {name}:
            assert order.index(dep) < i, (name, dep)


def test_an_undefined_estimate_or_bound_is_stored_as_null():
    import numpy as np

    from cr2_warehouse.db import undefined_as_null

    df = undefined_as_null(pd.DataFrame({"estimate": [1.5, np.nan, np.inf], "lower": [None, -np.inf, 0.0],
                                         "label": ["a", "b", "c"]}), ("estimate", "lower"))
    assert df["estimate"].tolist()[0] == 1.5 and df["estimate"].isna().tolist() == [False, True, True]
    assert df["lower"].isna().tolist() == [True, True, False] and df["label"].tolist() == ["a", "b", "c"]


def test_a_premise_cell_is_replaced_whole_and_never_holds_nan(home):
    """write_premise_cell goes through the one study-unit writer: NaN estimates and bounds land as NULL, a second write
    of the same cell replaces the first, and a write that fails leaves the stored cell as it was."""
    import numpy as np

    from cr2_warehouse.premise import CELL_COLUMNS, write_premise_cell

    summary = {k: 1.0 for k in CELL_COLUMNS} | {"speed_factor": 2.0, "channel": "default", "dist_id": "d",
                                                "n_test": 10, "n_evaluable": 9, "n_resamples": 100, "alpha": 0.01,
                                                "cell_s": 1.0, "gate_retrained": True, "gate_fit_s": 0.1, "refit_s": {}}
    row = {"method": "cr2-retrain", "reference": "knn", "metric": "mean_saving_pct", "target": None,
           "estimate": np.nan, "lower": np.nan, "upper": 2.0, "n_resamples": 100}
    with Warehouse(home) as wh:
        write_premise_cell(wh, "premise-x", "src", "key", summary, [row])
        write_premise_cell(wh, "premise-x", "src", "key", summary, [row | {"estimate": 1.0}])
        stored = wh.df("SELECT estimate, lower, upper, isnan(estimate) AS nan FROM premise_results")
        assert len(stored) == 1 and stored["estimate"].tolist() == [1.0] and stored["lower"].isna().all()
        with pytest.raises(Exception):
            write_premise_cell(wh, "premise-x", "src", "key", summary, [row | {"metric": None}])  # NOT NULL fails
        assert wh.scalar("SELECT count(*) FROM premise_cells") == 1
        assert wh.df("SELECT estimate FROM premise_results")["estimate"].tolist() == [1.0]


def _replace_v_labels_by_a_file_reader(home) -> None:
    """Replace the stored v_labels the way a hostile or hand-edited file would carry it (an unlocked DuckDB
    connection): it selects secret.txt of the working folder."""
    from cr2_warehouse.db import DB_NAME

    con = duckdb.connect(str(home / DB_NAME))
    con.execute("CREATE OR REPLACE VIEW v_labels AS SELECT content AS query_id FROM read_text('secret.txt')")
    con.close()


def test_every_connection_is_locked_down(home, tmp_path, monkeypatch):
    """No statement run on a command's connection reads a file outside the warehouse, fetches a URL (which would
    install httpfs) or changes that configuration."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret.txt").write_text("the operator's secret")
    Warehouse(home).close()
    for read_only in (False, True):
        with Warehouse(home, read_only=read_only) as wh:
            for sql in ("SELECT content FROM read_text('secret.txt')", "SELECT * FROM read_csv('https://example.com/x')",
                        "INSTALL httpfs", "SET enable_external_access = true"):
                with pytest.raises(duckdb.Error, match="disabled by configuration|locked|[Pp]ermission"):
                    wh.con.execute(sql).fetchall()


def test_a_replaced_view_is_refused_read_only_and_restored_by_a_write(home, tmp_path, monkeypatch):
    """A warehouse whose v_labels was replaced outside cr2 (here by one selecting a file outside the home) never
    answers with it: a read-only command refuses the file naming the view, `export` included; a writable open puts
    cr2's definition back."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "secret.txt").write_text("the operator's secret")
    Warehouse(home).close()
    _replace_v_labels_by_a_file_reader(home)
    with pytest.raises(WarehouseError, match=r"view:v_labels is not what this cr2 defines .*changed outside cr2"):
        with Warehouse(home, read_only=True) as wh:
            wh.export("v_labels", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    with Warehouse(home):
        pass
    with Warehouse(home, read_only=True) as wh:
        path = wh.export("v_labels", tmp_path / "out")
    assert "query_id" in pd.read_parquet(path).columns and "secret" not in path.read_bytes().decode("latin-1")


def test_definitions_lock_file_is_current():
    """warehouse/definitions.lock.json holds the digests of the views and macros as the pinned DuckDB stores them,
    so opening a warehouse checks its definitions without rendering them (after changing a view, run
    `python -c "from cr2_warehouse.db import write_definitions_lock; write_definitions_lock()"`)."""
    import json

    from cr2_warehouse.db import DEFINITIONS_LOCK_FILE, definitions_lock

    assert json.loads(DEFINITIONS_LOCK_FILE.read_text()) == definitions_lock()


def test_a_huge_stored_schema_version_is_cut_in_the_error(home):
    with Warehouse(home) as wh:
        wh.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", ["9" * 1_000_000])
    with pytest.raises(WarehouseError) as err:
        Warehouse(home)
    assert len(str(err.value)) < 1_000 and "1,000,000 chars" in str(err.value)


def test_user_queries_run_under_a_memory_cap(home):
    from cr2_warehouse.db import USER_QUERY_MEMORY_LIMIT_MB, UserQueryError, open_user_query

    Warehouse(home).close()
    with open_user_query(home) as wh:
        assert wh.scalar("SELECT current_setting('memory_limit')") == f"{USER_QUERY_MEMORY_LIMIT_MB / 1024:.1f} GiB"
    with open_user_query(home, memory_limit_mb=64) as wh:
        with pytest.raises(UserQueryError, match="Out of Memory.*allows: narrow it, or pass a larger --max-memory-mb"):  # ≈ 800 MB of distinct strings
            wh.user_query("SELECT count(DISTINCT repeat('x', 100) || i::VARCHAR) FROM range(8000000) t(i)")
    for bad in (0, 10**9, 1.5, True):
        with pytest.raises(UserQueryError, match="memory cap must be a whole number of MiB"):
            open_user_query(home, memory_limit_mb=bad)


def test_a_table_changed_outside_cr2_is_refused_naming_the_column(home):
    """A thresholds table without tau (dropped by hand or by a hostile file) is refused when any command opens the
    warehouse, naming the table and column — not a KeyError inside `cr2 route`."""
    from cr2_warehouse.db import DB_NAME

    Warehouse(home).close()
    con = duckdb.connect(str(home / DB_NAME))
    con.execute("CREATE TABLE t AS SELECT * EXCLUDE (tau) FROM thresholds")
    con.execute("DROP TABLE thresholds")
    con.execute("ALTER TABLE t RENAME TO thresholds")
    con.execute("ALTER TABLE labels ADD COLUMN extra VARCHAR")
    con.close()
    for read_only in (True, False):
        with pytest.raises(WarehouseError, match=r"table labels has a column extra this cr2 does not define; "
                                                 r"table thresholds has no column tau — .*changed outside cr2"):
            Warehouse(home, read_only=read_only)
