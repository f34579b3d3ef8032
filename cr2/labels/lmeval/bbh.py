"""BBH answer extraction, taken from lm-eval's own `bbh_zeroshot_<task>` YAML files at run time.

lm-eval's zero-shot BBH runs 27 tasks, each with its own description and a `flexible-extract` filter
(a regex for True/False, "(A)"-style letters, numbers, Dyck closings, or a word-sort matcher) next to
`strict-match` (the raw generation). cr2 runs BBH as one lm-eval task, so the description travels in
each doc and `BBHAnswerFilter` applies, per doc, the filter chain lm-eval defines for that doc's
subtask. Reading the chains from the installed lm-eval keeps the extraction identical to lm-eval's
(and the task config hash changes when an lm-eval upgrade changes them).
"""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

from lm_eval.api.filter import Filter  # light (~60 ms); the rest of lm-eval is imported where used

log = logging.getLogger(__name__)


def _zeroshot_dir() -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks" / "bbh" / "zeroshot"


@functools.lru_cache(maxsize=1)
def lmeval_bbh_tasks() -> dict[str, dict[str, Any]]:
    """subtask → lm-eval's resolved zero-shot config (description, doc_to_text, filter_list, …)."""
    from lm_eval.tasks._yaml_loader import load_yaml

    out = {}
    for path in sorted(_zeroshot_dir().glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        cfg = load_yaml(path, resolve_func=True)
        out[cfg["dataset_name"]] = cfg
    return out


def descriptions() -> dict[str, str]:
    """subtask → lm-eval's description (e.g. 'Evaluate the result of a random Boolean expression.\\n\\n')."""
    return {name: cfg.get("description", "") for name, cfg in lmeval_bbh_tasks().items()}


def _filter_steps(subtask: str, filter_name: str) -> list[tuple[Any, dict[str, Any]]]:
    cfg = lmeval_bbh_tasks().get(subtask)
    if cfg is None:
        return []
    for entry in cfg.get("filter_list", []):
        if entry["name"] == filter_name:
            steps = [(s["function"], {k: v for k, v in s.items() if k != "function"}) for s in entry["filter"]]
            # the trailing take_first is applied once by the cr2 task itself
            return [s for s in steps if s[0] != "take_first"]
    return []


def filter_fingerprint(filter_name: str) -> dict[str, list[str]]:
    """A JSON-able description of every subtask's filter chain (part of the task config hash)."""
    out = {}
    for subtask in sorted(lmeval_bbh_tasks()):
        out[subtask] = [
            f"{getattr(fn, '__qualname__', fn)}{sorted(kwargs.items())}" for fn, kwargs in _filter_steps(subtask, filter_name)
        ]
    return out


@functools.lru_cache(maxsize=None)
def _chain(subtask: str, filter_name: str) -> tuple:
    from lm_eval.api.registry import get_filter

    steps = _filter_steps(subtask, filter_name)
    if not steps and subtask not in lmeval_bbh_tasks():
        log.warning("BBH subtask %r is unknown to lm-eval; its answers are compared unfiltered", subtask)
    return tuple(get_filter(fn)(**kwargs) for fn, kwargs in steps)


class BBHAnswerFilter(Filter):
    """lm-eval filter: per doc, the `flexible-extract` chain of the doc's BBH subtask (field `task`)."""

    def __init__(self, filter_name: str = "flexible-extract", **kwargs: Any) -> None:
        self.filter_name = filter_name

    def apply(self, resps, docs):
        out = []
        for resp, doc in zip(resps, docs):
            current = [list(resp)]
            for step in _chain(doc["task"], self.filter_name):
                current = [list(r) if not isinstance(r, str) else [r] for r in step.apply(current, [doc])]
            out.append(current[0])
        return out
