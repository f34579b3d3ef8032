"""What the repository's text cites exists: file paths, dotted module names, and no "issue N" history.

Scanned: every tracked text file — the whole text of docs, configs, README, prefect.yaml, the Makefile, SQL,
shell scripts and result files; in Python files the comments and string literals (paths) and the comments and
docstrings (dotted names: code has variables such as `cr2.fit`, and result files (JSON) keys such as
`evaluate: cr2.exponent`, that only look like module names).

(a) A path starting with one of the repository's folders (cr2/, cr2_cli/, tasks/, flows/, warehouse/, configs/, docs/,
    tests/, benchmarks/, scripts/, data/, .ci/) names a file or folder that exists. A path that ends in a known suffix
    is a file; one that ends in "/" a folder; one without a suffix a module or folder (`tasks/prepare`: tasks/prepare.py);
    `tasks/inputs.remember_scores` a module and one of its names. Placeholders (a segment that is all capitals such as
    NAME — README.md and the like excepted —, starts with my- or my_, or holds <…>, {…} or *) stand for a file the
    reader picks and are not checked; nor are the exemptions below, each listed with its reason.
(b) No "issue N" reference outside docs/results.md: text states the design or the fact, not its history.
(c) A dotted name starting with cr2., cr2_cli., tasks., flows. or warehouse. resolves statically: its longest
    module prefix is a module of the repository, the next name is defined (or imported) at that module's top level,
    and for a class the name after that is a member. Nothing is imported, so the test stays fast and pure.

The scanner is checked against planted stale references at the end.
"""
from __future__ import annotations

import ast
import functools
import io
import re
import subprocess
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

FOLDERS = ("cr2_cli", "cr2", "tasks", "flows", "warehouse", "configs", "docs", "tests", "benchmarks", "scripts",
           "data", ".ci")
PACKAGES = ("cr2_cli", "cr2", "cr2_tasks", "cr2_flows", "cr2_warehouse")  # import names (setup.py)
FILE_SUFFIXES = frozenset({"py", "yaml", "yml", "md", "sql", "json", "jsonl", "csv", "sh", "toml", "txt", "html",
                           "parquet", "png", "svg", "log", "npz", "cfg", "ini", "onnx", "duckdb", "whl", "lock", "pt",
                           "pkl", "gz", "tar", "tmp"})
DATA_SUFFIXES = frozenset({"parquet", "jsonl", "csv"})  # benchmark configs' `file:` entries are relative to data/
BINARY_SUFFIXES = (".parquet", ".png", ".onnx", ".npz", ".duckdb", ".whl", ".pt", ".pkl", ".gz")

PATH_RE = re.compile(r"(?<![\w./<{$~@-])((?:%s)/[\w.\-/*<>{}…]*)" % "|".join(re.escape(f) for f in FOLDERS))
DOTTED_RE = re.compile(r"(?<![\w./-])((?:%s)(?:\.[A-Za-z_]\w*)+)" % "|".join(PACKAGES))
ISSUE_RE = re.compile(r"issue[s]? ?#?[0-9]+", re.IGNORECASE)  # the `git grep -i -E` the convention is checked with

