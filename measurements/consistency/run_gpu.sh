#!/usr/bin/env bash
# Output consistency on a real GPU: starts the GPU model server, runs gpu_text.yaml (probes at rest
# and under load at 1/64/256/512 streams) and prints mcp-bench show. Needs PyTorch with CUDA and
# the benchmark's dependencies (WHEELS=DIR installs the wheels in DIR into a private folder first).
# Leaves in OUT: server.log, text.result.json, show.txt.
#
#   measurements/consistency/run_gpu.sh OUT      env: WHEELS=DIR  PYTHON=python3  PORT=8000
set -u
OUT=${1:?usage: run_gpu.sh OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
mkdir -p "$OUT"
SITE=$REPO/bench
if [[ -n ${WHEELS:-} ]]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/cons-site "$WHEELS"/*.whl \
    && SITE=/tmp/cons-site:$REPO/bench
fi
bench() { PYTHONPATH=$SITE $PY -c 'import sys; from mcp_bench.cli import main; sys.exit(main(sys.argv[1:]))' "$@"; }
$PY "$REPO/measurements/gpu_model_server/server.py" --port "${PORT:-8000}" --max-batch 256 >"$OUT/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do
  $PY -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=5)' "http://127.0.0.1:${PORT:-8000}/health" \
    2>/dev/null && break
  kill -0 $pid 2>/dev/null || { tail -20 "$OUT/server.log"; exit 1; }
  sleep 0.5
done
bench run --plan "$HERE/gpu_text.yaml" --gpu-telemetry 100ms -o "$OUT/text.result.json" --quiet
bench show "$OUT/text.result.json" | tee "$OUT/show.txt"
kill $pid
wait $pid 2>/dev/null
exit 0
