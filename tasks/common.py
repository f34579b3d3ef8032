"""What every cr2 task shares: stages, cache keys from declared reads, result storage, the warehouse epoch.

Prefect's default cache policy includes the flow-run id, so it caches only within one run. Each cr2 task
is instead one `Stage`: the task, the reads it declares, and the files its result points at. A stage's
`Reads` name, in one place, everything its task reads:
  - the config fields (dotted paths; cr2.config.reads),
  - the warehouse rows (`Rows`: a table with a filter and columns; `RoutingRows`: the routing view),
  - the files (benchmark files, accuracy targets),
  - the tables whose rows its upstream results name (their content fingerprints are in those results),
and the key (`Stage.key`, Prefect's cache_key_fn) is computed from exactly that declaration: the config values
at the declared paths, the content fingerprint of each declared row set and file, the upstream results'
fingerprints (`Stage.upstream`), the hash of the source code the task can run (`code_hash`) and the
warehouse's epoch (a random id written when the warehouse file is created, so a deleted or replaced warehouse
never reuses results computed for another one). Every key is built by the same code (`Reads.key_parts`), which opens
the warehouse only for a stage that reads or writes tables; one that touches none (a premise cell, computed on a
Dask worker) keys on its config and its upstream results, which carry the epoch. Nothing is listed twice, so a
key cannot miss a read the declaration has; `tracked_run` runs a task on a read-tracking view of the config and of the warehouse, and
its check fails on any read outside the declaration (tests/test_stage_reads.py runs it for every stage).
`run_stage` runs a stage inside a flow (cached, or recomputed when an output file went missing) and marks
its result `cached`. Results (small JSON-able summaries) persist under <home>/prefect-results.

A fitted artefact that outlives its stage's key (the teacher across state distributions, a baseline that reads no
cost, an ablated gate) declares its inputs the same way (`Artefact`: a `Reads` of config paths and files, the row
fields it can read, its code) and is recorded in the content-addressed store under a key computed from that
declaration by the same code (tasks/store.py: the one place files under <home>/cache are keyed, read and written;
`cache_key` keys stages and store entries alike).
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prefect import Task

from cr2.core.errors import DiskFullError
from cr2.core.files import atomic_write
from cr2.core.hashing import bytes_array, content_fingerprint
from cr2.config.reads import TrackedConfig, config_digest, undeclared
from cr2_tasks.store import cache_key

from cr2_warehouse.files import home_relative, in_home  # noqa: F401  (recorded paths: relative to the home)


PROJECT_ROOT = Path(__file__).resolve().parents[1]
PROJECT_PACKAGES = ("cr2", "cr2_tasks", "cr2_flows", "cr2_warehouse", "cr2_cli")  # setup.py: their folders
DATA_SUFFIXES = (".sql", ".yaml", ".yml", ".json")
_PKG = "(?:%s)(?:\\.[A-Za-z_]\\w*)+" % "|".join(PROJECT_PACKAGES)
_MODULE_STRING = re.compile(rf"{_PKG}(?::[A-Za-z_]\w*)?")  # a whole string constant naming a module (registries)
_MODULE_TARGET = re.compile(rf"\b({_PKG}):[A-Za-z_]\w*")  # 'module:Class' inside a data file


@functools.cache
def package_folder(package: str) -> str:
    """The repository folder a top-level project package is installed from (setup.py maps cr2_tasks → tasks/, …)."""
    spec = importlib.util.find_spec(package)
    return Path(next(iter(spec.submodule_search_locations))).name


def _module_file(name: str, root: Path) -> Path | None:
    """The source file of project module `name` under `root`, or None when it is not one."""
    top, *rest = name.split(".")
    if top not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(package_folder(top), *rest)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _package_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    parts[0] = {package_folder(p): p for p in PROJECT_PACKAGES}.get(parts[0], parts[0])
    return ".".join(parts[:-1] if parts[-1] != "__init__" else parts[:-1])


def _imported_names(path: Path, root: Path) -> set[str]:
    """Project module names a source file can execute: every import (module level or inside functions,
    relative ones resolved) and every 'package.module[:Class]' string it names (lazy registries)."""
    st = path.stat()
    return set(_parsed_names(path, root, st.st_mtime_ns, st.st_size))


@functools.lru_cache(maxsize=4096)
def _parsed_names(path: Path, root: Path, mtime_ns: int, size: int) -> frozenset[str]:
    """_imported_names of one version of a file (parsed once per process while it is unchanged; a project file's
    from the imports memo when its content was parsed before, by any process)."""
    source = path.read_bytes()
    package = _package_of(path, root)
    if root != PROJECT_ROOT:
        return _scan_names(source, path, package)
    memo = _imports_memo()
    key = f"{hashlib.sha256(source).hexdigest()}:{package}"
    if key not in memo["names"]:
        memo["names"][key] = sorted(_scan_names(source, path, package))
        memo["grew"] = True
    memo["used"].add(key)
    return frozenset(memo["names"][key])


# The names each project file imports, by its content and package: parsing the ≈ 190 files a stage's closure reaches
# costs ≈ 0.3 s of CPU in every process that computes a key, so they are kept beside the bytecode (derived data, like
# a .pyc: content-keyed, so an entry is never stale), read once per process and written back when it grew.
IMPORTS_MEMO = Path(importlib.util.cache_from_source(__file__)).parent / "cr2-code-imports.json"
IMPORTS_MEMO_KEEP = 4000  # entries kept beyond the ones this process used (older versions of edited files)


@functools.lru_cache(maxsize=1)
def _imports_memo() -> dict:
    try:
        names = json.loads(IMPORTS_MEMO.read_text(encoding="utf-8"))
        names = names if isinstance(names, dict) else {}
    except (OSError, ValueError):
        names = {}
    return {"names": names, "used": set(), "grew": False}


def _save_imports_memo() -> None:
    """Write the memo back when this process parsed a file it did not hold (atomically; where the folder is not
    writable, the next process parses again)."""
    memo = _imports_memo()
    if not memo["grew"]:
        return
    names = memo["names"]
    others = [k for k in names if k not in memo["used"]][-IMPORTS_MEMO_KEEP:]
    kept = {k: names[k] for k in (*others, *memo["used"]) if k in names}
    try:
        atomic_write(IMPORTS_MEMO, json.dumps(kept))
    except (OSError, DiskFullError):  # a read-only install or a full disk: the next process parses again
        return
    memo["grew"] = False


def _scan_names(source: bytes, path: Path, package: str) -> frozenset[str]:
    tree = ast.parse(source.decode("utf-8"), filename=str(path))
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


def _data_files(directory: Path, root: Path) -> tuple[Path, ...]:
    """SQL/YAML/JSON files beside a module and in its data sub-folders (folders that are not packages); for the
    installed tree listed once per folder and process, as its code hash is computed once per process."""
    return _project_data_files(directory) if root == PROJECT_ROOT else _list_data_files(directory)


@functools.lru_cache(maxsize=None)
def _project_data_files(directory: Path) -> tuple[Path, ...]:
    return _list_data_files(directory)


def _list_data_files(directory: Path) -> tuple[Path, ...]:
    files = [p for p in directory.iterdir() if p.suffix in DATA_SUFFIXES and p.is_file()]
    for sub in directory.iterdir():
        if sub.is_dir() and not (sub / "__init__.py").exists() and sub.name != "__pycache__":
            files += [p for p in sub.rglob("*") if p.suffix in DATA_SUFFIXES and p.is_file()]
    return tuple(files)


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
        for data in _data_files(path.parent, root):
            if data not in files:
                files.add(data)
                found.update(_MODULE_TARGET.findall(data.read_text(encoding="utf-8", errors="replace")))
        for mod in found:
            todo.extend(n for n in _with_parents(mod.split(":")[0]) if n not in seen_mod)
    if root == PROJECT_ROOT:
        _save_imports_memo()
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
    return content_fingerprint(arrays={str(path.relative_to(root)): bytes_array(path.read_bytes()) for path in paths})


def catalogue_paths(config: Any) -> list[Path]:
    """A config's extra router catalogue files and the module files their entries name."""
    paths = []
    for cat in config.baselines.catalogues:
        paths.append(Path(cat))
        if Path(cat).is_file():
            from cr2.core.boundary import load_yaml_file

            for spec in (load_yaml_file(cat) or {}).values():  # bounded, as the router registry reads it
                module = str((spec or {}).get("class", "")).partition(":")[0]
                if module.endswith(".py"):
                    paths.append(Path(module) if Path(module).is_absolute() else Path(cat).parent / module)
    return paths


