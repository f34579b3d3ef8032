#!/usr/bin/env bash
# Measure labeling on a GPU box in one call: the old and the new hf generation path side by side.
#
#   bash scripts/gpu_measure.sh                 # in the repository root; the JSON goes to $OUT (or benchmarks/results)
#   MODELS=qwen3-1.7b N=128 BATCH=128 CHUNK=256 BUDGET_S=240 bash scripts/gpu_measure.sh
#
# Without network: carry the wheel bundle of docs/labeling.md ("An offline wheel bundle": cr2-wheels.tar.part-*
# in the repository root, built with the box's Python); it is unpacked and installed into .venv next to the box's
# own CUDA torch (--system-site-packages), once. With a ready .venv nothing is installed.
# scripts/gpu_smoke.py then runs both paths (new first) on random-weight models of the pool's shapes and rewrites
# its JSON after every (model, path, benchmark); --budget-s stops it between steps, so a command limit of
# BUDGET_S + about 2 minutes (one step, the model build) always returns the JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT_DIR="${OUT:-benchmarks/results}"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  if ls cr2-wheels.tar.part-* >/dev/null 2>&1; then
    cat cr2-wheels.tar.part-* | tar xf -
  fi
  "$PY" -m venv --system-site-packages .venv
  .venv/bin/pip install -q --no-index --find-links wheels -r bundle.txt
  .venv/bin/pip install -q --no-index --no-deps -e .
fi
nvidia-smi --query-gpu=name,memory.total,driver_version,utilization.gpu --format=csv,noheader || true
.venv/bin/python -c "import torch; assert torch.cuda.is_available(), 'torch sees no CUDA device'; \
print('torch', torch.__version__, torch.cuda.get_device_name(0))"
exec .venv/bin/python scripts/gpu_smoke.py --path both --models "${MODELS:-qwen3-1.7b,qwen3-14b}" --n "${N:-64}" \
  --batch-size "${BATCH:-64}" --chunk-size "${CHUNK:-128}" --budget-s "${BUDGET_S:-360}" \
  --out "$OUT_DIR/gpu_smoke.json"
