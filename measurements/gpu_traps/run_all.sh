#!/usr/bin/env bash
# Produces traps 1, 2, 4, 7, 9, 10 and 12 on purpose on one CUDA GPU, each beside its fixed twin,
# and says what the detectors find in each (summarise.py). Needs: nvcc and ncu (Nsight Compute)
# for phase "ncu"; PyTorch with CUDA for "torch"; PyTorch, aiohttp and the benchmark's own
# dependencies for "server" (with WHEELS=DIR, the wheels in DIR are installed into a private
# folder first). Each phase leaves OUT/<phase>.tar.gz (its raw and trimmed files, logs).
#
#   measurements/gpu_traps/run_all.sh OUT [ncu,torch,server]
set -u
OUT=${1:?usage: run_all.sh OUT [ncu,torch,server]}
PHASES=${2:-ncu,torch,server}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PY=${PYTHON:-python3}
W=$(mktemp -d)
mkdir -p "$OUT"
log() { echo "[$(date +%T)] $*"; }
pack() { tar -C "$W" -czf "$OUT/$1.tar.gz" "$1"; log "packed $1: $(du -sh "$OUT/$1.tar.gz" | cut -f1)"; }

SITE=$REPO/bench
if [[ -n ${WHEELS:-} ]]; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/gpu-traps-site \
    "$WHEELS"/*.whl && SITE=/tmp/gpu-traps-site:$REPO/bench
fi
bench_py() { PYTHONPATH=$SITE $PY "$@"; }

log "gpu: $(nvidia-smi --query-gpu=name,driver_version,compute_cap,clocks.sm,clocks.mem --format=csv,noheader)"

if [[ $PHASES == *ncu* ]]; then
  D=$W/ncu && mkdir -p "$D"
  NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
  log "ncu: ${NCU:-none} $(${NCU:-false} --version 2>/dev/null | tail -1)"
  nvcc -O3 -arch=native -o "$D/smem_kernels" "$HERE/smem_kernels.cu" 2>&1 | tee "$D/build.log"
  timeout 150 "$D/smem_kernels" all | tee "$D/timings.jsonl"
  M=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
  M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
  M=$M,lts__t_sector_hit_rate.pct,smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct
  M=$M,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum
  M=$M,dram__bytes_read.sum,gpu__time_duration.sum
  mkdir -p "$D/raw"
  for v in transpose_naive transpose_padded attn_head_major attn_interleaved; do
    if [[ -n $NCU ]]; then
      timeout 120 "$NCU" --clock-control none --csv --page raw --metrics "$M" "$D/smem_kernels" "$v" \
        >"$D/raw/$v.ncu.csv" 2>"$D/raw/$v.ncu.err"
      log "ncu $v: rc $? $(wc -l <"$D/raw/$v.ncu.csv") lines"
      $PY "$HERE/trim_ncu.py" "$D/raw/$v.ncu.csv" "$D/$v.ncu.csv"
    fi
  done
  rm -f "$D/smem_kernels"
  bench_py "$HERE/summarise.py" "$D" | tee "$D/summary.jsonl"
  pack ncu
fi

if [[ $PHASES == *torch* ]]; then
  D=$W/torch && mkdir -p "$D/raw"
  timeout 330 $PY "$HERE/torch_traps.py" --out "$D/raw" 2>&1 | grep -v "^W[0-9]" | tee "$D/torch_traps.log"
  for f in "$D"/raw/*.trace.json; do
    $PY "$HERE/trim_trace.py" "$f" "$D/$(basename "$f")" --steps 2
  done
  bench_py "$HERE/summarise.py" "$D" | grep -v '"state": "NoData"' | tee "$D/summary.jsonl"
  gzip -q "$D"/raw/*.trace.json
  pack torch
fi

wait_up() {
  for _ in $(seq 1 240); do
    $PY -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$1/health', timeout=2)" 2>/dev/null && return 0
    sleep 1
  done
  log "port $1 never answered" && return 1
}
stop() { for p in "$@"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; }
bench_run() {  # PLAN NAME [mcp-bench run flags]
  local t0=$SECONDS plan=$1 name=$2
  shift 2
  bench_py -c 'import sys; from mcp_bench.cli import main; sys.exit(main(sys.argv[1:]))' \
    run --plan "$plan" -o "$D/$name.result.json" --quiet "$@" 2>&1 | tail -3
  log "$name: $((SECONDS - t0)) s"
}

if [[ $PHASES == *server* ]]; then
  D=$W/server && mkdir -p "$D"
  S=$REPO/measurements/gpu_model_server/server.py
  TRAP=(--preset trap --max-batch 1)  # the traps' model, one request at a time
  # trap 12: a compile per new prompt length; none after a warm-up of every bucket on the serving
  # thread; and the same warm-up on the main thread instead
  for mode in shapes buckets buckets_main_thread; do
    flags=(--compile "${mode%_main_thread}")
    [[ $mode == *main_thread ]] && flags+=(--warmup-thread main)
    $PY "$S" "${TRAP[@]}" --port 8100 "${flags[@]}" >"$D/server_$mode.log" 2>&1 &
    pid=$!
    wait_up 8100 && bench_run "$HERE/trap12_shapes.yaml" "compile_$mode"
    stop $pid
  done
  $PY "$S" "${TRAP[@]}" --port 8101 --instance 0 >"$D/instance0.log" 2>&1 &
  i0=$!
  $PY "$S" "${TRAP[@]}" --port 8102 --instance 1 >"$D/instance1.log" 2>&1 &
  i1=$!
  wait_up 8101 && wait_up 8102
  for weights in 8,1 1,1; do  # trap 10: two processes on one GPU, fed unevenly or evenly
    $PY "$S" --port 8100 --route http://127.0.0.1:8101,http://127.0.0.1:8102 --weights $weights \
      >"$D/front_${weights/,/_}.log" 2>&1 &
    front=$!
    wait_up 8100 && bench_run "$HERE/trap10_instances.yaml" "instances_${weights/,/_}" --gpu-telemetry 50ms
    stop $front
  done
  stop $i0 $i1
  bench_py "$HERE/summarise.py" "$D" | tee "$D/summary.jsonl"
  pack server
fi
log done
