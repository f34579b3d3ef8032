"""Routers by name: CR² and the paper's baselines (§VII-A), looked up in one catalogue.

    from cr2.routers import get_router, available_routers, router_entry
    knn = get_router("knn").fit(train, dev)
    device_only = get_router("always-qwen3-1.7b")          # per-model routers: always-<model_id>
    router = get_router("mlp", seed=1, num_threads=2)       # keyword arguments go to the constructor
    router_entry("knn").predicts_proba                     # what evaluation needs to know, from the catalogue
    short_name("llmrank-bench"), routers_tagged("compared")  # what the report shows, from the catalogue

The catalogue is cr2/routers/catalogue.yaml (plus any extra catalogue files a config names under
`baselines.catalogues`); adding a router is its module + one entry (docs/new_router.md). Router modules are
imported only when a router is built, so `import cr2.routers` stays cheap and does not load torch. A miss
names the closest registered router: "unknown router 'knnn' — did you mean 'knn'? available: …".
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from cr2.core.errors import ConfigError, InvalidValueError, did_you_mean

CATALOGUE = Path(__file__).with_name("catalogue.yaml")
ALWAYS_PREFIX = "always-"


@dataclass(frozen=True)
class RouterEntry:
    """One router of the catalogue and the properties evaluation, SQL views and the report read."""

    name: str
    target: str  # module:Class (module may be a dotted name or a .py file path)
    kind: str  # cr2 | baseline
    learned: bool
    predicts_proba: bool
    display: str
    colour: str
    per_model: bool = False
    reference: bool = False
    params: tuple[tuple[str, Any], ...] = ()  # constructor defaults of this entry (a named variant of a class)
    order: int = 0  # position in the catalogue (figure and table order)
    reads_costs: bool = True  # fit() may read c/ĉ (channel-dependent): refitted when the states change
    short: str | None = None  # name in the report's tables (None: the router's id)
    tags: tuple[str, ...] = ()  # the groups a page or a study selects routers by (routers_tagged)

    def load_class(self) -> type:
        """Import and return the router class (a .py path is loaded as a module of its own)."""
        module_name, _, cls = self.target.partition(":")
        if module_name.endswith(".py"):
            path = Path(module_name)
            # the same module name in every process (hash() of a str differs per process), so a router of this
            # class pickled in a fit's process is found again in the process that started the fit
            key = f"cr2_router_plugin_{path.stem}_{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]}"
            module = sys.modules.get(key)
            if module is None:
                spec = importlib.util.spec_from_file_location(key, path)
                if spec is None or spec.loader is None:
                    raise ConfigError(f"router '{self.name}': cannot load module file {path}")
                module = importlib.util.module_from_spec(spec)
                sys.modules[key] = module
                spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        try:
            return getattr(module, cls)
        except AttributeError:
            raise ConfigError(f"router '{self.name}': {module_name} has no class {cls}") from None


_FIELDS = {"class", "kind", "learned", "predicts_proba", "display", "colour", "per_model", "reference", "params",
           "reads_costs", "short", "tags"}
_KINDS = ("cr2", "baseline", "baseline-variant")


def _read_catalogue(path: Path, start: int) -> dict[str, RouterEntry]:
    from cr2.core.boundary import load_yaml_file

    try:
        raw = load_yaml_file(path) or {}
    except InvalidValueError as exc:
        raise ConfigError(f"{path}: cannot read the router catalogue ({str(exc).splitlines()[0]})") from None
    out = {}
    for i, (name, spec) in enumerate(raw.items()):
        spec = dict(spec or {})
        unknown = sorted(set(spec) - _FIELDS)
        missing = sorted({"class", "kind", "learned", "predicts_proba", "display", "colour"} - set(spec))
        if unknown or missing:
            raise ConfigError(f"{path}: router '{name}': " + (f"unknown keys {unknown}; " if unknown else "")
                              + (f"missing keys {missing}; " if missing else "") + f"allowed: {sorted(_FIELDS)}")
        if spec["kind"] not in _KINDS:
            raise ConfigError(f"{path}: router '{name}': kind must be one of {_KINDS}, got {spec['kind']!r}")
        target = str(spec.pop("class"))
        params = tuple(sorted(dict(spec.pop("params", None) or {}).items()))
        tags = spec.pop("tags", None) or []
        if not isinstance(tags, list) or not all(isinstance(t, str) and t for t in tags):
            raise ConfigError(f"{path}: router '{name}': tags must be a list of names, got {tags!r}")
        module, _, cls = target.partition(":")
        if not cls:
            raise ConfigError(f"{path}: router '{name}': class must read module:Class, got {target!r}")
        if module.endswith(".py") and not Path(module).is_absolute():
            target = f"{(Path(path).parent / module).resolve()}:{cls}"
        out[str(name)] = RouterEntry(name=str(name), target=target, order=start + i, params=params, tags=tuple(tags),
                                     **{k: (bool(v) if k in ("learned", "predicts_proba", "per_model", "reference", "reads_costs")
                                            else str(v)) for k, v in spec.items()})
    return out


_EXTRA: list[Path] = []


@functools.lru_cache(maxsize=None)
def _catalogue(extra: tuple[str, ...]) -> dict[str, RouterEntry]:
    entries = _read_catalogue(CATALOGUE, 0)
    for path in extra:
        for name, entry in _read_catalogue(Path(path), len(entries)).items():
            if name in entries:
                raise ConfigError(f"{path}: router '{name}' is already in the catalogue; pick another name")
            entries[name] = entry
    if sum(e.reference for e in entries.values()) > 1:
        raise ConfigError("more than one router is marked reference: true in the catalogue")
    return entries


def use_catalogues(paths: Sequence[str | Path]) -> None:
    """Add extra catalogue files (a config's `baselines.catalogues`) to the registry of this process."""
    _EXTRA[:] = [Path(p).resolve() for p in paths]


def catalogue() -> dict[str, RouterEntry]:
    """Return name → RouterEntry for every catalogued router, in catalogue order."""
    return _catalogue(tuple(str(p) for p in _EXTRA))


def _key(name: str) -> str:
    entries = catalogue()
    if name in entries:
        return name
    for key, entry in entries.items():
        if entry.per_model and name.startswith(f"{key}-"):
            return key
    raise did_you_mean("router", name, available_routers())


def router_entry(name: str) -> RouterEntry:
    """Return the catalogue entry of `name` (per-model spellings such as always-<model_id> included)."""
    return catalogue()[_key(name)]


def available_routers(model_ids: Sequence[str] | None = None) -> list[str]:
    """Return the registered router names; with a pool, per-model routers expand to <name>-<model_id> per model."""
    entries = catalogue()
    if model_ids is None:
        return sorted(entries)
    per_model = [f"{k}-{m}" for k, e in entries.items() if e.per_model for m in model_ids]
    return per_model + sorted(k for k, e in entries.items() if not e.per_model)


def baseline_names(names: Sequence[str], model_ids: Sequence[str]) -> list[str]:
    """The routers of a config's `baselines.routers`, per-model entries expanded to <name>-<model_id>."""
    out = []
    for name in names:
        entry = router_entry(name)  # unknown names fail here, with a did-you-mean
        out += [f"{name}-{m}" for m in model_ids] if entry.per_model and name == entry.name else [name]
    return out


def learned_baselines() -> tuple[str, ...]:
    """The learned one-shot baselines, in catalogue order."""
    return tuple(k for k, e in catalogue().items() if e.kind == "baseline" and e.learned)


def short_name(name: str) -> str:
    """The router's name in the report's tables: its catalogue entry's `short`, else `name` itself (also for a name
    the catalogue does not hold — the full-information oracle, always-<model_id> — so a table never fails on a label)."""
    entry = catalogue().get(name)
    return entry.short if entry is not None and entry.short is not None else name


def routers_tagged(*tags: str, kinds: Sequence[str] | None = None) -> tuple[str, ...]:
    """The routers that carry every one of `tags` (and, with `kinds`, whose kind is one of them), in catalogue
    order: the one way a page or a study names a group of routers. An unknown tag is an error, not an empty group."""
    entries = catalogue()
    known = {t for e in entries.values() for t in e.tags}
    for tag in tags:
        if tag not in known:
            raise did_you_mean("router tag", tag, sorted(known))
    return tuple(k for k, e in entries.items()
                 if set(tags) <= set(e.tags) and (kinds is None or e.kind in kinds))


def reference_router() -> str:
    """The router fixed-accuracy savings and equal-risk comparisons are measured against: the one catalogue entry
    with `reference: true`. None or several is a catalogue error, not a silent default."""
    refs = [k for k, e in catalogue().items() if e.reference]
    if len(refs) != 1:
        raise ConfigError(f"the router catalogue must mark exactly one router `reference: true`; it marks {refs}")
    return refs[0]


def method_router() -> str:
    """The method under study (CR²): the one catalogue entry of kind `cr2`, the router every comparison names first.
    None or several is a catalogue error, not a silent default."""
    found = [k for k, e in catalogue().items() if e.kind == "cr2"]
    if len(found) != 1:
        raise ConfigError(f"the router catalogue must hold exactly one router of kind cr2; it holds {found}")
    return found[0]


def router_class(name: str) -> type:
    """Return the router class registered under `name` (imports its module)."""
    return router_entry(name).load_class()


def get_router(name: str, **kwargs: Any) -> Any:
    """Return an unfitted router built from `name` and the constructor keyword arguments."""
    entry = router_entry(name)
    cls = entry.load_class()
    kwargs = {**dict(entry.params), **kwargs}
    if entry.per_model and name != entry.name:
        return cls(model_id=name[len(entry.name) + 1 :], **kwargs)
    return cls(**kwargs)


def load_router(path: str | Path) -> Any:
    """Return the fitted baseline router saved at `path` (OneShotRouter.save), whatever its class."""
    from cr2.routers.base import read_router_file

    _, meta = read_router_file(path)
    return router_class(meta["name"]).load(path)


BASELINES: tuple[str, ...] = tuple(k for k, e in _read_catalogue(CATALOGUE, 0).items() if e.kind == "baseline")
LEARNED_BASELINES: tuple[str, ...] = tuple(k for k, e in _read_catalogue(CATALOGUE, 0).items()
                                           if e.kind == "baseline" and e.learned)

__all__ = ["ALWAYS_PREFIX", "BASELINES", "LEARNED_BASELINES", "RouterEntry", "available_routers", "baseline_names",
           "catalogue", "get_router", "learned_baselines", "load_router", "method_router", "reference_router",
           "router_class", "router_entry", "routers_tagged", "short_name", "use_catalogues"]
