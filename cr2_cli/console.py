"""Console output of cr2's commands: the consoles, one error line per failure, never a traceback.

`friendly` wraps every command: cr2's own errors print as one `error: …` line and exit with their code (2),
anything else exits 1 with a line saying how to see the traceback.

A Cr2Error raised inside a Prefect flow prints once, without a traceback.

Prefect logs a failing flow or task run with the full traceback ("Encountered exception during execution")
before the exception reaches the CLI, which then prints cr2's own one-line message. The filter below drops
those records from Prefect's *console* handler only when the exception is (or was caused by) a Cr2Error:
the API handler still ships them, so the flow run in Prefect keeps its Failed state and its traceback,
and any other exception (a bug) is still shown in full.
"""
from __future__ import annotations

import functools
import logging
import os
import re
import signal
import traceback
from typing import NoReturn

import click
import typer
from rich.console import Console

from cr2.core.errors import Cr2Error
from cr2.core.files import disk_full_error, is_disk_full


class SafeConsole(Console):
    """A Rich console whose printed text can never drive the terminal: every text segment passes through
    cr2.core.boundary.printable (ESC / CSI / OSC sequences and other control characters removed) after layout, while
    Rich's own styles and cursor controls (progress bars) are kept. Every console of the CLI is one of these."""

    def _render_buffer(self, buffer):
        from rich.segment import Segment

        from cr2.core.boundary import printable

        return super()._render_buffer(seg if seg.control else Segment(printable(seg.text), seg.style, seg.control)
                                      for seg in buffer)

    def _size(self):
        """Rich's size, except for output that is not a terminal (a pipe, a file) with no $COLUMNS: there a table is
        laid out at its own width (up to PIPED_WIDTH), never wrapped to 80 columns with its cells cut."""
        from rich.console import ConsoleDimensions

        dims = Console.size.fget(self)
        if self._width is None and "COLUMNS" not in self._environ and not self.is_terminal:
            return ConsoleDimensions(PIPED_WIDTH, dims.height)
        return dims

    size = property(_size, Console.size.fset)


PIPED_WIDTH = 1000  # columns of output written to a pipe or file (a wide table stays one row per line)


# markup=False: nothing printed is parsed as Rich markup — names, SQL results and questions may hold "[x]" or
# "[/x]"; styles are given as Text / style= where wanted
console = SafeConsole(markup=False)
err_console = SafeConsole(stderr=True, markup=False)


def emit(text: str) -> None:
    """Print a block of plain text (markdown tables) on stdout as it is, less any terminal control characters."""
    import sys

    from cr2.core.boundary import printable

    sys.stdout.write(printable(text) + "\n")

TRACEBACK_ENV = "CR2_TRACEBACK"


def cr2_cause(exc: BaseException | None) -> Cr2Error | None:
    """The Cr2Error `exc` is or was raised from (its __cause__/__context__ chain), or None."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, Cr2Error):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


def storage_cause(exc: BaseException, home) -> Cr2Error | None:
    """The WarehouseError for a full disk or a damaged warehouse file that reached the command without passing
    through the warehouse's own checks (cr2_warehouse.db.storage_error), naming the warehouse of `home`; else None."""
    from cr2_cli.options import resolve_home
    from cr2_warehouse.db import DB_NAME, storage_error

    try:
        path = resolve_home(home) / DB_NAME
    except Exception:  # noqa: BLE001 - only a better message is at stake
        path = "the warehouse"
    return storage_error(exc, path)


def cr2_error_names() -> frozenset[str]:
    """The class names of cr2's errors (Cr2Error and every subclass)."""
    names, todo = set(), [Cr2Error]
    while todo:
        cls = todo.pop()
        names.add(cls.__name__)
        todo.extend(cls.__subclasses__())
    return frozenset(names)


# Prefect's run-state line names the exception by class: "Task run encountered an exception DataValidationError: …",
# "Flow run encountered an exception. ConfigError: …"
_FAILED_STATE = re.compile(r"encountered an exception\.? ([A-Za-z_]\w*): ")


class HideCr2Tracebacks(logging.Filter):
    """Drop log records about a Cr2Error (the CLI prints its message itself): those that carry one, and Prefect's
    "Finished in state Failed(… encountered an exception <Cr2Error subclass>: …)" lines, which carry only its name."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if cr2_cause(exc) is not None:
            return False
        if record.levelno >= logging.ERROR:
            m = _FAILED_STATE.search(record.getMessage())
            if m and m.group(1) in cr2_error_names():
                return False
        return True


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


def print_error(message: str) -> None:
    """`error: <message>` on stderr, the only line a failed command prints."""
    err_console.print("error: ", style="bold red", end="", highlight=False)
    err_console.print(message, highlight=False, markup=False, soft_wrap=True)


def printable_path(path) -> str:
    """A file name for an error line: at most 120 characters, control characters removed."""
    from cr2.core.boundary import printable

    text = printable(str(path))
    return text if len(text) <= 120 else text[:117] + "…"


def release_frames(exc: BaseException | None) -> None:
    """Clear the local variables of every finished frame in `exc`'s tracebacks (its cause/context chain included).

    Prefect keeps a failed run's exception in its state, and with it every frame the error passed through; a
    Warehouse or DuckDB relation held there outlives the command and the DuckDB binding reports it as "leaked" at
    interpreter exit. Clearing the frames lets them close now."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        traceback.clear_frames(exc.__traceback__)
        exc = exc.__cause__ or exc.__context__


