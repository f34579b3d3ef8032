"""Great Expectations suites, one per warehouse table, run on a task's output before it is written.

A failed suite raises DataValidationError listing each failed expectation with its unexpected count
and a few example values; nothing is written.

Validation ahead. Importing Great Expectations costs ≈ 2.7 s of CPU, more than validating a table of states.
A flow that knows it will validate soon (a re-calibration on new states: the new table waits for them) calls
start_ahead(): a helper process imports GX on the other core while the flow reads its cached stages, and
validate_frame then sends its frames there — the same suites, the same results and errors, the import off the
path. The helper reads (suite, frame, context) from its standard input and answers with the statistics or the
exception; it ends when its input closes (this process exits or calls stop_ahead). If it is gone, validation
runs here.
"""
from __future__ import annotations

import atexit
import functools
import logging
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from cr2.core.errors import DataValidationError

if TYPE_CHECKING:
    import pandas as pd  # GX imports it when a suite runs; starting the helper (start_ahead) does not

# Each suite is a list of (expectation class name, kwargs). Keep them declarative: this is the data contract.
SUITES: dict[str, Callable[[dict], list[tuple[str, dict]]]] = {}


def suite(name: str):
    def register(fn):
        SUITES[name] = fn
        return fn

    return register


@suite("queries")
def _queries(ctx: dict) -> list[tuple[str, dict]]:
    return [
        ("ExpectColumnValuesToNotBeNull", {"column": "query_id"}),
        ("ExpectColumnValuesToBeUnique", {"column": "query_id"}),
        ("ExpectColumnValuesToBeInSet", {"column": "benchmark", "value_set": list(ctx["benchmarks"])}),
        ("ExpectColumnValuesToNotBeNull", {"column": "question"}),
        ("ExpectColumnValuesToBeBetween", {"column": "prompt_tokens", "min_value": 1}),
        # against each query's dataset definition (configs/datasets/): option count, target among the options, tests
        # (each column is 'ok' or a description of the problem, cr2.inputs.datasets.answer_checks)
        ("ExpectColumnValuesToBeInSet", {"column": "choices_ok", "value_set": ["ok"]}),
        ("ExpectColumnValuesToBeInSet", {"column": "target_ok", "value_set": ["ok"]}),
        ("ExpectColumnValuesToBeInSet", {"column": "tests_ok", "value_set": ["ok"]}),
    ]


@suite("states")
def _states(ctx: dict) -> list[tuple[str, dict]]:
    return [
        ("ExpectColumnValuesToBeBetween", {"column": "distance_m", "min_value": ctx["low_m"], "max_value": ctx["high_m"]}),
        ("ExpectColumnValuesToBeBetween", {"column": "rate_ul_bps", "min_value": 0, "strict_min": True}),
        ("ExpectColumnValuesToBeBetween", {"column": "rate_dl_bps", "min_value": 0, "strict_min": True}),
        ("ExpectColumnValuesToBeBetween", {"column": "fading_ul", "min_value": 0}),
        ("ExpectColumnValuesToBeBetween", {"column": "fading_dl", "min_value": 0}),
    ]


@suite("costs")
def _costs(ctx: dict) -> list[tuple[str, dict]]:
    cols = ("latency_s", "energy_j", "cost_raw", "cost_norm", "cost_est_norm")
    return [("ExpectColumnValuesToBeBetween", {"column": c, "min_value": 0, "strict_min": True, "max_value": 1e12})
            for c in cols] + [("ExpectColumnValuesToNotBeNull", {"column": c}) for c in cols]


@suite("labels")
def _labels(ctx: dict) -> list[tuple[str, dict]]:
    return [
        ("ExpectColumnValuesToBeInSet", {"column": "correct", "value_set": [0, 1, True, False]}),
        ("ExpectColumnValuesToNotBeNull", {"column": "correct"}),
        ("ExpectCompoundColumnsToBeUnique", {"column_list": ["query_id", "model_id"]}),
        ("ExpectColumnValuesToBeInSet", {"column": "model_id", "value_set": list(ctx["models"])}),
    ]


@suite("splits")
def _splits(ctx: dict) -> list[tuple[str, dict]]:
    return [
        ("ExpectColumnValuesToBeInSet", {"column": "split", "value_set": ["train", "dev", "val", "test"]}),
        ("ExpectColumnValuesToBeUnique", {"column": "query_id"}),
        ("ExpectTableRowCountToEqual", {"value": ctx["n_queries"]}),
    ]


@suite("embeddings")
def _embeddings(ctx: dict) -> list[tuple[str, dict]]:
    return [
        ("ExpectColumnValuesToBeBetween", {"column": "norm", "min_value": 1 - 1e-3, "max_value": 1 + 1e-3}),
        ("ExpectColumnValuesToBeUnique", {"column": "query_id"}),
    ]


@functools.lru_cache(maxsize=1)
def _context():
    import logging

    import great_expectations as gx

    from great_expectations.data_context.types.base import ProgressBarsConfig

    previous = logging.root.manager.disable
    logging.disable(logging.INFO)  # GX announces its temporary docs folder at INFO on every new context
    try:
        ctx = gx.get_context(mode="ephemeral")
    finally:
        logging.disable(previous)
    ctx.variables.progress_bars = ProgressBarsConfig(globally=False)
    return ctx


