"""Cache keys cannot go stale: a task's code hash covers every project file it can execute, found from its
imports (cr2_tasks.common.code_closure), so an edit to a transitive dependency changes the key the task is
cached under (and the task re-runs), while an edit to code it cannot reach keeps the cache.

Each case edits a file in a temporary copy of the project and recomputes the key from that copy's sources.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("cr2", "tasks", "flows", "warehouse", "cr2_cli")
TASKS = ("cr2_tasks.evaluate:evaluate", "cr2_tasks.report:build_report", "cr2_tasks.train:train_cr2", "cr2_tasks.prepare:EMBED_CODE")


def _module_names() -> dict[str, tuple[str, ...]]:
    """The modules each key hashes: a task's defining module, or the module names a *_CODE constant lists."""
    import importlib

    out = {}
    for spec in TASKS:
        module, name = spec.split(":")
        obj = getattr(importlib.import_module(module), name)
        out[spec] = (obj,) if isinstance(obj, str) else (getattr(obj, "fn", obj).__module__,)
    return out


@pytest.fixture(scope="module")
def project_copy(tmp_path_factory) -> Path:
    dst = tmp_path_factory.mktemp("project")
    for pkg in PACKAGES:
        shutil.copytree(ROOT / pkg, dst / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def _keys(root: Path) -> dict[str, str]:
    from cr2_tasks.common import code_hash

    return {spec: code_hash(*mods, root=root) for spec, mods in _module_names().items()}


def test_the_task_keys_use_these_hashes():
    from cr2_tasks.common import code_hash, task_code_hash
    from cr2_tasks.evaluate import evaluate

    assert task_code_hash(evaluate) == code_hash("cr2_tasks.evaluate") == _keys(ROOT)["cr2_tasks.evaluate:evaluate"]


def _edited(root: Path, rel: str, keys_before: dict[str, str]) -> dict[str, bool]:
    path = root / rel
    original = path.read_text()
    try:
        path.write_text(original + ("\n-- edited\n" if rel.endswith(".sql") else "\n# edited\n"))
        after = _keys(root)
    finally:
        path.write_text(original)
    return {t: after[t] != keys_before[t] for t in TASKS}
@pytest.fixture(scope="module")
def before(project_copy) -> dict[str, str]:
    return _keys(project_copy)


def test_the_copy_hashes_like_the_repository(project_copy, before):
    assert _keys(ROOT) == before  # the key depends on file contents, not on where the tree lives


def test_editing_a_transitive_dependency_of_evaluate_reruns_it(project_copy, before):
    # cr2/routers/base.py holds the one-shot choice argmax p̂ − λc: evaluate reaches it only through
    # cr2.evaluation.sweep → cr2.routers.base (the hand-kept list of old missed it)
    changed = _edited(project_copy, "cr2/routers/base.py", before)
    assert changed["cr2_tasks.evaluate:evaluate"] and changed["cr2_tasks.train:train_cr2"]
    assert not changed["cr2_tasks.prepare:EMBED_CODE"]  # embeddings stay keyed by encoder + text


def test_editing_a_view_reruns_the_report(project_copy, before):
    changed = _edited(project_copy, "warehouse/views/v_fixed_accuracy.sql", before)
    assert changed["cr2_tasks.report:build_report"] and changed["cr2_tasks.evaluate:evaluate"]


def test_editing_a_catalogue_entry_reruns_evaluation(project_copy, before):
    changed = _edited(project_copy, "cr2/routers/catalogue.yaml", before)
    assert changed["cr2_tasks.evaluate:evaluate"]


def test_an_unrelated_edit_keeps_the_cache(project_copy, before):
    # the MBPP sandbox runs only when labeling: no routing stage can execute it
    changed = _edited(project_copy, "cr2/labels/lmeval/sandbox.py", before)
    assert not any(changed.values()), changed
    changed = _edited(project_copy, "cr2/system/cost.py", before)
    assert not changed["cr2_tasks.evaluate:evaluate"] and not changed["cr2_tasks.report:build_report"]


# the shared inputs of the model-fitting tasks live in tasks/inputs.py, not in the train task, so
# editing the train task re-runs training only; editing the shared inputs re-runs every task that reads them
DOWNSTREAM_OF_TRAINING = ("cr2_tasks.calibrate", "cr2_tasks.evaluate", "cr2_tasks.baselines", "cr2_tasks.ablation",
                          "cr2_tasks.intervals", "cr2_tasks.premise", "cr2_tasks.guarantees")


def _task_hashes(root: Path) -> dict[str, str]:
    from cr2_tasks.common import code_hash

    return {m: code_hash(m, root=root) for m in ("cr2_tasks.train", *DOWNSTREAM_OF_TRAINING)}


def _hashes_after_edit(root: Path, rel: str) -> dict[str, str]:
    path = root / rel
    original = path.read_text()
    try:
        path.write_text(original + "\n# edited\n")
        return _task_hashes(root)
    finally:
        path.write_text(original)


def test_editing_the_train_task_keeps_the_other_stages_caches(project_copy):
    before = _task_hashes(project_copy)
    after = _hashes_after_edit(project_copy, "tasks/train.py")
    assert after["cr2_tasks.train"] != before["cr2_tasks.train"]
    kept = [m for m in DOWNSTREAM_OF_TRAINING if after[m] == before[m]]
    assert kept == list(DOWNSTREAM_OF_TRAINING), f"re-run by an edit of tasks/train.py: {set(DOWNSTREAM_OF_TRAINING) - set(kept)}"


def test_editing_the_shared_task_inputs_reruns_every_stage_that_reads_them(project_copy):
    # the validity check (cr2_tasks.guarantees) loads the deployed router through cr2/deploy/deployment.py and
    # warehouse/deployment.py, not through the task inputs: an edit there re-runs it instead
    readers = ("cr2_tasks.train", *(m for m in DOWNSTREAM_OF_TRAINING if m != "cr2_tasks.guarantees"))
    before = _task_hashes(project_copy)
    after = _hashes_after_edit(project_copy, "tasks/inputs.py")
    assert all(after[m] != before[m] for m in readers), after
    assert after["cr2_tasks.guarantees"] == before["cr2_tasks.guarantees"]
    for rel in ("cr2/deploy/deployment.py", "warehouse/deployment.py"):
        assert _hashes_after_edit(project_copy, rel)["cr2_tasks.guarantees"] != before["cr2_tasks.guarantees"], rel


def test_the_imports_memo_answers_for_a_files_content_and_never_for_another(tmp_path, monkeypatch):
    """What each project file imports is kept by content (cr2_tasks.common.IMPORTS_MEMO): a process that finds a
    file's content there does not parse it, an edited file is parsed again, and a damaged memo is ignored."""
    import cr2_tasks.common as common

    memo = tmp_path / "pycache" / "cr2-code-imports.json"
    monkeypatch.setattr(common, "IMPORTS_MEMO", memo)
    target = common.PROJECT_ROOT / "tasks" / "calibrate.py"

    def fresh_process() -> None:
        common._imports_memo.cache_clear()
        common._parsed_names.cache_clear()

    fresh_process()
    parsed = common._imported_names(target, common.PROJECT_ROOT)
    assert "cr2_tasks.inputs" in parsed
    common.code_closure("cr2_tasks.calibrate")  # a closure writes back what it parsed
    assert memo.is_file()

    fresh_process()
    monkeypatch.setattr(common, "_scan_names", lambda *a: pytest.fail("parsed although its content is in the memo"))
    assert common._imported_names(target, common.PROJECT_ROOT) == parsed
    monkeypatch.undo()
    monkeypatch.setattr(common, "IMPORTS_MEMO", memo)

    edited = tmp_path / "project"  # the same file, edited: another content, so parsed again
    shutil.copytree(common.PROJECT_ROOT / "tasks", edited / "tasks", ignore=shutil.ignore_patterns("__pycache__"))
    copy = edited / "tasks" / "calibrate.py"
    copy.write_text(copy.read_text() + "\nfrom cr2.report import cells  # an edit\n")
    monkeypatch.setattr(common, "PROJECT_ROOT", edited)
    fresh_process()
    assert common._imported_names(copy, edited) == parsed | {"cr2.report", "cr2.report.cells"}

    memo.write_text("{not json")
    fresh_process()
    assert common._imported_names(copy, edited) == parsed | {"cr2.report", "cr2.report.cells"}