def friendly(fn=None, *, flow: bool = False, existing_home: bool = False, ahead=None):
    """Turn every error into a short message and a non-zero exit code, never a traceback: cr2's own errors
    exit with their code (2), anything else with 1 and a line saying how to see the traceback.

    flow=True (commands that run a Prefect flow): Prefect's console log of a Cr2Error is dropped too. The
    others need not pay for importing prefect. existing_home=True (flow commands that work on a warehouse
    another command built): a --home without one is refused before anything, Prefect's state included, is
    created there. ahead: a function of the command's arguments called first, before the home is checked or Prefect
    imported (work a helper process can do beside the command's start: recalibrate's validation helper; it must
    create nothing in the home and leave every error to the command). Use as `@friendly` or
    `@friendly(flow=True)`."""
    if fn is None:
        return functools.partial(friendly, flow=flow, existing_home=existing_home, ahead=ahead)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        restore_signals = None
        try:
            if ahead is not None:  # first: it runs beside everything after, the checks of the arguments included
                ahead(kwargs)
            if existing_home:
                from cr2_cli.options import home_dir

                home_dir(kwargs.get("home"), create=False)
            if flow:  # a Cr2Error inside a flow: our one message, not Prefect's traceback
                from cr2_cli import prefect_api
                from cr2_cli.options import prefect_templates, use_prefect_home

                use_prefect_home(kwargs.get("home"))  # the home's Prefect state, before a server starts on it
                restore_signals = prefect_api.handle_termination()  # SIGTERM / SIGHUP end it as Ctrl-C does
                # a temporary API server starts while the command imports its flow (a new Prefect home: from the
                # store's migrated database)
                prefect_api.prestart(prefect_templates(kwargs.get("home")))
                hide_cr2_tracebacks_on_console()
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, click.ClickException):  # click's own exits and usage errors
            raise
        except Cr2Error as exc:
            release_frames(exc)
            _exit_if_signalled()  # a SIGTERM / SIGHUP that arrived while the error was on its way wins
            print_error(str(exc))
            raise typer.Exit(exc.exit_code) from None
        except OSError as exc:  # a path the user gave that the system refuses (too long, a folder, no permission…)
            release_frames(exc)
            _exit_if_signalled()
            if is_disk_full(exc):  # a write outside cr2's own (Prefect's results, a folder made): the same message
                where = printable_path(exc.filename) if exc.filename is not None else "a file under the home or cache"
                print_error(str(disk_full_error(where, exc, "The warehouse keeps every completed write.")))
                raise typer.Exit(2) from None
            where = f": {printable_path(exc.filename)}" if exc.filename is not None else ""
            print_error(f"{exc.strerror or type(exc).__name__}{where}")
            raise typer.Exit(2) from None
        except KeyboardInterrupt as exc:
            release_frames(exc)
            _interrupted(exc)
        except Exception as exc:  # errors raised inside Prefect tasks arrive wrapped or re-raised as-is
            _exit_if_signalled(exc)  # the signal's exception, caught and re-raised as another by a library
            cause = cr2_cause(exc) or storage_cause(exc, kwargs.get("home"))
            if cause is not None:
                release_frames(exc)
                print_error(str(cause))
                raise typer.Exit(cause.exit_code) from None
            if os.environ.get(TRACEBACK_ENV):
                raise
            release_frames(exc)
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            print_error(f"unexpected {type(exc).__name__}: {first} — this is a bug in cr2 (the warehouse keeps only "
                        f"completed writes); run again with {TRACEBACK_ENV}=1 to see the traceback, and report it")
            raise typer.Exit(1) from None
        finally:
            if restore_signals is not None:
                restore_signals()

    return wrapper


def _exit_if_signalled(exc: BaseException | None = None) -> None:
    """End the command as the SIGTERM / SIGHUP it received does (cr2_cli.prefect_api.handle_termination, flow
    commands), whatever error came out of it meanwhile: a library that caught the signal's exception raised its own,
    or the command met an error while the signal was arriving."""
    from cr2_cli.prefect_api import terminated_by

    signalled = terminated_by()
    if signalled is not None:
        if exc is not None:
            release_frames(exc)
        _interrupted(signalled)


def _interrupted(exc: BaseException) -> NoReturn:
    """End the command as Ctrl-C, SIGTERM or SIGHUP (cr2_cli.prefect_api.Terminated) does: one line, exit 128 + signal."""
    signum = getattr(exc, "signum", signal.SIGINT)
    print_error(f"{'interrupted' if signum == signal.SIGINT else str(exc)}; the warehouse keeps only completed "
                "writes (each write is one transaction)")
    raise typer.Exit(128 + signum) from None
