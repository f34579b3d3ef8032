"""Label-source facts from the warehouse, for summaries and reports."""
from __future__ import annotations

import json

from warehouse.db import Warehouse


def label_origin(wh: Warehouse, source: str) -> dict:
    """The recorded origin of a label source: the `backend_args` of its newest `label_runs` row (imports and
    measured sources record file, repository, commit, extraction rule there), parsed; {} when none."""
    raw = wh.scalar("SELECT backend_args FROM label_runs WHERE source = ? AND backend = 'import' "
                    "ORDER BY finished_at DESC NULLS LAST, run_id LIMIT 1", [source])
    try:
        return dict(json.loads(raw)) if raw else {}
    except (TypeError, ValueError):
        return {}
