"""Correctness labels y_m(x): the simulated default source and validation of imported (measured) labels.

Label sources are named. Built-in generators are looked up in `LABEL_SOURCES`; any other name is an
imported source (`cr2.labels.imported.validate_imported_labels` checks its rows). Real labels from
lm-evaluation-harness runs live in cr2/labels/lmeval/.
"""
from __future__ import annotations

from typing import Callable

from cr2.core.errors import did_you_mean
from cr2.config.names import is_simulated  # noqa: F401  (defined beside the other name rules; re-exported here)
from cr2.labels.simulator import SOURCE as SIMULATED_SOURCE

__all__ = ["LABEL_SOURCES", "SIMULATED_SOURCE", "SIMULATED_SOURCE_V2", "get_label_source", "is_simulated", "label_note"]


SIMULATED_SOURCE_V2 = "simulated-irt-v2"


def _simulator() -> Callable:
    from cr2.labels.simulator import simulate_labels

    return simulate_labels


def _simulator_v2() -> Callable:
    from cr2.labels.simulator_v2 import simulate_labels_v2

    return simulate_labels_v2


# name → loader of the generating function (loaders keep `import cr2.labels` light)
LABEL_SOURCES: dict[str, Callable[[], Callable]] = {SIMULATED_SOURCE: _simulator, SIMULATED_SOURCE_V2: _simulator_v2}


def get_label_source(name: str) -> Callable:
    """The generator of a built-in label source; UnknownNameError with a suggestion on a miss."""
    if name not in LABEL_SOURCES:
        raise did_you_mean("label source", name, list(LABEL_SOURCES))
    return LABEL_SOURCES[name]()




def label_note(source: str, origin: dict | None = None) -> str:
    """One line saying what the labels of `source` are, for every summary and report: SIMULATED (not measured),
    MEASURED with where from (origin: a measured source's `label_runs.backend_args`), or imported."""
    if is_simulated(source):
        return f"SIMULATED labels ({source}), not measured — docs/labels.md"
    origin = origin or {}
    where = origin.get("repository") or origin.get("file")
    if origin.get("extraction_rule") or origin.get("repository"):
        commit = f" @ {str(origin['commit'])[:12]}" if origin.get("commit") else ""
        return f"MEASURED labels ({source}) from {where}{commit}"
    return f"imported labels ({source}){f' from {where}' if where else ''}"
