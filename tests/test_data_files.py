"""The shipped data files are the curated ones, byte for byte, and GPQA never appears in plain text."""
from __future__ import annotations

import hashlib
import subprocess

import pytest

from cr2.config import REPO_ROOT

SHA256 = {
    "mmlu": "b7a937626e59a77f834177e663cd448740f833eacbaf456272bebbf544216b51",
    "bbh": "3f13e195ab950e41cd3c12753e1e8a7600ea06f9756ba0cbd555117dab0fd2a2",
    "gpqa": "3a8f01b6dbcdf4691542005c14048e84a207d464a6af593c2dbd354a6a60a0e5",
    "mbpp": "a5a9af58c80e4ee4c6320c2b4eaedd5c43be30b3481488f2b540cb8d7f2d85fb",
}


@pytest.mark.parametrize("name", sorted(SHA256))
def test_benchmark_file_is_the_curated_one(name):
    data = (REPO_ROOT / "data" / "benchmarks" / f"{name}.parquet").read_bytes()
    assert hashlib.sha256(data).hexdigest() == SHA256[name], f"data/benchmarks/{name}.parquet was modified"


def test_no_gpqa_question_text_in_any_tracked_plain_file():
    import pyarrow.parquet as pq

    questions = pq.read_table(REPO_ROOT / "data" / "benchmarks" / "gpqa.parquet", columns=["question"]).column(0).to_pylist()
    # distinctive 60-character snippets from the middle of each question
    snippets = {q[len(q) // 3: len(q) // 3 + 60] for q in questions if len(q) > 120}
    try:
        tracked = subprocess.run(["git", "ls-files"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    for rel in tracked:
        if rel.endswith(".parquet"):
            continue
        path = REPO_ROOT / rel
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        leaked = [s for s in snippets if s in text]
        assert not leaked, f"{rel} quotes GPQA text (e.g. {leaked[0][:20]!r}…); GPQA must stay inside the Parquet file"