def task_code_hash(task_or_fn: Any) -> str:
    """code_hash of the module that defines a task (its import closure), found from the task itself."""
    fn = getattr(task_or_fn, "fn", task_or_fn)
    return code_hash(fn.__module__)


def file_hash(*paths: Path) -> str:
    """Content hash of files (missing files hash as 'missing', so they surface as errors in the task)."""
    named = [(Path(p).name, Path(p).read_bytes() if Path(p).is_file() else b"missing") for p in paths]
    return content_fingerprint([name for name, _ in named],
                               arrays={f"{i}": bytes_array(data) for i, (_, data) in enumerate(named)})


def results_dir(home: Path) -> Path:
    d = Path(home) / "prefect-results"
    d.mkdir(parents=True, exist_ok=True)
    return d


@dataclass(frozen=True)
class Rows:
    """Rows of one warehouse table a stage reads: the rows whose columns equal `where(config, *args)`'s values
    (all rows when None; *args are the stage's upstream arguments), over `columns` (all when None); only under
    configs where `when(config)` holds, if given."""

    table: str
    where: Callable[..., dict[str, Any]] | None = None
    columns: tuple[str, ...] | None = None
    when: Callable[[Any], bool] | None = None  # read only under configs where this holds

    @property
    def tables(self) -> frozenset[str]:
        return frozenset({self.table})

    def fingerprint(self, config: Any, wh: Any, *args: Any) -> str:
        if self.when is not None and not self.when(config):
            return f"{self.table}:-"
        where = self.where(config, *args) if self.where is not None else None
        return f"{self.table}:{wh.table_fingerprint(self.table, where, columns=self.columns)}"


