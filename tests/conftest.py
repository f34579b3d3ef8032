"""Shared test fixtures: an isolated environment, a small benchmark slice, one Prefect harness per session."""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import pytest

# Isolate everything a test run writes before any test module imports prefect or transformers. A run is one
# process, or a pytest-xdist controller and its workers: _SESSION_TMP is each process's own; _RUN_TMP is one
# folder for the whole run, made by the first process (the controller) and inherited by its workers through the
# environment. The cache is the run's: its files are content-keyed and written atomically, so every worker reuses
# the tokenizer conversion, the encoder export and the fitted artefacts of the others, as one process would.
_RUN_OWNER = "CR2_TEST_RUN_TMP" not in os.environ
if _RUN_OWNER:
    os.environ["CR2_TEST_RUN_TMP"] = tempfile.mkdtemp(prefix="cr2-tests-run-")
_RUN_TMP = Path(os.environ["CR2_TEST_RUN_TMP"])
_SESSION_TMP = Path(tempfile.mkdtemp(prefix="cr2-tests-"))
os.environ["CR2_CACHE"] = str(_RUN_TMP / "cache")
# OpenMP threads that have no work sleep instead of spinning. Parallel workers (and the processes the tests start)
# keep more threads runnable than there are cores; a spinning thread then takes the core a working one needs, and
# a 2-thread fit runs up to 10× slower. How threads wait never changes a result: a fit's numbers depend on its
# thread count only (cr2/routers/fitting.py).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ["CR2_HOME"] = str(_SESSION_TMP / "home")
os.environ["PREFECT_HOME"] = str(_SESSION_TMP / "prefect")
os.environ["HF_HOME"] = str(_SESSION_TMP / "hf")
(_SESSION_TMP / "prefect").mkdir(parents=True, exist_ok=True)

from cr2.core.env import apply_offline_env  # noqa: E402

apply_offline_env()  # the offline switches every entry point sets, before any test module imports torch or prefect

from cr2.config import REPO_ROOT, load_config  # noqa: E402

DATA = REPO_ROOT / "data"


