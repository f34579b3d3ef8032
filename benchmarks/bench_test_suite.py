"""`make test` (the README's test command, what CI runs) from a fresh clone of this checkout's HEAD, timed.

Clones the committed HEAD into a temporary folder (uncommitted changes are not measured), runs `make test` there
(virtual environment created and installed as a newcomer's first run does: the install is part of the wall time)
and records: the wall time (and of its two phases: the install, then pytest), the CPU time of the whole run (user +
sys of make and everything it waited for), the load average every 15 s and the machine's cores, the test counts
pytest reports, and the duration of every test file (setup + call + teardown of its items, from pytest's JUnit XML:
which files the time goes to). With
--beside-load one CPU-bound process runs beside the suite for its whole duration (the "one other CPU-heavy job"
case). Targets: ≤ 12 min idle, ≤ 25 min beside one other job. Results: benchmarks/results/test_suite.json
(test_suite_beside_load.json with --beside-load).

    python benchmarks/bench_test_suite.py [--beside-load] [--keep]
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

from _common import REPO, beside_load, beside_result, figure, parse_args, target, write_result

IDLE_TARGET_S = 12 * 60
BESIDE_LOAD_TARGET_S = 25 * 60
LOAD_SAMPLE_S = 15.0
# pytest's last line: "1386 passed, 1 skipped in 887.83s (0:14:47)" (-q: without the ===== rule)
SUMMARY = re.compile(r"^=*\s*(\d+ \w+(?:, \d+ \w+)*) in ([\d.]+)s", re.MULTILINE)


class LoadSampler(threading.Thread):
    """The 1-minute load average every LOAD_SAMPLE_S seconds while the suite runs."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.samples: list[tuple[float, float]] = []
        self._stop_event = threading.Event()
        self._t0 = time.monotonic()

    def run(self) -> None:
        while not self._stop_event.wait(LOAD_SAMPLE_S):
            self.samples.append((round(time.monotonic() - self._t0, 1), os.getloadavg()[0]))

    def stop(self) -> None:
        self._stop_event.set()
        self.join()


def file_durations(junit: Path) -> tuple[dict[str, float], dict[str, int]]:
    """{test file: seconds} (setup + call + teardown of its items) and {outcome: count} from pytest's JUnit XML."""
    seconds: dict[str, float] = defaultdict(float)
    outcomes: dict[str, int] = defaultdict(int)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("file") or case.get("classname", "").replace(".", "/").rsplit("/", 1)[0] + ".py"
        seconds[name] += float(case.get("time") or 0.0)
        kinds = {child.tag for child in case}
        outcomes["failed" if kinds & {"failure", "error"} else "skipped" if "skipped" in kinds else "passed"] += 1
    return dict(sorted(seconds.items(), key=lambda kv: -kv[1])), dict(outcomes)


def main() -> None:
    args = parse_args(__doc__, **{
        "beside-load": {"action": "store_true", "help": "run one CPU-bound process beside the suite"},
        "keep": {"action": "store_true", "help": "keep the clone (its .venv) after the run"}})
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout.strip()
    scratch = Path(tempfile.mkdtemp(prefix="cr2-bench-suite-"))
    clone, junit, log = scratch / "cr2", scratch / "junit.xml", scratch / "make-test.log"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    env = {k: v for k, v in os.environ.items() if k not in ("CR2_HOME", "CR2_CACHE", "PREFECT_API_URL", "PREFECT_HOME",
                                                             "VIRTUAL_ENV", "PYTEST_ADDOPTS")}
    env["PYTEST_ADDOPTS"] = f"--junitxml={junit} -o junit_duration_report=total -o junit_family=xunit1"
    sampler = LoadSampler()
    load_before = list(os.getloadavg())
    with beside_load(args.beside_load) as beside:
        try:
            sampler.start()
            t0 = time.perf_counter()
            # `make test` is its prerequisites (the install) and then pytest: the same two steps, each timed
            phases, user_s, sys_s = {}, 0.0, 0.0
            with open(log, "w") as out:
                for phase, goals in (("install", ["install-dev", "chromium"]), ("test", ["test"])):
                    t_phase = time.perf_counter()
                    proc = subprocess.Popen(["make", *goals], cwd=clone, env=env, stdout=out, stderr=subprocess.STDOUT)
                    _, status, used = os.wait4(proc.pid, 0)
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    phases[phase] = {"wall_s": round(time.perf_counter() - t_phase, 1),
                                     "cpu_s": round(used.ru_utime + used.ru_stime, 1)}
                    user_s, sys_s = user_s + used.ru_utime, sys_s + used.ru_stime
                    if proc.returncode != 0:
                        break
            wall_s = time.perf_counter() - t0
        finally:
            sampler.stop()
    text = log.read_text(errors="replace")
    summary = SUMMARY.findall(text)
    per_file, outcomes = file_durations(junit) if junit.is_file() else ({}, {})
    name = beside_result("test_suite", beside)
    limit = BESIDE_LOAD_TARGET_S if args.beside_load else IDLE_TARGET_S
    write_result(name, {
        "commit": commit, "command": "make test (fresh clone, install included)", "exit_code": proc.returncode,
        "beside_load": beside,
        "cpu_s": round(user_s + sys_s, 1), "user_s": round(user_s, 1), "sys_s": round(sys_s, 1), "phases": phases,
        "cores": len(os.sched_getaffinity(0)),
        "load_avg_before": load_before, "load_avg_1m_samples": sampler.samples,
        "pytest_summary": summary[-1][0] if summary else None,
        "pytest_seconds": float(summary[-1][1]) if summary else None,
        "tests": outcomes, "per_file_s": {k: round(v, 1) for k, v in per_file.items()},
        "figures": [figure("wall_s", "make test from a fresh clone, wall", [wall_s], "s",
                           target("<=", limit, f"≤ {limit // 60} min"))],
    })
    if proc.returncode != 0:
        print(f"make test failed (exit {proc.returncode}); its output: {log}", flush=True)
    if not args.keep:
        subprocess.run(["rm", "-rf", str(clone)])
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()