@dataclass(frozen=True)
class RoutingRows:
    """The rows of the routing view (warehouse/queries/routing_rows.sql) of the config's states, labels, split
    seed and encoder, for `splits`: what the model-fitting stages read."""

    splits: tuple[str, ...] | None = None
    tables: frozenset[str] = frozenset({"states", "costs", "labels", "models", "queries", "splits", "embeddings"})

    def fingerprint(self, config: Any, wh: Any, *args: Any) -> str:
        from cr2_warehouse.routing_data import SPLITS, routing_fingerprint

        return routing_fingerprint(wh, **routing_args(config), splits=self.splits or SPLITS)


def routing_args(config: Any) -> dict:
    """The routing view's parameters under a config: state distribution, label source, split seed, encoder."""
    return {"dist_id": config.channel.distribution.dist_id, "label_source": config.labels.source,
            "seed": int(config.splits.seed), "encoder": config.embedding.store_name}


ROUTING_CONFIG = ("channel.distribution", "labels.source", "splits.seed", "embedding.encoder", "embedding.backend")  # routing_args


def _mondrian_by_query_attribute(config: Any) -> bool:
    return config.calibration.group not in (None, "benchmark")


# the query attribute a Mondrian table groups by (not a column of the routing rows): read when one is configured
GROUP_ROWS = Rows("queries", columns=("query_id", "benchmark", "subset"), when=_mondrian_by_query_attribute)


