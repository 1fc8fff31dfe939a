#!/usr/bin/env bash
# The reference table on a real GPU: starts the GPU model server (server.py), runs mcp-bench at
# concurrency 64/256/512 with the text and the multimodal workload (text.yaml, multimodal.yaml:
# GPU telemetry through NVML, the server's /metrics sampled during each level and after a settle
# wait), takes the PyTorch allocator's snapshot after each run, runs `mcp-bench forensics` over
# result and snapshot, and prints the table (summarise.py). A fresh server per workload, so each
# run's memory starts from the server's own baseline. Needs PyTorch with CUDA, aiohttp and the
# benchmark's own dependencies (with WHEELS=DIR, the wheels in DIR are installed into a private
# folder first). Leaves at most eight files in OUT: run.log, server.log, table.md,
# WORKLOAD.result.json and WORKLOAD.snapshot.json per workload, forensics.json.
#
#   measurements/gpu_model_server/run.sh OUT
#   env: WHEELS=DIR  PYTHON=python3 (the server's)  BENCH_PYTHON=$PYTHON (mcp-bench's)
#        PORT=8000  PLANS=DIR (plans whose url is that port)
#        WORKLOADS="text multimodal"  TELEMETRY=100ms  SERVER_ARGS="--max-batch 256"
set -u
OUT=${1:?usage: run.sh OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
BPY=${BENCH_PYTHON:-$PY}
PORT=${PORT:-8000}
PLANS=${PLANS:-$HERE}
WORKLOADS=${WORKLOADS:-text multimodal}
TELEMETRY=${TELEMETRY:-100ms}
read -r -a SERVER_ARGS <<<"${SERVER_ARGS:---max-batch 256}"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d)
log() { echo "[$(date +%T)] $*"; }

SITE=$REPO/bench
if [[ -n ${WHEELS:-} ]]; then
  $BPY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/site" "$WHEELS"/*.whl \
    && SITE=$W/site:$REPO/bench
fi
bench() { PYTHONPATH=$SITE $BPY -c 'import sys; from mcp_bench.cli import main; sys.exit(main(sys.argv[1:]))' "$@"; }
get() { $PY -c 'import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1], timeout=60).read().decode())' "$1"; }

main() {
log "host: $(nproc) cores; gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used \
  --format=csv,noheader 2>/dev/null || echo none)"
log "python: $($PY -c 'import sys, torch, aiohttp; print(sys.version.split()[0], "torch", torch.__version__,
  "aiohttp", aiohttp.__version__)')"

for w in $WORKLOADS; do
  log "== $w: server ${SERVER_ARGS[*]}"
  t0=$SECONDS
  $PY "$HERE/server.py" --port "$PORT" "${SERVER_ARGS[@]}" >>"$W/server.log" 2>&1 &
  pid=$!
  up=0
  for _ in $(seq 1 300); do
    if get "http://127.0.0.1:$PORT/health" >/dev/null 2>&1; then up=1 && break; fi
    kill -0 $pid 2>/dev/null || break
    sleep 0.5
  done
  if [[ $up == 0 ]]; then
    log "$w: the server never answered" && tail -20 "$W/server.log" && kill $pid 2>/dev/null && continue
  fi
  log "$w: server up in $((SECONDS - t0)) s: $(get "http://127.0.0.1:$PORT/debug/info")"
  t0=$SECONDS
  bench run --plan "$PLANS/$w.yaml" -o "$OUT/$w.result.json" --gpu-telemetry "$TELEMETRY" --quiet
  log "$w: mcp-bench run rc $? in $((SECONDS - t0)) s"
  bench show "$OUT/$w.result.json"
  get "http://127.0.0.1:$PORT/debug/memory_snapshot" >"$OUT/$w.snapshot.json"
  get "http://127.0.0.1:$PORT/metrics" | grep -v -e '^#' -e '_bucket' | sed "s/^/[$w metrics] /"
  bench forensics "$OUT/$w.result.json" --snapshot "$OUT/$w.snapshot.json"
  log "$w: forensics rc $?"
  bench forensics "$OUT/$w.result.json" --snapshot "$OUT/$w.snapshot.json" --json >"$W/$w.forensics.json"
  kill $pid && wait $pid 2>/dev/null
done

$BPY - "$W" "$OUT/forensics.json" $WORKLOADS <<'EOF'
import json, pathlib, sys
src, dst, names = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3:]
out = {}
for n in names:
    p = src / f"{n}.forensics.json"
    out[n] = json.loads(p.read_text()) if p.exists() and p.stat().st_size else None
pathlib.Path(dst).write_text(json.dumps(out, indent=1))
EOF
cp "$W/server.log" "$OUT/server.log"
results=()
for w in $WORKLOADS; do [[ -s $OUT/$w.result.json ]] && results+=("$OUT/$w.result.json"); done
((${#results[@]})) && PYTHONPATH=$SITE $BPY "$HERE/summarise.py" "${results[@]}" | tee "$OUT/table.md"
log done
}

main 2>&1 | tee "$OUT/run.log"
