"""Shared test fixtures: an isolated environment, a small benchmark slice, one Prefect harness per session."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Isolate everything a test run writes before any test module imports prefect or transformers.
_SESSION_TMP = Path(tempfile.mkdtemp(prefix="cr2-tests-"))
os.environ["CR2_CACHE"] = str(_SESSION_TMP / "cache")  # tokenizer conversion shared by the session
os.environ["CR2_HOME"] = str(_SESSION_TMP / "home")
os.environ["PREFECT_HOME"] = str(_SESSION_TMP / "prefect")
os.environ["HF_HOME"] = str(_SESSION_TMP / "hf")
(_SESSION_TMP / "prefect").mkdir(parents=True, exist_ok=True)

import cr2  # noqa: E402,F401  (offline switches)
from cr2.config import REPO_ROOT, load_config  # noqa: E402

DATA = REPO_ROOT / "data"


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_TMP, ignore_errors=True)


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API for the whole session (≈15 s), for the few tests that run real flows."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch limited to one intra-op thread for the requesting module, restored afterwards."""
    import torch

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


def write_small_benchmarks(out: Path, per_subset: int = 8, subsets_per_benchmark: int = 3) -> Path:
    """A small slice of the shipped benchmark files (a few subsets each) written to out/benchmarks."""
    import pyarrow.parquet as pq

    (out / "benchmarks").mkdir(parents=True, exist_ok=True)
    keep = {"mmlu": None, "bbh": None, "gpqa": ["main"], "mbpp": ["test"]}
    for name, subsets in keep.items():
        df = pq.read_table(DATA / "benchmarks" / f"{name}.parquet").to_pandas()
        if subsets:
            df = df[df["subset"].isin(subsets)]
        chosen = list(dict.fromkeys(df["subset"]))[:subsets_per_benchmark]
        df = df[df["subset"].isin(chosen)].groupby("subset", sort=False).head(per_subset)
        df.to_parquet(out / "benchmarks" / f"{name}.parquet", compression="zstd", index=False)
    shutil.copy(DATA / "qwen3_base_accuracy.csv", out / "qwen3_base_accuracy.csv")
    return out


@pytest.fixture(scope="session")
def small_data_dir(tmp_path_factory) -> Path:
    return write_small_benchmarks(tmp_path_factory.mktemp("small-data"))


@pytest.fixture()
def small_config(small_data_dir):
    return load_config(overrides={"data_dir": str(small_data_dir)})


@pytest.fixture()
def home(tmp_path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h