@dataclass(frozen=True)
class Reads:
    """Everything a stage's task reads (module docstring).

    config:   dotted config paths ("splits.seed"; "channel" for a whole section);
    rows:     Rows / RoutingRows;
    files:    files(config) -> paths of the files it reads;
    derived:  derived(config) -> key parts of what a declared field names and the task loads (a pool config file);
    upstream: tables it reads only at the rows its upstream results name (artefacts by fingerprint, a
              threshold-table version, an evaluation run), which those results' fingerprints key;
    writes:   tables it writes and may read back (an incremental stage: only what is new);
    env:      environment variables that change its results (training threads).
    """

    config: tuple[str, ...] = ()
    rows: tuple[Rows | RoutingRows, ...] = ()
    files: Callable[[Any], Iterable[Path]] | None = None
    derived: Callable[[Any], Iterable[Any]] | None = None
    upstream: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    env: tuple[str, ...] = ()

    @property
    def tables(self) -> frozenset[str]:
        """Every table it may read."""
        out = set(self.upstream) | set(self.writes) | {"meta"}  # meta: the epoch, the schema version
        for r in self.rows:
            out |= r.tables
        return frozenset(out)

    @property
    def in_warehouse(self) -> bool:
        """Whether the task reads or writes warehouse tables: then its results belong to one warehouse (the key
        carries its epoch) and its key reads the declared rows' fingerprints there."""
        return bool(self.rows or self.upstream or self.writes)

    def config_hash(self, config: Any) -> str:
        """Hash of the config values it reads (what evaluation runs record as their config)."""
        return config_digest(config, self.config)

    def key_parts(self, config: Any, home: str | Path, *args: Any) -> tuple[list[str], str]:
        """(the key parts of what it reads under (config, *args), the warehouse epoch): the values and content
        fingerprints of its declarations. The one place a key opens the warehouse, and only when it reads or
        writes warehouse tables (`in_warehouse`); otherwise the epoch is '' (its upstream results carry theirs)."""
        if not self.in_warehouse:
            return self._parts(config, None, *args), ""
        from cr2_warehouse.db import Warehouse
        from cr2_warehouse.repository import warehouse_epoch

        with Warehouse(home) as wh:
            return self._parts(config, wh, *args), warehouse_epoch(wh)

    def _parts(self, config: Any, wh: Any, *args: Any) -> list[str]:
        parts = [self.config_hash(config)] + [r.fingerprint(config, wh, *args) for r in self.rows]
        if self.files is not None:
            parts.append(file_hash(*self.files(config)))
        if self.derived is not None:
            parts += [str(p) for p in self.derived(config)]
        parts += [f"{name}={os.environ.get(name, '')}" for name in self.env]
        return parts


FIT_FIELDS = ("query_id", "benchmark", "model_ids", "embedding", "correct")  # what every fit can read of its rows
COST_FIELDS = ("cost", "cost_est", "distance_m")  # the channel-dependent row fields (they change with the states)


@dataclass(frozen=True)
class Artefact:
    """A fitted artefact kept in the store between runs (tasks/store.py), its inputs declared like a stage's.

    kind:   the store kind of its records ('teacher-fit', 'router-fit', 'ablation-gate-fit');
    reads:  the config paths, files and environment it reads (a `Reads` without warehouse rows: an artefact is
            fitted on routing sets already in memory);
    fields: the row fields of its training sets it can read (cr2.core.hashing.fingerprint_rows: FIT_FIELDS, and
            COST_FIELDS for one that reads costs);
    code:   the modules whose code closure keys it.

    Its key (`key`) is computed by the code that computes a stage's: the declared reads' parts (Reads), the rows'
    fingerprint over the declared fields, the code hash and the given parts (fingerprints of the fitted state it
    starts from, a variant's name), keyed by cr2_tasks.store.cache_key. A field outside the declaration cannot change it.
    """

    kind: str
    reads: Reads
    fields: tuple[str, ...]
    code: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.reads.in_warehouse:
            raise ValueError(f"artefact {self.kind} declares warehouse reads; it is fitted on routing sets in memory")

    def key(self, config: Any, sets: Iterable[Any], *given: Any) -> str:
        """The store key of fitting it under `config` on `sets` (train, dev, …) from `given` parts."""
        from cr2.core.hashing import fingerprint_rows

        parts = self.reads._parts(config, None)
        return cache_key(self.kind, *parts, fingerprint_rows(*sets, fields=self.fields), code_hash(*self.code), *given)


