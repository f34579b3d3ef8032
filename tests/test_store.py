"""The content-addressed store (tasks/store.py), its key function, the one atomic write (cr2/core/files.py) and the
row fingerprint (cr2.core.hashing.fingerprint_rows): a hit returns what was stored, a damaged entry is recomputed,
a failed write leaves the previous entry whole, and a row field changes a fingerprint exactly when it is declared."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from cr2.core.files import atomic_write, replace_dir, temp_dir_beside, temp_sibling
from cr2.core.hashing import FINGERPRINT_CHARS, ROW_FIELDS, fingerprint_rows
from cr2.evaluation.synthetic import make_routing_set
from cr2_tasks.store import CODECS, Codec, Store, cache_key


def _counting(value):
    calls = []

    def compute():
        calls.append(1)
        return value

    return compute, calls


@pytest.mark.parametrize("codec, value", [("npz", {"a": np.arange(5.0), "b": np.eye(2, dtype=np.float32)}),
                                          ("json", {"path": "cache/x.pt", "fingerprint": "ab", "n": [1, 2]})])
def test_a_value_is_computed_once_and_read_back_as_stored(tmp_path, codec, value):
    store = Store(tmp_path)
    compute, calls = _counting(value)
    first, hit = store.get_or_compute("kind-x", ("p", 1), compute, codec)
    again, hit_again = store.get_or_compute("kind-x", ("p", 1), compute, codec)
    assert (hit, hit_again, len(calls)) == (False, True, 1)
    for got in (first, again):
        assert got.keys() == value.keys()
        for k in value:
            np.testing.assert_array_equal(np.asarray(got[k]), np.asarray(value[k]))
    assert store.get_or_compute("kind-x", ("p", 2), compute, codec)[1] is False and len(calls) == 2  # other parts
    entry = store.path("kind-x", cache_key("kind-x", "p", 1), codec)
    assert entry.parent == tmp_path / "kind-x" and entry.suffix == CODECS[codec].suffix
    assert sorted(p.name for p in entry.parent.iterdir() if p.name.startswith(".")) == []  # no temporary file left


@pytest.mark.parametrize("damage", [b"", b"PK\x03\x04 not a whole archive", b"{\"half\": "])
def test_a_damaged_entry_is_recomputed_never_trusted(tmp_path, damage):
    store = Store(tmp_path)
    for codec, value in (("npz", {"a": np.arange(3)}), ("json", {"a": 1})):
        compute, calls = _counting(value)
        store.get_or_compute("k", ("x",), compute, codec)
        store.path("k", cache_key("k", "x"), codec).write_bytes(damage)
        got, hit = store.get_or_compute("k", ("x",), compute, codec)
        assert not hit and len(calls) == 2
        assert store.get_or_compute("k", ("x",), compute, codec)[1]  # rewritten whole
    store.path("k", cache_key("k", "y"), "json").write_text("[1, 2]")  # readable, but not a record
    assert store.get("k", cache_key("k", "y"), "json") is None


def test_an_entry_the_reader_rejects_is_recomputed_and_replaced(tmp_path):
    store = Store(tmp_path)
    store.get_or_compute("k", ("x",), lambda: {"n": np.int64(3)}, "npz")
    got, hit = store.get_or_compute("k", ("x",), lambda: {"n": np.int64(9)}, "npz", accept=lambda v: int(v["n"]) >= 5)
    assert not hit and int(got["n"]) == 9
    assert int(store.get("k", cache_key("k", "x"), "npz")["n"]) == 9


def test_a_write_that_fails_midway_leaves_the_previous_entry_whole_and_no_temporary_file(tmp_path):
    store = Store(tmp_path)
    store.put("k", "k-1", {"a": 1}, "json")

    def half_then_fail(value, path):
        path.write_text('{"a": 2, "b"')
        raise KeyboardInterrupt  # a run stopped while writing

    with pytest.raises(KeyboardInterrupt):
        store.put("k", "k-1", {"a": 2}, Codec(".json", half_then_fail, CODECS["json"].read))
    assert store.get("k", "k-1", "json") == {"a": 1}
    assert [p.name for p in (tmp_path / "k").iterdir()] == ["k-1.json"]


def test_a_store_write_on_a_full_disk_is_one_error_naming_the_entry(tmp_path):
    """A cache entry that meets a full disk (a real one: tmpfs, or a file-size limit) fails with DiskFullError naming
    the entry file and what to do; no temporary file is left."""
    from tests.full_disk import FullDisk

    with FullDisk(tmp_path) as disk:
        disk.fill()
        code = ("import numpy as np, sys; from cr2_tasks.store import Store; from cr2.core.errors import DiskFullError\n"
                "try:\n    Store(sys.argv[1]).put('scores', 'k', {'a': np.ones(100_000)}, 'npz')\n"
                "except DiskFullError as exc:\n    print('DiskFullError', exc)")
        out = disk.python(["-c", code, str(disk.folder / "cache")])
        left = sorted(p.name for p in (disk.folder / "cache" / "scores").iterdir())
    entry = disk.folder / "cache" / "scores" / "k.npz"
    assert out.stdout.startswith(f"DiskFullError cannot write {entry}: the disk holding it is full"), out.stdout
    assert left == [], left


def test_atomic_write_replaces_whole_files_under_names_no_reader_lists(tmp_path):
    target = tmp_path / "sub" / "table.parquet"
    assert atomic_write(target, b"one") == target and target.read_bytes() == b"one"
    atomic_write(target, "two ✓")
    assert target.read_text(encoding="utf-8") == "two ✓"
    tmp = temp_sibling(target)
    assert tmp.parent == target.parent and tmp.name.startswith(".") and not tmp.name.endswith(".parquet")

    def partial(path):
        path.write_bytes(b"partial")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        atomic_write(target, partial)
    assert target.read_text(encoding="utf-8") == "two ✓" and sorted(p.name for p in target.parent.iterdir()) == ["table.parquet"]


def test_replace_dir_swaps_a_whole_folder(tmp_path):
    out = tmp_path / "report"
    for n in (1, 2):
        tmp = temp_dir_beside(out)
        (tmp / "index.html").write_text(f"v{n}")
        replace_dir(tmp, out)
    assert (out / "index.html").read_text() == "v2" and [p.name for p in tmp_path.iterdir()] == ["report"]


def test_cache_keys_have_one_length_and_follow_every_part():
    key = cache_key("scores", "a", 1, [2, 3])
    assert key.startswith("scores-") and len(key) == len("scores-") + FINGERPRINT_CHARS
    assert key == cache_key("scores", "a", "1", "[2, 3]")  # parts are keyed by their string form
    assert len({key, cache_key("scores", "a", 1), cache_key("scores", "a", 1, [2, 4]), cache_key("router", "a", 1, [2, 3])}) == 4


def _changed(data, field):
    """`data` with one row field changed (every row), the rest kept."""
    if field == "model_ids":
        return dataclasses.replace(data, model_ids=tuple(m + "-x" for m in data.model_ids))
    if field == "decision_cost":
        return dataclasses.replace(data, cost_est=np.asarray(data.decision_cost) * 2 + 0.5)
    value = getattr(data, field)
    if value is None:
        value = np.ones(len(data)) if field == "distance_m" else np.ones_like(data.cost)
    elif value.dtype.kind in "OUS":
        value = np.asarray([f"{v}-x" for v in value], dtype=object)
    elif value.dtype == bool:
        value = ~value
    else:
        value = value * 2 + 0.5
    return dataclasses.replace(data, **{field: value})


def test_a_row_field_changes_the_fingerprint_exactly_when_declared():
    data = make_routing_set(30, seed=4)
    for declared in (("query_id", "embedding"), ("query_id", "benchmark", "model_ids", "embedding", "correct"),
                     tuple(ROW_FIELDS)):
        base = fingerprint_rows(data, fields=declared)
        assert len(base) == FINGERPRINT_CHARS
        for field in ROW_FIELDS:
            other = fingerprint_rows(_changed(data, field), fields=declared)
            moved = other != base
            # decision_cost is ĉ when estimated, else c: a change of cost_est moves it too
            reads = field in declared or (field == "cost_est" and "decision_cost" in declared) or (
                field == "decision_cost" and "cost_est" in declared)
            assert moved == reads, (declared, field)
    two = make_routing_set(30, seed=5)
    assert fingerprint_rows(data, two, fields=("query_id",)) != fingerprint_rows(two, data, fields=("query_id",))
    with pytest.raises(ValueError, match="unknown row fields"):
        fingerprint_rows(data, fields=("costs",))


def test_an_artefact_cannot_declare_warehouse_reads():
    from cr2_tasks.common import Artefact, Reads, Rows

    with pytest.raises(ValueError, match="in memory"):
        Artefact("x-fit", Reads(rows=(Rows("queries"),)), ("query_id",), code=("cr2_tasks.train",))


def test_store_records_round_trip_as_json(tmp_path):
    store = Store(tmp_path)
    store.put("teacher-fit", "teacher-fit-0", {"path": "cache/artifacts/t.pt"}, "json")
    assert json.loads(store.path("teacher-fit", "teacher-fit-0", "json").read_text()) == {"path": "cache/artifacts/t.pt"}


def test_stored_study_ids_keep_their_derivation():
    """A study's rows are found again by recomputing its id: the ids (and the file digests they are built from) of the
    studies stored by earlier versions come out the same, so no stored study is orphaned."""
    from cr2.config.shipped import shipped_path
    from cr2_tasks.store import study_file_digest, study_id

    digest = study_file_digest(shipped_path("configs/studies/router-study.yaml"))
    assert digest == "c6b298762f7e07d1"  # the pre-registration's content hash, as published with its results
    assert study_id("routers-pool", digest) == "routers-pool-25ed45b51c7b69ffd09ed01f"
    assert study_id("routers-scenario", digest) == "routers-scenario-2a8465816b9d92623a57e42c"
    assert study_id("seeds", "a", [1, 2]) != study_id("seeds", "a", [1, 3])


def test_tools_get_their_folders_from_the_store_and_no_other_code_builds_a_cache_path(tmp_path, monkeypatch):
    """Every folder under the cache root is handed out by tasks/store.py: the named tool folders (encoders,
    tokenizers, torch-compile) and the store's own kinds; no other module joins a name onto the cache root."""
    import re

    from cr2.core.errors import InvalidValueError
    from cr2_tasks.store import TOOLS, cache_dir, store, tool_dir

    monkeypatch.delenv("CR2_CACHE", raising=False)
    for name in TOOLS:
        d = tool_dir(tmp_path, name)
        assert d == cache_dir(tmp_path) / name and d.is_dir() and store(tmp_path).tool(name) == d
    with pytest.raises(InvalidValueError, match="no tool folder"):
        tool_dir(tmp_path, "scores")  # a kind of the store's own entries is not a tool's folder
    root = Path(__file__).resolve().parents[1]
    joined = re.compile(r'cache_dir\([^)]*\)\s*/|/\s*"cache"\s*/|"\.cache"')
    offenders = [f"{p.relative_to(root)}:{i}" for folder in ("cr2", "cr2_cli", "tasks", "flows", "benchmarks", "scripts")
                 for p in sorted((root / folder).rglob("*.py")) if p.name != "store.py"
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if joined.search(line)]
    assert offenders == []


