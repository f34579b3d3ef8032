#!/usr/bin/env bash
# Operations speed in one command, on the full default set, then SUMMARY.md re-rendered:
#   re-calibration (server / no server / full evaluation; wall, CPU, load, temporary server starts),
#   a channel change reaching a running `cr2 serve` (end to end, swap lag, /route p99 during the swap),
#   the cold run (its part outside embedding), a re-run after changing only channel.distribution.
# Needs the default warehouse of this checkout in var/ (`make run`). About 20 minutes on an idle 2-core machine.
#   benchmarks/bench_ops_speed.sh            # REPEATS=3 by default; PY=path/to/python to override
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
REPEATS=${REPEATS:-3}
[ -f var/report/index.html ] || { echo "no default warehouse in var/: run \`make run\` first" >&2; exit 2; }
echo "load average before: $(cat /proc/loadavg)"
"$PY" benchmarks/bench_recalibrate.py --home var --repeats "$REPEATS"
"$PY" benchmarks/bench_live_swap.py --home var --repeats "$REPEATS"  # new states → recalibrate → live server swapped
"$PY" benchmarks/bench_pipeline.py --sizes full --repeats 1
"$PY" benchmarks/run_all.py --summary-only
echo "load average after: $(cat /proc/loadavg)"
