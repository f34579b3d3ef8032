"""One error hierarchy for cr2: every message says what was wrong, where, and what to do."""
from __future__ import annotations


class Cr2Error(Exception):
    """Base class of every error cr2 raises on purpose (the CLI prints these without a traceback)."""

    exit_code = 2


class InvalidValueError(Cr2Error, ValueError):
    """An argument has an invalid value or shape (a ValueError too, so callers catching ValueError still do)."""


class ConfigError(Cr2Error):
    """A configuration file is missing, malformed, or holds an invalid value."""


class DataValidationError(Cr2Error):
    """Input data (a benchmark file, a label file, a table) fails validation."""


class WarehouseError(Cr2Error):
    """The warehouse cannot be opened or is of another schema version."""


class DiskFullError(Cr2Error, OSError):
    """A file could not be written because its disk is full or a quota or file-size limit is reached (an OSError
    too, so a caller that handles failed writes handles it); the message names the file
    (cr2.core.files.disk_full_error)."""


class NotFittedError(Cr2Error):
    """A router or model was used before fit()."""


class UncalibratedOperatingPointError(Cr2Error):
    """A (λ, α) operating point is not in the calibrated threshold table."""


class FingerprintMismatchError(Cr2Error):
    """A threshold table is used with a score (gate) other than the one it was calibrated for."""


class Cr2SqlError(Cr2Error):
    """A user's SQL statement failed or is not allowed on the warehouse."""


class UnknownNameError(Cr2Error, LookupError):
    """A registry lookup (router, label source, state distribution) missed."""


def did_you_mean(kind: str, name: str, available: list[str]) -> UnknownNameError:
    """Return an UnknownNameError in the registry style: unknown X 'y' — did you mean 'z'? available: …"""
    import difflib

    close = difflib.get_close_matches(name, available, n=1)
    hint = f" — did you mean '{close[0]}'?" if close else ""
    return UnknownNameError(f"unknown {kind} '{name}'{hint} available: {', '.join(sorted(available))}")


class GroupTooSmallError(Cr2Error):
    """A Mondrian group has too few calibration queries for the requested α (and δ)."""


class TargetInfeasibleError(Cr2Error):
    """No calibrated operating point can be certified to meet an accuracy target or a cost budget."""
