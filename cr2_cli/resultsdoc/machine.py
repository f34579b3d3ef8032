"""Section "Fits and the machine": the stored fit-threads benchmark."""
from __future__ import annotations

import json

from cr2.report.resultsdoc import machine as page
from cr2_cli.resultsdoc.core import Doc


def render(doc: Doc) -> str:
    path = doc.repo / page.BENCH
    bench = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    return page.render(page.MachineData(bench), doc)
