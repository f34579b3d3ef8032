"""Which config fields a computation reads: declared paths, their digest, and a read-tracking view of a config.

A cached stage declares the config fields it reads as dotted paths ("splits.seed", "channel" for a whole
section). Its cache key hashes the values at exactly those paths (`config_digest`), so a field outside them
cannot change the key, and every field inside does. `TrackedConfig` is the matching check: a view of a config
that records each field the code reads through it (properties and methods of the config classes run against the
view, so their own reads are recorded field by field; pydantic's whole-model methods such as model_dump read the
whole subtree they are called on), and `undeclared` lists what was read outside the declaration.
`leaf_paths` enumerates every leaf of a config from its pydantic models (the perturbation tests walk it).
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from pydantic import BaseModel

ROOT = ""  # the path of the whole config


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def covered(path: str, declared: Iterable[str]) -> bool:
    """Whether reading `path` is within a declared path (the path itself or a section above it)."""
    return any(d == ROOT or path == d or path.startswith(d + ".") for d in declared)


def value_at(config: Any, path: str) -> Any:
    """The value at a dotted path (attribute names; dictionary keys below a dict-valued field)."""
    value = config
    for name in path.split(".") if path else ():
        value = value[name] if isinstance(value, dict) else getattr(value, name)
    return value


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def config_digest(config: Any, paths: Iterable[str]) -> str:
    """Hash of the config's values at `paths` (and of the paths themselves): part of a stage's cache key."""
    from cr2.core.hashing import content_fingerprint

    return content_fingerprint({p: _plain(value_at(config, p)) for p in sorted(set(paths))})


def leaf_paths(model: BaseModel, path: str = ROOT) -> Iterator[str]:
    """Every leaf field of a config instance, from its pydantic models: a nested model is walked field by field,
    a dict-valued field entry by entry (its values walked the same way); anything else is a leaf."""
    for name in type(model).model_fields:
        yield from _leaves(getattr(model, name), _join(path, name))


def _leaves(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, BaseModel):
        yield from leaf_paths(value, path)
    elif isinstance(value, dict) and value and all(isinstance(k, str) and "." not in k for k in value):
        for k, v in value.items():
            yield from _leaves(v, _join(path, k))
    else:
        yield path


class TrackedConfig:
    """A read-tracking view of a pydantic config (or of one of its sections).

    Reading a field that holds a model gives a view of it; reading any other field (a number, a string, a list,
    a dict) records the field's path and returns the value. A property or method defined by the config's own
    classes runs with the view as `self`; pydantic's own methods (model_dump, model_copy, …) record the whole
    subtree they are called on and run on the real model. `isinstance` sees the real class.
    """

    __slots__ = ("_model", "_path", "_reads")

    def __init__(self, model: BaseModel, path: str = ROOT, reads: set[str] | None = None):
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_reads", set() if reads is None else reads)

    @property
    def __class__(self):  # noqa: D401  (isinstance checks and pydantic validation see the real class)
        return type(self._model)

    @property
    def reads(self) -> set[str]:
        return self._reads

    def _note(self, path: str) -> None:
        self._reads.add(path)

    def __getattr__(self, name: str) -> Any:
        model, cls = self._model, type(self._model)
        if name in cls.model_fields:
            value = getattr(model, name)
            child = _join(self._path, name)
            if isinstance(value, BaseModel):
                return TrackedConfig(value, child, self._reads)
            self._note(child)
            return value
        found, own = _own_attribute(cls, name)
        if isinstance(own, property):
            return own.fget(self)
        if found:
            return own.__get__(self, cls) if hasattr(own, "__get__") else own
        self._note(self._path)  # pydantic's whole-model API (model_dump, model_copy, model_fields_set, …)
        return getattr(model, name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a tracked config is read-only")

    def __eq__(self, other: Any) -> bool:
        self._note(self._path)
        return self._model == (other._model if isinstance(other, TrackedConfig) else other)

    def __hash__(self) -> int:
        self._note(self._path)
        return hash(self._model)

    def __repr__(self) -> str:
        self._note(self._path)
        return repr(self._model)

    def __iter__(self):
        self._note(self._path)
        return iter(self._model)

    def __reduce__(self):
        """Pickled (e.g. handed to a fit in another process) as the real model: the whole subtree is read."""
        self._note(self._path)
        return (_same, (self._model,))


def _same(value: Any) -> Any:
    return value


def _own_attribute(cls: type, name: str) -> tuple[bool, Any]:
    """(True, attribute) when a class in cls's MRO below pydantic's BaseModel defines `name`, else (False, None)."""
    for klass in cls.__mro__:
        if klass is BaseModel or klass is object:
            break
        if name in vars(klass):
            return True, vars(klass)[name]
    return False, None


def undeclared(reads: Iterable[str], declared: Iterable[str]) -> list[str]:
    """The recorded reads not covered by the declared paths."""
    declared = tuple(declared)
    return sorted(r for r in set(reads) if not covered(r, declared))
