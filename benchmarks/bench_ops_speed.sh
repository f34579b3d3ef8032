#!/usr/bin/env bash
# Operations speed in one command, on the full default set, then SUMMARY.md re-rendered:
#   re-calibration (server / no server / full evaluation; wall, CPU, load, temporary server starts),
#   a channel change reaching a running `cr2 serve` (end to end, swap lag, /route p99 during the swap),
#   the cold run that built var/ (its part outside embedding), a re-run after changing only channel.distribution,
#   one fit at 1 and 2 threads and two fits at once (fit.torch_threads).
# Needs the default warehouse of this checkout in var/, built by a cold `make run` (its run is what the cold figure
# reads). About 15 minutes on an idle 2-core machine.
#   benchmarks/bench_ops_speed.sh            # REPEATS=3 by default; PY=path/to/python to override
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
REPEATS=${REPEATS:-3}
[ -f var/report/index.html ] || { echo "no default warehouse in var/: run \`make run\` first" >&2; exit 2; }
echo "load average before: $(cat /proc/loadavg)"
"$PY" benchmarks/bench_recalibrate.py --home var --repeats "$REPEATS"
"$PY" benchmarks/bench_live_swap.py --home var --repeats "$REPEATS"  # new states → recalibrate → live server swapped
"$PY" benchmarks/bench_rerun.py --home var --repeats 2   # cold run outside embedding; channel-only re-run
"$PY" benchmarks/bench_fit_threads.py
"$PY" benchmarks/run_all.py --summary-only
echo "load average after: $(cat /proc/loadavg)"
