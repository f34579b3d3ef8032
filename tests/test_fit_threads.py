"""Fits do not depend on the machine (cr2/routers/fitting.py): the same config gives bit-identical teacher, gate and
baselines whether 1 or 2 cores are available, whatever the BLAS/OpenMP environment, and whether independent fits
run one after another or in parallel processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cr2.routers.fitting import PARALLEL_MIN_ROWS, available_cores, fit_router, fit_workers, run_fits
from cr2.evaluation.synthetic import make_routing_set

REPO = Path(__file__).resolve().parents[1]

# one CR² fit (teacher, then the gate distilled from it) and one MLP baseline at fit.torch_threads = 2 (more threads
# than one core has: the case where the core count could leak into the numbers), as the
# train and baselines tasks build them; prints their fingerprints
FIT = textwrap.dedent("""
    import json
    import os
    if os.environ.get("FAKE_CPU_COUNT"):  # a machine with that many cores, as os.cpu_count() reports them
        os.cpu_count = lambda: int(os.environ["FAKE_CPU_COUNT"])
    from cr2.config import load_config
    from cr2.evaluation.synthetic import make_routing_set
    from cr2_tasks.inputs import cr2_trainer
    from cr2_tasks.baselines import _kwargs
    from cr2.routers import get_router

    config = load_config(overrides={"teacher": {"epochs": 3}, "gate": {"epochs": 3}, "fit": {"torch_threads": 2},
                                    "baselines": {"params": {"mlp": {"epochs": 3}}}})
    train, dev = make_routing_set(600, seed=1), make_routing_set(200, seed=2)
    router = cr2_trainer(config).fit(train, dev)
    mlp = get_router("mlp", **_kwargs("mlp", config)).fit(train, dev)
    print(json.dumps({"teacher": router.teacher_fingerprint_, "gate": router.gate_fingerprint_,
                      "mlp": mlp.fingerprint(), "threads": config.fit.torch_threads}))
""")


def _fit_in_process(cores: str | None, env_extra: dict | None = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env_extra or {})}
    cmd = [sys.executable, "-c", FIT]
    if cores is not None:
        cmd = ["taskset", "-c", cores, *cmd]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.skipif(available_cores() < 2 or not Path("/usr/bin/taskset").exists(),
                    reason="needs 2 cores and taskset to compare 1 and 2 available cores")
def test_fits_are_identical_on_one_two_or_sixteen_cores_and_under_any_blas_environment():
    two = _fit_in_process("0,1")
    one = _fit_in_process("0")
    blas = _fit_in_process(None, {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    sixteen = _fit_in_process("0,1", {"FAKE_CPU_COUNT": "16"})
    assert two["threads"] == 2
    assert one == two == blas == sixteen


def test_workers_default_to_the_available_cores_over_the_fit_threads():
    assert fit_workers(2, None) == max(1, available_cores() // 2)
    assert fit_workers(1, None) == available_cores()
    assert fit_workers(4, 3) == 3 and fit_workers(64, None) == 1
    # fits on few rows stay in the process unless fit.workers asks for more
    assert fit_workers(1, None, rows=PARALLEL_MIN_ROWS - 1) == 1 and fit_workers(1, 2, rows=10) == 2
    assert fit_workers(1, None, rows=PARALLEL_MIN_ROWS) == available_cores()
    from cr2.config.method import FitSpec

    assert f"{PARALLEL_MIN_ROWS:,} training rows" in FitSpec.model_fields["workers"].description  # the doc's number


@pytest.mark.slow
def test_parallel_fits_equal_serial_fits():
    """Independent fits in 2 spawned processes give the fingerprints of the same fits one after another."""
    train, dev = make_routing_set(500, seed=3), make_routing_set(150, seed=4)
    jobs = [(name, {"epochs": 2, "num_threads": 1, **({"seed": 7} if name == "mlp" else {})}, [], train, dev, d)
            for name, d in (("mlp", "serial"), ("embedllm", "serial"))]
    tmp = Path(os.environ["CR2_HOME"]).parent / "fits"
    for sub in ("serial", "parallel"):
        (tmp / sub).mkdir(parents=True, exist_ok=True)
    serial = run_fits(fit_router, [(n, k, c, tr, dv, str(tmp / "serial")) for n, k, c, tr, dv, _ in jobs], workers=1)
    parallel = run_fits(fit_router, [(n, k, c, tr, dv, str(tmp / "parallel")) for n, k, c, tr, dv, _ in jobs],
                        workers=2)
    assert [s[1] for s in serial] == [p[1] for p in parallel]
    for (router_s, *_), (router_p, *_) in zip(serial, parallel, strict=True):  # the routers travel back whole
        assert (router_s.predict_proba(dev) == router_p.predict_proba(dev)).all()


def _sleep_then_square(x: int, seconds: float) -> tuple[int, int]:
    import time as _time

    _time.sleep(seconds)
    return x * x, os.getpid()


@pytest.mark.slow
def test_a_stage_takes_back_the_jobs_no_process_has_begun_and_gets_every_result_in_order():
    from cr2_tasks import ahead

    jobs = [(x, 0.4) for x in range(6)]
    with ahead.fits_ahead(1):  # a flow's pool: the stage's 2 workers less the flow's own process
        results = ahead.fit_all(_sleep_then_square, jobs, workers=2)
        # one worker (fit.workers = 1, or fits too small for a process's start to pay): all here, none submitted
        assert ahead.fit_all(_sleep_then_square, jobs[:2], workers=1) == [(0, os.getpid()), (1, os.getpid())]
    assert [r[0] for r in results] == [x * x for x in range(6)]
    pids = [r[1] for r in results]
    # one process runs the first jobs; the waiting stage ran the last ones itself (never begun by the process)
    assert pids[-1] == os.getpid() and pids[0] != os.getpid()
    assert ahead.fit_all(_sleep_then_square, jobs[:2], workers=1) == [(0, os.getpid()), (1, os.getpid())]


def test_callbacks_wait_for_their_event_inside_a_block_only():
    from cr2_tasks import ahead

    seen = []
    ahead.when("teacher", seen.append)  # outside a block: nothing waits
    assert not ahead.pending("teacher")
    with ahead.fits_ahead(1):
        ahead.when("teacher", seen.append)
        assert ahead.pending("teacher")
        ahead.announce("teacher", "t1")
        ahead.announce("teacher", "t2")  # announced once: the callback has run
        assert seen == ["t1"] and not ahead.pending("teacher")
        ahead.when("gate", seen.append)
    assert not ahead.pending("gate")  # the block's end drops what still waits