XDIST_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def pytest_configure(config):
    """Under n parallel workers each worker's torch gets cores ÷ n intra-op threads (fits set their own count)."""
    if XDIST_WORKERS > 1 and "PYTEST_XDIST_WORKER" in os.environ:
        import torch

        from cr2.routers.fitting import available_cores

        torch.set_num_threads(max(1, available_cores() // XDIST_WORKERS))


# The modules that take longest, roughly longest first. Under parallel workers (`make test`: --dist loadfile,
# --no-loadscope-reorder) a module runs whole on one worker and the workers take modules in collection order, so
# starting the long ones first keeps one from running alone at the end. test_pipeline_flow leads: it builds the
# run's slice warehouse (pipeline_slice) that later modules copy.
HEAVY_FIRST = (
    "tests/test_pipeline_flow.py",
    "tests/routers/test_router_default_set.py",
    "tests/test_prefect_server.py",
    "tests/test_cli_clean_exit.py",
    "tests/routers/test_router_learned.py",
    "tests/test_stage_reads.py",
    "tests/test_split_seed_costs.py",
    "tests/test_fit_threads.py",
    "tests/labeling/test_sandbox.py",
    "tests/test_zeroeval.py",
    "tests/test_report_browser.py",
    "tests/test_intervals_flow.py",
    "tests/labeling/test_gpu_smoke.py",
    "tests/labeling/test_static_generation.py",
    "tests/test_your_pool.py",
    "tests/test_premise.py",
)


def pytest_collection_modifyitems(config, items):
    # Parallel workers account for tests by node id, so items sharing one would run only once there: schemathesis
    # gives each API operation's item (named `test[GET /health]`, …) the node id of the bare test function.
    seen: dict[str, int] = {}
    for item in items:
        seen[item.nodeid] = seen.get(item.nodeid, 0) + 1
    for item in items:
        if seen[item.nodeid] > 1:
            item._id = item.parent.id.child(item.name)  # as pytest names a parametrized item
    assert len({item.nodeid for item in items}) == len(items), "test items with the same node id"
    rank = {m: i for i, m in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order


def pytest_sessionfinish(session, exitstatus):
    shutil.rmtree(_SESSION_TMP, ignore_errors=True)
    if _RUN_OWNER:
        shutil.rmtree(_RUN_TMP, ignore_errors=True)


@contextlib.contextmanager
def _run_lock(name: str):
    """An exclusive lock held across the run's processes (an flock on a file in the run's folder)."""
    with open(_RUN_TMP / f".{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def built_once(name: str, build: Callable[[Path], None]) -> Path:
    """The folder `name` of the run, filled by `build(folder)` once for the whole run: the first process (worker)
    that asks builds it while the others wait, and every later ask returns it as built. A failed build leaves no
    folder behind, so the next ask builds again (and fails with its own error). Readers must not write into it:
    copy it (`copy_of`) to change it."""
    folder = _RUN_TMP / "built" / name
    with _run_lock(f"built-{name}"):
        if not (folder / ".built").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            (folder / ".built").touch()
    return folder


def copy_of(src: Path, dst: Path) -> Path:
    """A private, writable copy of a built folder (a warehouse home with its cached stage results)."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns(".built"))
    return dst


@pytest.fixture(scope="session")
def prefect_harness():
    """One temporary Prefect API for the whole session (≈15 s), for the few tests that run real flows."""
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL
    from prefect.testing.utilities import prefect_test_harness

    from cr2_cli.prefect_api import template_path
    from cr2_warehouse.prefect_state import save_template
    from cr2_tasks.store import Store

    with prefect_test_harness(server_startup_timeout=180):
        # its database is new and migrated: the run's template, so every later new Prefect home of the run (the
        # real-server stack, a `cr2` flow command's own server) starts from a copy (cr2_cli.prefect_api.seed_database)
        db = Path(str(PREFECT_SERVER_DATABASE_CONNECTION_URL.value()).split(":///", 1)[-1])
        save_template(db, template_path(Store(Path(os.environ["CR2_CACHE"])).tool("prefect-db")))
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


# ---------------------------------------------------------------- slice warehouses built once per run
# The pipeline slice keeps the shipped evaluation settings (B = 10,000 comparison resamples, 200 re-splits): the one
# slice run on the default path. Every other test run sets B = 1,000 / 200 and 10 re-splits, which test the same
# properties at a tenth of the bootstrap's work.
PIPELINE_SLICE = """extends: default
data_dir: {data}
teacher: {{epochs: 4}}
gate: {{epochs: 4}}
grids: {{lam: {{min: 0.1, max: 20.0, n_log: 6, extra: [0.0, 0.5, 2.0, 8.0]}}}}
baselines: {{params: {{mlp: {{epochs: 4}}, embedllm: {{epochs: 4}}, llmrank: {{epochs: 4}}, knn: {{k_grid: [3, 5]}}}}}}
"""


@pytest.fixture(scope="session")
def pipeline_slice(prefect_harness) -> dict:
    """The real `cr2 run` flow on a 40-per-subset slice (≈ 320 queries), run once for the whole test run:
    {"cfg": its config, "home": the warehouse home as the run left it, "first": the run's summary}. The home is
    shared: a test that writes takes its own copy (`copy_of`), cached stage results included."""
    import pickle

    def build(folder: Path) -> None:
        from cr2_flows.run import run_flow

        data = write_small_benchmarks(folder / "data", per_subset=40, subsets_per_benchmark=3)
        cfg = folder / "small.yaml"
        cfg.write_text(PIPELINE_SLICE.format(data=data))
        first = run_flow(config_path=str(cfg), home=str(folder / "home"))
        (folder / "first.pkl").write_bytes(pickle.dumps(first))

    folder = built_once("pipeline-slice", build)
    return {"cfg": folder / "small.yaml", "home": folder / "home",
            "first": pickle.loads((folder / "first.pkl").read_bytes())}


@pytest.fixture(scope="session")
def measured_slice(prefect_harness) -> dict:
    """The real `cr2 run -c configs/mmlu-pro-measured.yaml` on a 70-question slice (5 per category), run once for
    the whole test run: {"cfg": its config, "home": the warehouse home as the run left it, "first": the run's
    summary}. Shared as pipeline_slice is: read it, or copy it (`copy_of`) to write."""
    import pickle

    def build(folder: Path) -> None:
        from cr2_flows.run import run_flow
        from tests.test_measured import MEASURED_CONFIG, SLICE, _slice

        data = _slice(folder / "data", per_category=5)
        cfg = folder / "slice.yaml"
        cfg.write_text(SLICE.format(base=MEASURED_CONFIG, data=data))
        first = run_flow(config_path=str(cfg), home=str(folder / "mmlu-pro"))
        (folder / "first.pkl").write_bytes(pickle.dumps(first))

    folder = built_once("measured-slice", build)
    return {"cfg": folder / "slice.yaml", "home": folder / "mmlu-pro", "first": pickle.loads((folder / "first.pkl").read_bytes())}


SMALL_RUN = """extends: default
data_dir: {data}
teacher: {{epochs: 2}}
gate: {{epochs: 2}}
grids: {{lam: {{min: 0.1, max: 20.0, n_log: 4, extra: [0.0, 2.0]}}}}
evaluation: {{n_resplits: 10, bootstrap: {{n_resamples: 200, n_resamples_compare: 1000}}}}
baselines: {{params: {{mlp: {{epochs: 2}}, embedllm: {{epochs: 2}}, llmrank: {{epochs: 2}}, knn: {{k_grid: [3]}}}}}}
splits: {{seed: {seed}}}
"""


def cr2_process(args: list[str], env: dict, timeout: int = 900) -> subprocess.CompletedProcess:
    """`cr2 <args>` as a user runs it: a new interpreter, output captured."""
    return subprocess.run([sys.executable, "-m", "cr2_cli.main", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=REPO_ROOT)


def cli_env(home: Path) -> dict:
    """The environment of a `cr2` process on warehouse `home` and the session's Prefect API."""
    from prefect.settings import PREFECT_API_URL

    return {**os.environ, "PREFECT_API_URL": PREFECT_API_URL.value(), "CR2_HOME": str(home), "COLUMNS": "200",
            "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="session")
def small_cli_run(prefect_harness) -> dict:
    """`cr2 run` in a process of its own on a 12-per-subset slice (≈ 100 queries, split seed 0, config SMALL_RUN),
    run once for the whole test run: {"data": the slice's data_dir, "cfg": its config, "home": the warehouse home
    as the run left it, "result": the finished process (exit code, stdout, stderr)}. test_cli_clean_exit checks
    that process's exit; test_split_seed_costs continues the warehouse with another seed. Copy the home to write."""
    import json

    def build(folder: Path) -> None:
        data = write_small_benchmarks(folder / "data", per_subset=12, subsets_per_benchmark=2)
        cfg = folder / "small.yaml"
        cfg.write_text(SMALL_RUN.format(data=data, seed=0))
        res = cr2_process(["run", "-c", str(cfg)], cli_env(folder / "home"), timeout=1800)
        (folder / "result.json").write_text(json.dumps([res.args, res.returncode, res.stdout, res.stderr]))

    folder = built_once("small-cli-run", build)
    return {"data": folder / "data", "cfg": folder / "small.yaml", "home": folder / "home",
            "result": subprocess.CompletedProcess(*json.loads((folder / "result.json").read_text()))}


def run_stages_to_evaluate(run) -> dict:
    """The stages of `cr2 run` from ingest to evaluate, each through `run(stage, *inputs)` (the test's way of running
    one: a tracked run, the bare task body, …); returns each stage's result by name."""
    from cr2_tasks.baselines import BASELINES
    from cr2_tasks.calibrate import CALIBRATE
    from cr2_tasks.evaluate import EVALUATE
    from cr2_tasks.ingest import INGEST
    from cr2_tasks.prepare import COSTS, EMBEDDINGS, LABELS, SPLITS, STATES
    from cr2_tasks.train import TRAIN

    out = {"ingest": run(INGEST)}
    for stage in (EMBEDDINGS, SPLITS, STATES, LABELS, COSTS):
        run(stage)
    out["train"] = run(TRAIN)
    out["calibrate"] = run(CALIBRATE, out["train"], ())
    out["baselines"] = run(BASELINES)
    out["evaluate"] = run(EVALUATE, out["train"], out["calibrate"], out["baselines"])
    return out