# Files a command writes (not tracked), each with the command that writes it.
OUTPUTS = {
    "benchmarks/results/gpu_smoke.json": "written by scripts/gpu_smoke.py on a machine with a GPU",
}
# (citing file, reference) pairs that name another project's files or the reader's own, each with the reason.
ELSEWHERE = {
    ("tests/labeling/test_taskdefs.py", "tasks/mbpp/utils.py"): "lm-eval's MBPP task folder, not this repository's",
    ("docs/STYLE.md", "tests/testdata/"): "lm-evaluation-harness's golden tables, cited as an example",
    ("data/README.md", "data/mbpp.jsonl"): "the file's path inside the OckBench dataset the MBPP rows come from",
    ("docs/your_pool.md", "benchmarks/toy_qa.parquet"): "the example data file the guide has the reader write",
    ("cr2/labels/lmeval/taskdefs.py", "tasks/bbh/zeroshot/_zeroshot_template_yaml"): "a file of lm-eval's BBH tasks",
    ("tests/test_import_layers.py", "cr2/upward.py"): "a module the contract test plants in a copy of the tree",
    ("tests/test_import_layers.py", "cr2_cli/resultsdoc/flowish.py"): "a module the contract test plants in a copy",
}
# (file, reference) pairs in files whose bytes are hashed into a stored identity, so that editing even a comment
# changes it: the pre-registered pool rule's hash is part of the pool study id (flows/pools.py, study_id_of), and
# a new id means `cr2 study pools` no longer resumes the stored sweep. The rule's code is cr2/studies/pools.py.
# Likewise the router study's pre-registration: its content hash is part of the router study id
# (flows/router_study.py, study_id); FLOP counting lives in cr2/method/complexity.py.
FROZEN = {
    ("configs/pools/mmlu-pro.yaml", "cr2/pools.py"),
    ("configs/studies/router-study.yaml", "cr2.core.complexity"),
    ("configs/pools/mmlu-pro.yaml", "issue " "27"),  # split, so that this file holds no issue reference itself
}
# Dotted names that are not Python names, each with what they are.
NOT_MODULES = {
    "cr2.format": "ONNX metadata key of the device export (cr2/deploy/export.py)",
    "cr2.gate_fingerprint": "ONNX metadata key of the device export (cr2/deploy/export.py)",
}
# TEMPORARY: files whose references are being fixed in parallel work; empty this set once that work lands.
TEMPORARY_SKIP: set[str] = set()  # files a scan skips while they are edited elsewhere (none now)
ISSUE_EXEMPT = {"docs/results.md"}  # the results page is rendered by cr2_cli/resultsdoc and keeps its own record
SELF = "tests/test_references.py"  # this file names the exempt and the planted references on purpose


