"""What every cr2 task shares: stages, cache keys from content fingerprints, result storage, the warehouse epoch.

Prefect's default cache policy includes the flow-run id, so it caches only within one run. Each cr2 task
is instead one `Stage`: the task, a key function and the files its result points at. The key function
takes the task's own arguments (config, home, the upstream results) and is the task's `cache_key_fn`, so
Prefect computes the key from
  - the content fingerprint of the task's inputs (files, warehouse tables),
  - the hash of the config sections the task reads,
  - the hash of the source code of the modules it runs (cr2 library + the task module: `code_hash`),
  - the warehouse's epoch (a random id written when the warehouse file is created, so a deleted or
    replaced warehouse never reuses results computed for another one).
`run_stage` runs a stage inside a flow (cached, or recomputed when an output file went missing) and marks
its result `cached`. Results (small JSON-able summaries) persist under <home>/prefect-results.
"""
from __future__ import annotations

import ast
import functools
import hashlib
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import Task

from warehouse.files import home_relative, in_home  # noqa: F401  (recorded paths: relative to the home)


def make_key(stage: str, *parts: Any) -> str:
    """A cache key: sha256 over the stage name and the string form of each part."""
    h = hashlib.sha256(stage.encode())
    for p in parts:
        h.update(b"\x1f" + str(p).encode())
    return f"{stage}-{h.hexdigest()[:24]}"


PROJECT_ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("cr2", "tasks", "flows", "warehouse", "cr2_cli")
DATA_SUFFIXES = (".sql", ".yaml", ".yml", ".json")
_PKG = "(?:%s)(?:\\.[A-Za-z_]\\w*)+" % "|".join(PROJECT_PACKAGES)
_MODULE_STRING = re.compile(rf"{_PKG}(?::[A-Za-z_]\w*)?")  # a whole string constant naming a module (registries)
_MODULE_TARGET = re.compile(rf"\b({_PKG}):[A-Za-z_]\w*")  # 'module:Class' inside a data file


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of project module `name` under `root`, or None when it is not one."""
    if name.split(".")[0] not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _package_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] != "__init__" else parts[:-1])


def _imported_names(path: Path, root: Path) -> set[str]:
    """Project module names a source file can execute: every import (module level or inside functions,
    relative ones resolved) and every 'package.module[:Class]' string it names (lazy registries)."""
    st = path.stat()
    return set(_parsed_names(path, root, st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=4096)
def _parsed_names(path: Path, root: Path, mtime_ns: int, size: int) -> frozenset[str]:
    """_imported_names of one version of a file (parsed once per process while it is unchanged)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = _package_of(path, root)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            names.add(mod)
            names.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_STRING.fullmatch(node.value):
            names.add(node.value.split(":")[0])
    return frozenset(names)


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _data_files(directory: Path) -> list[Path]:
    """SQL/YAML/JSON files beside a module and in its data sub-folders (folders that are not packages)."""
    files = [p for p in directory.iterdir() if p.suffix in DATA_SUFFIXES and p.is_file()]
    for sub in directory.iterdir():
        if sub.is_dir() and not (sub / "__init__.py").exists() and sub.name != "__pycache__":
            files += [p for p in sub.rglob("*") if p.suffix in DATA_SUFFIXES and p.is_file()]
    return files


def code_closure(*module_names: str, root: Path = PROJECT_ROOT) -> tuple[Path, ...]:
    """Every project source and data file the named modules can execute or read, found from their imports.

    Follows imports transitively (including imports inside functions and 'module:Class' strings of lazy
    registries, in code and in the data files found), and adds the SQL/YAML/JSON files beside each module
    reached (e.g. warehouse/views/*.sql for the warehouse package).
    """
    todo = [n for name in module_names for n in _with_parents(name)]
    seen_mod: set[str] = set()
    files: set[Path] = set()
    while todo:
        name = todo.pop()
        if name in seen_mod:
            continue
        seen_mod.add(name)
        path = _module_file(name, root)
        if path is None:
            continue
        files.add(path)
        found = set(_imported_names(path, root))
        for data in _data_files(path.parent):
            if data not in files:
                files.add(data)
                found.update(_MODULE_TARGET.findall(data.read_text(encoding="utf-8", errors="replace")))
        for mod in found:
            todo.extend(n for n in _with_parents(mod.split(":")[0]) if n not in seen_mod)
    return tuple(sorted(files))


def code_hash(*module_names: str, root: Path = PROJECT_ROOT) -> str:
    """Hash of every project file the named modules can execute (code_closure under `root`): a change anywhere
    in it invalidates the tasks that run it; an edit outside it keeps their cache. Computed from the source
    files alone (nothing is imported), once per process for the installed tree."""
    if root == PROJECT_ROOT:
        return _project_code_hash(module_names)
    return _hash_files(code_closure(*module_names, root=root), root)


