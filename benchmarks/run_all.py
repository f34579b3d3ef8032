"""Run every benchmarks/bench_*.py (or those named on the command line); each writes benchmarks/results/<name>.json."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    names = argv or sorted(p.stem.removeprefix("bench_") for p in HERE.glob("bench_*.py"))
    failed = []
    for name in names:
        script = HERE / f"bench_{name}.py"
        if not script.is_file():
            print(f"unknown benchmark '{name}'; available: {', '.join(sorted(p.stem[6:] for p in HERE.glob('bench_*.py')))}")
            return 2
        print(f"== {name}", flush=True)
        if subprocess.run([sys.executable, str(script)], cwd=HERE.parent).returncode != 0:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
