"""How the report shows each evaluated method: display name, colour, learned or reference (the router catalogue)."""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd


@dataclass(frozen=True)
class MethodStyles:
    """What the report needs to know of each evaluated method, from the run's `methods` rows (the router
    catalogue): display name, colour, which methods are learned baselines and which is the reference."""

    rows: dict = field(default_factory=dict)  # method → {display, colour, kind, learned, reference, sort_order}

    @classmethod
    def from_frame(cls, methods: pd.DataFrame) -> "MethodStyles":
        return cls({r["method"]: r for r in methods.to_dict("records")}) if len(methods) else cls()

    def label(self, method: str) -> str:
        return self.rows.get(method, {}).get("display", method)

    def color(self, method: str):
        return self.rows.get(method, {}).get("colour")

    @property
    def learned(self) -> list[str]:
        """The learned baselines, in catalogue order."""
        rows = [r for r in self.rows.values() if r["kind"] == "baseline" and r["learned"]]
        return [r["method"] for r in sorted(rows, key=lambda r: (r["sort_order"], r["method"]))]

    @property
    def reference(self) -> str:
        """The run's reference router (its `methods` row marked reference), else the catalogue's."""
        from cr2.routers import reference_router

        return next((m for m, r in self.rows.items() if r["reference"]), None) or reference_router()