@functools.lru_cache(maxsize=None)
def _project_code_hash(module_names: tuple[str, ...]) -> str:
    return _hash_files(code_closure(*module_names), PROJECT_ROOT)


def _hash_files(paths: tuple[Path, ...], root: Path) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def catalogue_hash(config: Any) -> str:
    """Content hash of a config's extra router catalogues and the module files their entries name
    (routers outside the project tree, which code_closure cannot see)."""
    from cr2.routers import use_catalogues

    use_catalogues(config.baselines.catalogues)
    paths = []
    for cat in config.baselines.catalogues:
        paths.append(Path(cat))
        if Path(cat).is_file():
            import yaml

            for spec in (yaml.safe_load(Path(cat).read_text()) or {}).values():
                module = str((spec or {}).get("class", "")).partition(":")[0]
                if module.endswith(".py"):
                    paths.append(Path(module) if Path(module).is_absolute() else Path(cat).parent / module)
    return file_hash(*paths)


def task_code_hash(task_or_fn: Any) -> str:
    """code_hash of the module that defines a task (its import closure), found from the task itself."""
    fn = getattr(task_or_fn, "fn", task_or_fn)
    return code_hash(fn.__module__)


def file_hash(*paths: Path) -> str:
    """Content hash of files (missing files hash as 'missing', so they surface as errors in the task)."""
    h = hashlib.sha256()
    for p in paths:
        h.update(str(Path(p).name).encode())
        h.update(Path(p).read_bytes() if Path(p).is_file() else b"missing")
    return h.hexdigest()[:16]


def cache_dir(home: Path) -> Path:
    """Derived, re-creatable files (converted tokenizer, checkpoints): $CR2_CACHE or <home>/cache."""
    env = os.environ.get("CR2_CACHE")
    d = Path(env) if env else Path(home) / "cache"
    d.mkdir(parents=True, exist_ok=True)
    return d


def results_dir(home: Path) -> Path:
    d = Path(home) / "prefect-results"
    d.mkdir(parents=True, exist_ok=True)
    return d


@dataclass(frozen=True)
class Stage:
    """One cached pipeline stage.

    task:    the Prefect task, called as task(config, home, *inputs);
    key:     its cache key from the same arguments, key(config, home, *inputs) -> str — Prefect's cache_key_fn;
    outputs: the files a result points at, outputs(home, result) -> paths; a cached result with one of them
             missing (deleted since) is recomputed.
    """

    task: Task
    key: Callable[..., str]
    outputs: Callable[[Path, dict], Iterable[str | Path]] | None = None

    def _cache_key(self, context: Any, parameters: dict[str, Any]) -> str:
        return self.key(**parameters)

    def bound(self, home: str | Path) -> Task:
        """The task with this stage's key and its persisted-result cache under <home>/prefect-results."""
        return self.task.with_options(cache_key_fn=self._cache_key, persist_result=True,
                                      result_storage=results_dir(Path(home)))


def run_stage(stage: Stage, config: Any, home: str | Path, *inputs: Any, **options: Any) -> dict:
    """Run `stage` inside the current flow: its cached result when the key is unchanged and every output file
    exists, else a fresh run. Returns the task's result with `cached` (bool) added. `options` go to
    Task.with_options (e.g. a task runner's settings)."""
    task = stage.bound(home).with_options(**options) if options else stage.bound(home)
    state = task(config, str(home), *inputs, return_state=True)
    result = state.result()
    if stage.outputs is not None and not all(in_home(home, p).is_file() for p in stage.outputs(Path(home), result)):
        state = task.with_options(refresh_cache=True)(config, str(home), *inputs, return_state=True)
        result = state.result()
    return {**result, "cached": state.name == "Cached"}


def in_warehouse(key_fn: Callable[..., str]) -> Callable[..., str]:
    """A key function of (config, wh, …) as a stage key of (config, home, …): it opens the warehouse at `home`."""
    @functools.wraps(key_fn)
    def key(config: Any, home: str | Path, *args: Any, **kwargs: Any) -> str:
        from warehouse.db import Warehouse

        with Warehouse(home) as wh:
            return key_fn(config, wh, *args, **kwargs)

    return key


def stage_key(stage: Stage, *args: Any, **kwargs: Any) -> str:
    """Inside a stage's task: the cache key Prefect computed for this run (the transaction's). Called outside a
    Prefect task run (a test calling task.fn) or when Prefect could not compute it, the key is computed here
    from the same arguments (errors surface)."""
    from prefect.transactions import get_transaction

    txn = get_transaction()
    if txn is not None and txn.key:
        return str(txn.key)
    return stage.key(*args, **kwargs)
