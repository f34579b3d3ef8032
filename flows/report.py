"""Report: the self-contained HTML page of one evaluation run (figures embedded, tables as CSV and LaTeX)."""
from __future__ import annotations

from pathlib import Path

from cr2.config import Config
from tasks.common import bind
from tasks.report import build_report, report_key


def ablation(config: Config, home: Path, trained: dict, evaluated: dict) -> dict:
    """The component ablation (extra gates trained with parts of the loss), appended to the evaluation run."""
    from tasks.ablation import ablation_key, run_ablation

    state = bind(run_ablation, home)(config, str(home), ablation_key(config, trained, evaluated), trained, evaluated,
                                     return_state=True)
    return {**state.result(), "cached": state.name == "Cached"}


def report(config: Config, home: Path, evaluated: dict, trained: dict, baselines: dict, data_counts: dict,
           ablated: dict | None = None) -> dict:
    key = report_key(config, evaluated, trained, baselines["routers"], ablated)
    state = bind(build_report, home)(config, str(home), key, evaluated, data_counts, return_state=True)
    result = state.result()
    if not Path(result["path"]).is_file():  # the page was deleted since: build it again
        state = bind(build_report, home).with_options(refresh_cache=True)(config, str(home), key, evaluated, data_counts,
                                                                           return_state=True)
        result = state.result()
    return {**result, "cached": state.name == "Cached"}
