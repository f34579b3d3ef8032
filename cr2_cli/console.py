"""Console output of cr2's commands: a Cr2Error raised inside a Prefect flow prints once, without a traceback.

Prefect logs a failing flow or task run with the full traceback ("Encountered exception during execution")
before the exception reaches the CLI, which then prints cr2's own one-line message. The filter below drops
those records from Prefect's *console* handler only when the exception is (or was caused by) a Cr2Error:
the API handler still ships them, so the flow run in Prefect keeps its Failed state and its traceback,
and any other exception (a bug) is still shown in full.
"""
from __future__ import annotations

import logging

from cr2.errors import Cr2Error


def cr2_cause(exc: BaseException | None) -> Cr2Error | None:
    """The Cr2Error `exc` is or was raised from (its __cause__/__context__ chain), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, Cr2Error):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


class HideCr2Tracebacks(logging.Filter):
    """Drop log records that carry a Cr2Error (the CLI prints its message itself)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return cr2_cause(exc) is None


_FILTER = HideCr2Tracebacks()


def hide_cr2_tracebacks_on_console() -> None:
    """Attach the filter to Prefect's console handlers; idempotent.

    Prefect 3.8 configures logging lazily (at the first flow run), so configure it now — a later
    setup is incremental and keeps these handlers, and with them the filter.
    """
    from prefect.logging.configuration import ensure_logging_setup
    from prefect.logging.handlers import PrefectConsoleHandler

    ensure_logging_setup()

    loggers = [logging.getLogger()] + [logging.getLogger(n) for n in list(logging.root.manager.loggerDict)]
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, PrefectConsoleHandler) and _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