@functools.lru_cache(maxsize=None)
def _batch_definition(name: str):
    """The whole-dataframe batch definition of suite `name`, made once per process: each validation passes its frame
    as a batch parameter (an asset per call would pile up in the context)."""
    ctx = _context()
    source = ctx.data_sources.add_pandas(f"cr2-{name}")
    return source.add_dataframe_asset("frame").add_batch_definition_whole_dataframe("whole")


def validate_frame(name: str, df: pd.DataFrame, **ctx_values) -> dict:
    """Run the GX suite `name` on df (its expectations in one validation: GX computes their metrics together); return
    its statistics or raise DataValidationError. In the helper process when one was started (start_ahead)."""
    ahead = _AHEAD.get("helper")
    if ahead is not None:
        answered, value = ahead.validate(name, df, ctx_values)
        if answered:
            return value
    return _validate_here(name, df, **ctx_values)


def _validate_here(name: str, df: pd.DataFrame, **ctx_values) -> dict:
    import great_expectations as gx
    import great_expectations.expectations as gxe

    expectations = SUITES[name](ctx_values)
    definition = _batch_definition(name)  # the context first: a suite is made inside one
    suite = gx.ExpectationSuite(name=f"cr2-{name}")
    for cls_name, kwargs in expectations:
        suite.add_expectation(getattr(gxe, cls_name)(**kwargs))
    batch = definition.get_batch(batch_parameters={"dataframe": df})
    results = batch.validate(suite).results
    if len(results) != len(expectations):
        raise DataValidationError(f"data validation of '{name}': {len(results)} results for {len(expectations)} "
                                  "expectations; nothing was written")
    failures = []
    for (cls_name, kwargs), result in zip(expectations, results):  # GX keeps the suite's order
        if not result.success:
            r = result.result or {}
            examples = r.get("partial_unexpected_list") or r.get("observed_value")
            failures.append(
                f"  {cls_name}({_describe(kwargs)}): {r.get('unexpected_count', '?')} unexpected; e.g. {str(examples)[:160]}"
            )
    if failures:
        raise DataValidationError(
            f"data validation of '{name}' failed ({len(failures)} of {len(expectations)} expectations); nothing was written:\n"
            + "\n".join(failures)
        )
    return {"suite": name, "expectations": len(expectations), "rows": len(df)}


def _describe(kwargs: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in kwargs.items() if k not in ("condition_parser",))


# ---------------------------------------------------------------- validation ahead (module docstring)
log = logging.getLogger(__name__)
_AHEAD: dict[str, "_Ahead"] = {}


class _Ahead:
    """The helper process and the one pipe pair to it (one request at a time)."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # this process's import path
        self.proc = subprocess.Popen([sys.executable, "-c", "from cr2_warehouse.validation import serve_ahead; "
                                      "serve_ahead()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.lock = threading.Lock()

    def validate(self, name: str, df: pd.DataFrame, ctx_values: dict) -> tuple[bool, object]:
        """(True, statistics) or the suite's error raised; (False, None) when the helper is gone (validate here)."""
        with self.lock:
            try:
                pickle.dump((name, df, ctx_values), self.proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
                self.proc.stdin.flush()
                ok, value = pickle.load(self.proc.stdout)
            except (OSError, EOFError, pickle.PickleError) as exc:
                log.warning("the validation helper is gone (%s: %s); validating in this process", type(exc).__name__, exc)
                stop_ahead()
                return False, None
        if not ok:
            raise value
        return True, value

    def close(self) -> None:
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.proc.kill()  # still importing, or waiting for input that will not come: nothing of it to keep
        self.proc.wait()


def start_ahead() -> bool:
    """Start the validation helper (module docstring) unless one runs or GX is already imported here; returns
    whether one was started."""
    if "helper" in _AHEAD or "great_expectations" in sys.modules:
        return False
    _AHEAD["helper"] = _Ahead()
    atexit.unregister(stop_ahead)  # registered once, however often a helper is started again
    atexit.register(stop_ahead)
    return True


def ahead_started() -> bool:
    """Whether a validation helper runs for this process."""
    return "helper" in _AHEAD


def stop_ahead() -> None:
    """End the validation helper, if one runs; validation runs in this process again."""
    helper = _AHEAD.pop("helper", None)
    if helper is not None:
        helper.close()


def serve_ahead() -> None:
    """The helper's loop: GX imported and a context made first, then each (suite, frame, context) read from standard
    input is answered on standard output with (True, statistics) or (False, the error), until the input closes."""
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # whatever GX prints goes to standard error, never into the replies
    for name in SUITES:
        _batch_definition(name)
    requests = sys.stdin.buffer
    while True:
        try:
            name, df, ctx_values = pickle.load(requests)
        except EOFError:
            return
        try:
            reply = (True, _validate_here(name, df, **ctx_values))
        except Exception as exc:  # noqa: BLE001 - every error goes back to the caller, as it would have been raised there
            reply = (False, exc)
        try:
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # noqa: BLE001 - an error that cannot travel is sent as its text
            reply = (False, DataValidationError(f"data validation of '{name}': {type(reply[1]).__name__}: {reply[1]}"))
            data = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        replies.write(data)
        replies.flush()
