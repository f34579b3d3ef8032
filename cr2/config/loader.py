"""Loading a config: the default file, `extends:` chains, overrides, state distributions by name."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from cr2.core.errors import ConfigError
from cr2.config.shipped import CONFIG_DIR, shipped_path
from cr2.config.files import format_validation, read_yaml, resolve_named
from cr2.config.system import StateDistribution
from cr2.config.root import Config


DEFAULT_CONFIG = CONFIG_DIR / "default.yaml"
MAX_EXTENDS_DEPTH = 16  # files in one `extends:` chain (the shipped configs use 2)


def load_config(path: str | Path | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """Load and validate a cr2 config (None → configs/default.yaml; a name or a configs/ path not in the current folder
    → the shipped file, resolve_config_path); raises ConfigError naming file and key."""
    cfg_path = Path(path) if path is not None else DEFAULT_CONFIG
    if not cfg_path.is_file():
        try:
            cfg_path = resolve_config_path(cfg_path)
        except ConfigError:
            pass  # reading it below names the missing file
    data = _resolve_extends(cfg_path)
    if overrides:
        data = deep_merge(data, overrides)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation(cfg_path, exc)) from None
    except ConfigError as exc:  # a referenced states/hardware file failed to load
        raise ConfigError(f"{cfg_path}: {exc}") from None


def _resolved(path: Path) -> Path:
    from cr2.core.boundary import resolve_path
    from cr2.core.errors import InvalidValueError

    try:
        return resolve_path(path, "config")
    except InvalidValueError as exc:
        raise ConfigError(str(exc)) from None


def _resolve_extends(path: Path) -> dict[str, Any]:
    """The settings of `path` merged over those of the files its `extends:` chain names (`extends: default`: a name
    under configs/ or a path), at most MAX_EXTENDS_DEPTH files, followed iteratively (no recursion)."""
    chain = [read_yaml(path)]
    seen = [_resolved(path)]
    while (base_ref := chain[-1].pop("extends", None)) is not None:
        base = Path(str(base_ref))
        if base.suffix not in (".yaml", ".yml"):
            base = CONFIG_DIR / f"{base_ref}.yaml"
        elif not base.is_absolute():
            base = path.parent / base
        if not base.is_file():
            raise ConfigError(f"{path}: extends: '{base_ref}' not found (a name under configs/, e.g. 'default', or a "
                              "YAML path)")
        if _resolved(base) in seen:
            raise ConfigError(f"{path}: extends: '{base_ref}' forms a cycle")
        if len(chain) >= MAX_EXTENDS_DEPTH:
            raise ConfigError(f"{seen[0]}: its `extends:` chain is longer than {MAX_EXTENDS_DEPTH} files; merge some "
                              "of them")
        path = base
        chain.append(read_yaml(path))
        seen.append(_resolved(path))
    data: dict[str, Any] = {}
    for layer in reversed(chain):  # the base first, each file's keys over it
        data = deep_merge(data, layer)
    return data


def load_state_distribution(ref: str | Path) -> StateDistribution:
    """Load a named or file state distribution (configs/states/NAME.yaml)."""
    path = resolve_named(ref, "states")
    try:
        return StateDistribution.model_validate(read_yaml(path))
    except ValidationError as exc:
        raise ConfigError(format_validation(path, exc)) from None


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def resolve_config_path(ref: str | Path) -> Path:
    """A config named by its file name under configs/ ('mmlu-pro-measured') or by a path → the file's path."""
    p = Path(str(ref))
    if p.suffix not in (".yaml", ".yml"):
        p = CONFIG_DIR / f"{ref}.yaml"
    elif not p.is_absolute() and not p.is_file():
        p = shipped_path(p)
    if not p.is_file():
        names = ", ".join(sorted(q.stem for q in CONFIG_DIR.glob("*.yaml"))) or "(none)"
        raise ConfigError(f"config '{ref}' not found; pass a YAML path or one of: {names}")
    return p
