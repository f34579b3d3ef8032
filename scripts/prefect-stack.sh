#!/usr/bin/env bash
# The local Prefect stack of docs/operations.md in one command: a Prefect server on 127.0.0.1, the cr2-process
# work pool, every deployment of prefect.yaml, and a process worker (one flow run at a time: DuckDB admits one
# writer). `make prefect-up` / `make prefect-down` call this script.
#
#   scripts/prefect-stack.sh up      # start (idempotent); prints the UI address and the PREFECT_API_URL to export
#   scripts/prefect-stack.sh down    # stop the worker and the server (their whole process groups)
#
# Server and worker run detached, each in its own session; pids and logs go to $CR2_HOME/prefect-stack/.
# PREFECT_PORT (default 4200) picks the port; CR2_HOME (default var/) is where the flows write the warehouse.
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$REPO/.venv/bin/python}
PORT=${PREFECT_PORT:-4200}
export CR2_REPO=$REPO
export CR2_HOME=${CR2_HOME:-$REPO/var}
STACK=$CR2_HOME/prefect-stack
export PREFECT_HOME=${PREFECT_HOME:-$STACK/prefect}
export PREFECT_API_URL=http://127.0.0.1:$PORT/api
export PREFECT_SERVER_ANALYTICS_ENABLED=false DO_NOT_TRACK=1
mkdir -p "$STACK" "$PREFECT_HOME"

healthy() { "$PY" -c "import httpx,sys; sys.exit(httpx.get('$PREFECT_API_URL/health', timeout=3).status_code != 200)" 2>/dev/null; }
alive() { [ -f "$STACK/$1.pid" ] && kill -0 "$(cat "$STACK/$1.pid")" 2>/dev/null; }
stop() {
  if alive "$1"; then kill -TERM -- "-$(cat "$STACK/$1.pid")" 2>/dev/null || true
    for _ in $(seq 30); do alive "$1" || break; sleep 1; done
    alive "$1" && kill -KILL -- "-$(cat "$STACK/$1.pid")" 2>/dev/null || true
    echo "stopped $1"; fi
  rm -f "$STACK/$1.pid"
}

case "${1:-up}" in
up)
  if ! healthy; then
    setsid "$PY" -m prefect server start --host 127.0.0.1 --port "$PORT" >"$STACK/server.log" 2>&1 < /dev/null &
    echo $! >"$STACK/server.pid"
    for _ in $(seq 240); do healthy && break; alive server || { cat "$STACK/server.log"; exit 1; }; sleep 1; done
    healthy || { echo "the Prefect server did not answer within 240 s; see $STACK/server.log"; exit 1; }
  fi
  "$PY" -m prefect work-pool inspect cr2-process >/dev/null 2>&1 || "$PY" -m prefect work-pool create cr2-process --type process
  (cd "$REPO" && "$PY" -m prefect --no-prompt deploy --all >"$STACK/deploy.log" 2>&1) || { cat "$STACK/deploy.log"; exit 1; }
  if ! alive worker; then
    cd "$REPO"  # the worker runs flows from this checkout (prefect.yaml's pull step: CR2_REPO)
    setsid "$PY" -m prefect worker start --pool cr2-process --limit 1 >"$STACK/worker.log" 2>&1 < /dev/null &
    echo $! >"$STACK/worker.pid"
  fi
  echo "Prefect UI: http://127.0.0.1:$PORT   (logs and pids: $STACK)"
  echo "use it from this shell:  export PREFECT_API_URL=$PREFECT_API_URL"
  echo "run a deployment:        prefect deployment run cr2-recalibrate/cr2-recalibrate -p states=far-rician"
  echo "stop:                    make prefect-down";;
down) stop worker; stop server;;
*) echo "usage: $0 up|down"; exit 2;;
esac
