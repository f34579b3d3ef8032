"""Finding and reading config files: names under configs/<kind>/, YAML within the input budgets, validation messages."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cr2.core.boundary import shown
from cr2.core.errors import ConfigError
from cr2.config.shipped import CONFIG_DIR, shipped_path



def resolve_named(ref: str | Path, kind: str) -> Path:
    """A name ('far-rician') or a path to a YAML file under configs/<kind>/ → the file's path."""
    p = Path(ref)
    if p.suffix in (".yaml", ".yml"):
        if p.is_file() or (p.exists() and not p.is_dir()):  # not a regular file: reading it says what it is
            return p
        candidate = CONFIG_DIR / kind / p.name
        if not p.is_absolute() and shipped_path(p).is_file():
            return shipped_path(p)
        if candidate.is_file():
            return candidate
        raise ConfigError(f"{kind} file '{ref}' not found; pass a path to a YAML file or one of: {names_in(kind)}")
    candidate = CONFIG_DIR / kind / f"{ref}.yaml"
    if candidate.is_file():
        return candidate
    raise ConfigError(f"unknown {kind} '{ref}'; available: {names_in(kind)} (or pass a path to a YAML file)")


def names_in(kind: str) -> str:
    return ", ".join(sorted(p.stem for p in (CONFIG_DIR / kind).glob("*.yaml"))) or "(none)"


def read_yaml(path: Path) -> dict[str, Any]:
    """A config file's top-level mapping, read within cr2.core.boundary's budgets (a regular file; bytes, alias
    expansion, depth; syntax errors naming file and line)."""
    from cr2.core.boundary import load_yaml_file
    from cr2.core.errors import InvalidValueError

    try:
        data = load_yaml_file(path)
    except InvalidValueError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level, got {type(data).__name__}")
    return data


def format_validation(path: Path, exc: ValidationError) -> str:
    lines = [f"{path}: invalid configuration ({exc.error_count()} problem{'s' if exc.error_count() > 1 else ''})"]
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            lines.append(f"  {loc}: unknown key; remove it or check its spelling (see configs/default.yaml)")
        elif err["type"] == "missing":
            lines.append(f"  {loc}: required key is missing")
        else:
            got = err.get("input")
            got_s = "" if isinstance(got, (dict, list)) else f" (got {shown(got)})"
            lines.append(f"  {loc}: {err['msg']}{got_s}")
    return "\n".join(lines)
