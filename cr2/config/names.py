"""One pattern for every name a user gives that cr2 stores or prints: state distributions, label sources,
model ids.

A name is checked before anything is written, so a command either completes or leaves the warehouse as it
was; names are also safe inside run ids (`import:<source>:<model>:…`), file names and console tables.
"""
from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator

from cr2.core.boundary import shown
from cr2.core.errors import DataValidationError

NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}"
NAME_RULE = ("1–64 characters: letters, digits, '.', '_' and '-', starting with a letter or digit "
             f"(pattern {NAME_PATTERN})")
_NAME_RE = re.compile(NAME_PATTERN)


def name_problem(value: Any, what: str) -> str | None:
    """Why `value` is not a valid `what` name (None when it is)."""
    if not isinstance(value, str):
        return f"{what} must be a string, got {type(value).__name__}"
    if _NAME_RE.fullmatch(value) is None:
        return f"{what} {shown(value)} is not a valid name; use {NAME_RULE}"
    return None


def check_name(value: Any, what: str) -> str:
    """`value` when it matches NAME_PATTERN, else DataValidationError naming `what`, the value and the rule."""
    problem = name_problem(value, what)
    if problem is not None:
        raise DataValidationError(problem)
    return value


def _pydantic_check(what: str):
    def check(value: str) -> str:
        problem = name_problem(value, what)
        if problem is not None:
            raise ValueError(problem)
        return value

    return AfterValidator(check)


# pydantic field types (cr2/config/, cr2/config/lmeval.py)
StateName = Annotated[str, _pydantic_check("state distribution name")]
SourceName = Annotated[str, _pydantic_check("label source")]
ModelId = Annotated[str, _pydantic_check("model id")]


def is_simulated(source: str) -> bool:
    """True for simulated label sources (their names start with 'simulated'; the SQL views use the same rule)."""
    return str(source).startswith("simulated")
