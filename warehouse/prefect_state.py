"""Prefect's own database as cr2 keeps a template of it: an empty, migrated SQLite file a new Prefect home starts
from (cr2_cli.prefect_api.seed_database). Every statement on that file is here, as on the warehouse's."""
from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

from cr2.core.files import temp_sibling
from cr2_warehouse.db import WarehouseError, ident

# the tables a Prefect server's new database holds rows in (its migration version, the registered block types)
TEMPLATE_TABLES = frozenset({"alembic_version", "block_type", "block_schema", "block_schema_reference"})


def save_template(db: Path, template: Path) -> bool:
    """Leave a consistent copy of a server's new database `db` at `template` (SQLite's online backup: the server may
    be running), owner-only, when it is migrated and holds rows in TEMPLATE_TABLES only — never a run, a log or an
    event of the home it came from. Atomic (a temporary file, one rename); True when saved. Best effort: a file that
    cannot be read or written leaves no template."""
    if template.exists() or not db.is_file():
        return False
    tmp = temp_sibling(template)
    try:
        src = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)
                tables = [r[0] for r in dst.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                holds = {t for t in tables if not t.startswith("sqlite_")
                         and dst.execute(f"SELECT 1 FROM {ident(t)} LIMIT 1").fetchone()}
            finally:
                dst.close()
        finally:
            src.close()
        if "alembic_version" not in holds or not holds <= TEMPLATE_TABLES:
            return False
        os.chmod(tmp, 0o600)
        os.replace(tmp, template)
        return True
    except (OSError, sqlite3.Error, WarehouseError):
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