def test_simcheck_embeddings_are_content_addressed_by_chunk(tmp_path, monkeypatch):
    """The same texts find the same entries (no encoder runs), and a changed text misses only its own chunk."""
    import numpy as np

    from cr2.config import load_config
    from cr2_tasks import simcheck as mod

    monkeypatch.delenv("CR2_CACHE", raising=False)
    monkeypatch.setattr(mod, "EMBED_CHUNK", 3)
    cfg = load_config()
    texts = [f"question {i}" for i in range(7)]
    vec = np.random.default_rng(0).standard_normal((7, 384)).astype(np.float32)
    mod.store_embeddings(texts, cfg, tmp_path, vec)
    assert np.array_equal(mod.cached_embeddings(texts, cfg, tmp_path, progress=False), vec)
    entries = sorted((tmp_path / "cache" / mod.EMBEDDINGS).iterdir())
    assert len(entries) == 3  # 3 + 3 + 1
    calls = []

    def fake_embed(chunk, **kw):
        calls.append(list(chunk))
        return np.ones((len(chunk), 384), np.float32)

    monkeypatch.setattr("cr2.inputs.embed.embed_texts", fake_embed)
    monkeypatch.setattr("cr2.inputs.embed.load_encoder", lambda *a, **k: object())
    changed = texts[:4] + ["another question"] + texts[5:]
    got = mod.cached_embeddings(changed, cfg, tmp_path, progress=False)
    assert calls == [changed[3:6]] and np.array_equal(got[:3], vec[:3]) and np.array_equal(got[6:], vec[6:])
    assert (got[3:6] == 1).all()