@dataclass(frozen=True)
class Stage:
    """One cached pipeline stage.

    task:     the Prefect task, called as task(config, home, *inputs);
    reads:    what the task reads (Reads): its key covers exactly that;
    upstream: upstream(*inputs) -> key parts of its upstream results (their content fingerprints), or None;
    code:     the modules whose code closure keys it (default: the task's own module);
    outputs:  the files a result points at, outputs(home, result) -> paths; a cached result with one of them
              missing (deleted since) is recomputed.
    """

    task: Task
    reads: Reads = field(default_factory=Reads)
    upstream: Callable[..., Iterable[Any]] | None = None
    code: tuple[str, ...] | None = None
    outputs: Callable[[Path, dict], Iterable[str | Path]] | None = None

    @property
    def name(self) -> str:
        return self.task.name

    def key(self, config: Any, home: str | Path, *inputs: Any, **kw: Any) -> str:
        """The cache key of running the task on (config, home, *inputs): the declared reads' values and
        fingerprints and the warehouse epoch (Reads.key_parts), the upstream results' fingerprints and the code hash."""
        inputs = inputs + tuple(kw.values())
        code = code_hash(*self.code) if self.code else task_code_hash(self.task)
        parts, epoch = self.reads.key_parts(config, home, *inputs)
        if self.upstream is not None:
            parts += [str(p) for p in self.upstream(*inputs)]
        return cache_key(self.name, *parts, code, epoch)

    def _cache_key(self, context: Any, parameters: dict[str, Any]) -> str:
        return self.key(**parameters)

    def bound(self, home: str | Path) -> Task:
        """The task with this stage's key and its persisted-result cache under <home>/prefect-results."""
        return self.task.with_options(cache_key_fn=self._cache_key, persist_result=True,
                                      result_storage=results_dir(Path(home)))


class UndeclaredReadError(AssertionError):
    """A stage read a config field or a warehouse table its Reads do not declare."""


@dataclass(frozen=True)
class ReadCheck:
    """What one tracked run of a stage read, and which of it its Reads do not declare."""

    stage: str
    result: Any
    config: frozenset[str]  # config paths read (the task body, its key, its file list)
    tables: frozenset[str]  # warehouse tables read
    undeclared_config: tuple[str, ...]
    undeclared_tables: tuple[str, ...]

    def verify(self) -> Any:
        """The result, or UndeclaredReadError naming every read outside the declaration."""
        if self.undeclared_config or self.undeclared_tables:
            raise UndeclaredReadError(f"stage {self.stage} read undeclared config fields {list(self.undeclared_config)} "
                                      f"and tables {list(self.undeclared_tables)}; declare them in its Reads")
        return self.result


def tracked_run(stage: Stage, config: Any, home: str | Path, *inputs: Any) -> ReadCheck:
    """Run the stage's task body (no Prefect, no cache) and its key on a read-tracking view of the config
    (cr2.config.reads.TrackedConfig) and of the warehouse (cr2_warehouse.db.recording_reads); `.verify()` on the returned
    check fails on any read outside the stage's Reads."""
    from cr2_warehouse.db import recording_reads

    tracked = TrackedConfig(config)
    with recording_reads() as tables:
        result = stage.task.fn(tracked, str(home), *inputs)
        stage.key(tracked, home, *inputs)
    return ReadCheck(stage.name, result, frozenset(tracked.reads), frozenset(tables),
                     tuple(undeclared(tracked.reads, stage.reads.config)), tuple(sorted(tables - stage.reads.tables)))


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


def stage_key(stage: Stage, *args: Any, **kwargs: Any) -> str:
    """Inside a stage's task: the cache key Prefect computed for this run (the transaction's). Called outside a
    Prefect task run (a test calling task.fn) or when Prefect could not compute it, the key is computed here
    from the same arguments (errors surface)."""
    from prefect.transactions import get_transaction

    txn = get_transaction()
    if txn is not None and txn.key:
        return str(txn.key)
    return stage.key(*args, **kwargs)
