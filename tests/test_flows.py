"""Flow-level tests: real Prefect flows on one shared temporary API (the session's prefect_harness)."""
from __future__ import annotations

import pytest

from cr2_warehouse.db import Warehouse

pytestmark = [pytest.mark.flow]


def test_ingest_flow_second_run_is_cached_and_does_no_work(prefect_harness, small_data_dir, tmp_path, monkeypatch):
    from cr2_flows.ingest import ingest_flow

    cfg = tmp_path / "small.yaml"
    cfg.write_text(f"extends: default\ndata_dir: {small_data_dir}\n")
    home = tmp_path / "home"
    first = ingest_flow(config_path=str(cfg), home=str(home))
    assert first["cached"] is False
    with Warehouse(home, read_only=True) as wh:
        before = wh.table_fingerprint("queries")
    # a second run with nothing changed must not even call the task body
    import cr2_tasks.ingest as ti

    monkeypatch.setattr(ti, "build_query_frame", lambda *a, **k: pytest.fail("ingest recomputed on a warm run"))
    second = ingest_flow(config_path=str(cfg), home=str(home))
    assert second["cached"] is True
    assert second["benchmarks"] == first["benchmarks"]
    with Warehouse(home, read_only=True) as wh:
        assert wh.table_fingerprint("queries") == before