# ---------------------------------------------------------------- the text of a file
def fragments(rel: str, text: str) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Return (for the path check, for the dotted-name check): lists of (first line, text) pieces of one file."""
    if not rel.endswith(".py"):
        whole = [(1, text)]
        return whole, ([] if rel.endswith(".json") else whole)
    middle = getattr(tokenize, "FSTRING_MIDDLE", None)  # Python ≥ 3.12 splits an f-string into pieces
    paths, prose = [], []
    statement_start = True  # a string that starts a statement is a docstring (or an attribute's)
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            paths.append((tok.start[0], tok.string))
            prose.append((tok.start[0], tok.string))
        elif tok.type in (tokenize.STRING, middle):
            paths.append((tok.start[0], tok.string))
            if statement_start and tok.type == tokenize.STRING:
                prose.append((tok.start[0], tok.string))
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            statement_start = tok.type in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)
    return paths, prose


def _matches(pieces: list[tuple[int, str]], rx: re.Pattern) -> list[tuple[int, str]]:
    return [(line + piece.count("\n", 0, m.start()), m.group(1) if rx.groups else m.group(0))
            for line, piece in pieces for m in rx.finditer(piece)]


# ---------------------------------------------------------------- dotted names
def _module_file(parts: list[str], root: Path) -> Path | None:
    from cr2_tasks.common import package_folder

    base = root.joinpath(package_folder(parts[0]) if parts[0] in PACKAGES else parts[0], *parts[1:])
    for f in (base / "__init__.py", base.with_name(base.name + ".py")):
        if f.is_file():
            return f
    return None


@functools.lru_cache(maxsize=None)
def _top_names(path: Path) -> tuple[dict[str, ast.AST | None], bool]:
    """Return (name → its ClassDef, or None for any other binding) at a module's top level, and whether the
    module has a __getattr__ (then any name may exist)."""
    names: dict[str, ast.AST | None] = {}

    def bind(stmts: list[ast.stmt]) -> None:
        for node in stmts:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names[node.name] = None
            elif isinstance(node, ast.ClassDef):
                names[node.name] = node
            elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                    names.update({n.id: None for n in ast.walk(target) if isinstance(n, ast.Name)})
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update({(a.asname or a.name).split(".")[0]: None for a in node.names})
            elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):
                for block in ("body", "orelse", "finalbody"):
                    bind(getattr(node, block, []))
                for handler in getattr(node, "handlers", []):
                    bind(handler.body)

    bind(ast.parse(path.read_text(encoding="utf-8")).body)
    return names, "__getattr__" in names


def _class_members(cls: ast.ClassDef) -> tuple[set[str], bool]:
    """Return the names a class defines (methods, class attributes, fields, self.<name> assignments) and whether
    they are open-ended (a base class other than object, or a __getattr__)."""
    members = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            members.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            members.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            members.add(node.attr)
    bases = [b for b in cls.bases if not (isinstance(b, ast.Name) and b.id in {"object", "Protocol", "Exception"})]
    return members, bool(bases) or "__getattr__" in members


def dotted_problem(dotted: str, root: Path = REPO) -> str | None:
    """Return why a dotted name does not resolve in the repository at `root`, or None when it does."""
    parts = dotted.split(".")
    if parts[-1] in FILE_SUFFIXES or dotted in NOT_MODULES:
        return None  # a file name such as tasks.py, or a key that only looks like a module path
    for i in range(len(parts), 0, -1):
        module = _module_file(parts[:i], root)
        if module is not None:
            break
    else:
        return "no such module"
    rest = parts[i:]
    if not rest:
        return None
    names, open_ended = _top_names(module)
    if rest[0] not in names:
        return None if open_ended else f"{'.'.join(parts[:i])} has no {rest[0]}"
    cls = names[rest[0]]
    if len(rest) > 1 and isinstance(cls, ast.ClassDef):
        members, open_ended = _class_members(cls)
        if rest[1] not in members and not open_ended:
            return f"{'.'.join(parts[:i + 1])} has no {rest[1]}"
    return None


# ---------------------------------------------------------------- paths
def _placeholder(segment: str) -> bool:
    """Whether a path segment stands for a name the reader picks (NAME.yaml, my-far.yaml, <name>.sql, {name}, *)."""
    stem, _, suffix = segment.partition(".")
    capitals = len(stem) > 1 and stem.isupper() and suffix != "md"  # README.md, STYLE.md: real files by convention
    return any(c in segment for c in "<>{}*…") or "..." in segment or segment.startswith(("my-", "my_")) or capitals


def path_problem(ref: str, cited_in: str, root: Path = REPO) -> str | None:
    """Return why a path reference is stale, or None when it names something that exists (or is exempt)."""
    if ref in OUTPUTS or (cited_in, ref) in ELSEWHERE or any(_placeholder(s) for s in ref.split("/")):
        return None
    target = root / ref
    if ref.endswith("/"):
        return None if target.is_dir() else "no such folder"
    last = ref.rsplit("/", 1)[-1]
    stem, dot, suffix = last.rpartition(".")
    if target.exists():
        return None
    if dot and suffix in FILE_SUFFIXES:
        if suffix in DATA_SUFFIXES and (root / "data" / ref).is_file():
            return None
        return "no such file"
    if dot:  # a module and one of its names: tasks/inputs.remember_scores
        module = target.with_name(stem + ".py")
        if module.is_file():
            return dotted_problem(".".join(Path(ref).with_name(stem).parts + (suffix,)), root)
        return "no such module"
    return None if target.with_name(last + ".py").is_file() else "no such file, module or folder"


# ---------------------------------------------------------------- the scan
def _stale(rel: str, paths: list[tuple[int, str]], prose: list[tuple[int, str]], root: Path) -> list[str]:
    refs = [(line, ref.rstrip(".")) for line, ref in _matches(paths, PATH_RE)]  # a sentence's full stop is not in it
    found = [f"{rel}:{line}: {ref} ({why})" for line, ref in refs
             if (rel, ref) not in FROZEN and (why := path_problem(ref, rel, root))]
    return found + [f"{rel}:{line}: {name} ({why})" for line, name in _matches(prose, DOTTED_RE)
                    if (rel, name) not in FROZEN and (why := dotted_problem(name, root))]


def scan(rel: str, text: str, root: Path = REPO) -> list[str]:
    """Return one line per stale reference in the text of `rel`: "rel:line: reference (why)"."""
    whole = [(1, text)]
    # a Python file is split into comments and strings only when its whole text cites something stale (the pieces'
    # references are a subset of the whole text's), which spares tokenizing the rest
    found = _stale(rel, whole, whole, root)
    if found and rel.endswith(".py"):
        found = _stale(rel, *fragments(rel, text), root)
    elif rel.endswith(".json"):
        found = _stale(rel, whole, [], root)
    if rel not in ISSUE_EXEMPT:
        found += [f"{rel}:{line}: '{hit}' (an issue reference; state the design or the fact)"
                  for line, hit in _matches(whole, ISSUE_RE) if (rel, hit) not in FROZEN]
    return found


def tracked_text_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [rel for rel in out.splitlines() if not rel.endswith(BINARY_SUFFIXES) and (REPO / rel).is_file()]


def test_every_reference_names_something_that_exists():
    stale = []
    for rel in tracked_text_files():
        if rel in TEMPORARY_SKIP or rel == SELF:
            continue
        stale += scan(rel, (REPO / rel).read_text(encoding="utf-8"))
    assert not stale, "stale references (fix them, or exempt them above with the reason):\n" + "\n".join(stale)


def test_exemptions_are_still_needed():
    """Every exemption names a reference still cited and still missing, so the lists do not outlive their reason."""
    assert Path(__file__).resolve() == REPO / SELF
    assert all(not (REPO / p).exists() for p in OUTPUTS)
    for (cited_in, ref), why in ELSEWHERE.items():
        assert ref in (REPO / cited_in).read_text(encoding="utf-8"), f"{cited_in} no longer cites {ref} ({why})"
        assert not (REPO / ref).exists(), f"{ref} exists now; drop its exemption"
    for cited_in, ref in FROZEN:
        assert ref in (REPO / cited_in).read_text(encoding="utf-8"), f"{cited_in} no longer cites {ref}: unfreeze it"
    for rel in TEMPORARY_SKIP:
        assert (REPO / rel).is_file(), f"{rel} is gone; drop it from TEMPORARY_SKIP"


# ---------------------------------------------------------------- the scanner finds planted stale references
MISSING_FILE = "cr2/no_such_module.py"
MISSING_NAME = "cr2.crc.no_such_rule"
ISSUE = "iss" "ue 12"  # split, so that `git grep` for issue references does not find this file


def test_a_planted_stale_reference_is_reported(tmp_path):
    doc = tmp_path / "docs" / "planted.md"
    doc.parent.mkdir()
    doc.write_text(f"Thresholds: cr2/crc/rules.py and cr2.crc.rules.calibrate_threshold.\n"
                   f"Stale: {MISSING_FILE}, {MISSING_NAME}, see {ISSUE}.\n", encoding="utf-8")
    found = scan("docs/planted.md", doc.read_text(encoding="utf-8"))
    assert found == [f"docs/planted.md:2: {MISSING_FILE} (no such file)",
                     f"docs/planted.md:2: {MISSING_NAME} (cr2.crc has no no_such_rule)",
                     f"docs/planted.md:2: '{ISSUE}' (an issue reference; state the design or the fact)"]


def test_python_comments_and_docstrings_are_scanned_but_code_names_are_not(tmp_path):
    code = (f'"""Uses {MISSING_NAME}."""\n'
            f"cr2 = object()  # the rule lives in {MISSING_FILE}\n"
            f"cr2.fit_  # a variable named cr2, not the package\n"
            f'HELP = "see configs/states/ and {MISSING_FILE[:-3]}/"\n')
    found = scan("scripts/planted.py", code)
    assert found == [f"scripts/planted.py:2: {MISSING_FILE} (no such file)",
                     f"scripts/planted.py:4: {MISSING_FILE[:-3]}/ (no such folder)",
                     f"scripts/planted.py:1: {MISSING_NAME} (cr2.crc has no no_such_rule)"]


@pytest.mark.parametrize("ref, why", [
    ("cr2/crc/", None),
    ("cr2/crc/registry.py", None),
    ("cr2/crc/catalogue.py", "no such file"),
    ("tasks/prepare", None),
    ("cr2/fixed_accuracy", "no such file, module or folder"),
    ("tasks/inputs.remember_scores", None),
    ("tasks/inputs.no_such_function", "tasks.inputs has no no_such_function"),
    ("configs/states/NAME.yaml", None),
    ("configs/my-far.yaml", None),
    ("scripts/README.md", None),
    ("docs/NO_SUCH.md", "no such file"),
    ("configs/datasets/<name>.yaml", None),
    ("benchmarks/gpqa.parquet", None),  # a benchmark config's file entry, relative to data/
    ("benchmarks/results/gpu_smoke.json", None),
])
def test_path_rules(ref, why):
    assert path_problem(ref, "docs/x.md") == why


@pytest.mark.parametrize("name, why", [
    ("cr2.crc", None),
    ("cr2.crc.rules.calibrate_threshold", None),
    ("cr2.crc.ThresholdTable.from_records", None),
    ("cr2.crc.table.ThresholdTable.no_such_method", "cr2.crc.table.ThresholdTable has no no_such_method"),
    ("cr2.crc.catalogue", "cr2.crc has no catalogue"),
    ("cr2.pools", "cr2 has no pools"),
    ("tasks.py", None),  # a file name
])
def test_dotted_rules(name, why):
    assert dotted_problem(name) == why
