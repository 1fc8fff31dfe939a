#!/usr/bin/env bash
# Issue 10 in one device call on a host with 2 or more GPUs (nvidia-h200-x2, -x4, -x8): the GPU
# model server in tensor-parallel mode (../gpu_model_server/server.py --tensor-parallel N, one rank
# per GPU, NCCL) measured by mcp-bench with NVML telemetry of every GPU at 5 ms, balanced/overlapped
# beside its uneven and serialised twins (trap 5), then two single-GPU instances fed 8:1 and 1:1
# (trap 10 across GPUs). For each: nvidia-smi --query-gpu sampled alongside (cross-check of the
# per-GPU readings), the NVLink data counters (nvidia-smi nvlink -gt d) before and after, the
# server's /metrics, the profiler's traces per rank trimmed (../gpu_traps/trim_trace.py) and merged (merge_traces.py), and
# `mcp-bench diagnose` over the traces and the result documents. summarise.py writes the table.
#
# NVLink multicast stays off (the device notes: it can put a shared host's GPUs out of service):
# NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 are exported
# here, and the server forces them again in every rank.
#
# Needs PyTorch with CUDA and NCCL, aiohttp, and the benchmark's own dependencies: with
# WHEELS="DIR [DIR...]" the wheels there are installed into a private folder first (on the
# device image: google-crc32c, hdrhistogram, pydantic, pydantic-core, annotated-types,
# typing-inspection, typing-extensions for Python 3.12, as for ../gpu_model_server/run.sh).
# Leaves in OUT: run.log, table.md, summary.json and multi_gpu.tar.gz (every run's folder:
# result.json, smi.csv, nvlink_*.txt, metrics.txt, info.json, server.log, trimmed and merged
# traces, diagnose_*.json; the raw traces gzipped). About 6 minutes on two H200s (estimate).
#
#   measurements/multi_gpu/run_x2.sh OUT
#   env: WHEELS="DIR [DIR...]"  PYTHON=python3 (the servers')  BENCH_PYTHON=$PYTHON (mcp-bench's)
#        NGPU=(all)  PRESET=large  TELEMETRY=5ms  SMI_MS=100  PLAN=tp_levels.yaml
#        CONFIGS="balanced:overlapped uneven:overlapped balanced:serialised"
#        PROFILE_AT=64 (batch at which the traces are taken)  PROFILE_STEPS=4  TRAP10=1  BUDGET_S=500
#        SMOKE_ONE_GPU=1: on a one-GPU host, the server with one rank (CUDA events, the profiler's
#          CUDA trace, the preset's memory; one rank has no process group, so no NCCL) checked
#          before the multi-GPU call
#        DEVICE=cuda (cpu: a dry run of this script's plumbing with gloo on a host without GPUs)
set -u
OUT=${1:?usage: run_x2.sh OUT}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
GT=$REPO/measurements/gpu_traps
GMS=$REPO/measurements/gpu_model_server/server.py
PY=${PYTHON:-python3}
BPY=${BENCH_PYTHON:-$PY}
DEVICE=${DEVICE:-cuda}
NGPU=${NGPU:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')}
PRESET=${PRESET:-large}
TELEMETRY=${TELEMETRY:-5ms}
SMI_MS=${SMI_MS:-100}
CONFIGS=${CONFIGS:-balanced:overlapped uneven:overlapped balanced:serialised}
PROFILE_AT=${PROFILE_AT:-64}
PROFILE_STEPS=${PROFILE_STEPS:-4}
TRAP10=${TRAP10:-1}
BUDGET_S=${BUDGET_S:-500}  # the device call has 600 s: what would start later is skipped, and OUT still packed
PLAN=${PLAN:-$HERE/tp_levels.yaml}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TZ=UTC PYTHONUNBUFFERED=1  # nvidia-smi's timestamps are local time: make that UTC
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d)/multi_gpu
mkdir -p "$W"
log() { echo "[$(date +%T)] $*"; }

SITE=$REPO/bench
if [[ -n ${WHEELS:-} ]]; then
  whl=()
  for d in $WHEELS; do whl+=("$d"/*.whl); done
  $BPY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$W/../site" "${whl[@]}" \
    && SITE=$W/../site:$REPO/bench
fi
BENCH=(env "PYTHONPATH=$SITE" "$BPY" -c 'import sys; from mcp_bench.cli import main; sys.exit(main(sys.argv[1:]))')
bench() { "${BENCH[@]}" "$@"; }
get() { $PY -c 'import sys, urllib.request as u; sys.stdout.write(u.urlopen(sys.argv[1], timeout=60).read().decode())' "$1"; }
wait_up() {  # PORT PID
  for _ in $(seq 1 360); do
    get "http://127.0.0.1:$1/health" >/dev/null 2>&1 && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.5
  done
  log "port $1 never answered" && return 1
}
stop() {  # SIGTERM, 30 s to finish, then SIGKILL (a rank whose parent is gone exits by itself)
  for p in "$@"; do kill "$p" 2>/dev/null; done
  for p in "$@"; do
    for _ in $(seq 1 60); do kill -0 "$p" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
}
SMI=
smi_start() {  # CSV of every GPU every SMI_MS ms, beside mcp-bench's own NVML sampler
  nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu,utilization.memory,memory.used,memory.total,power.draw,clocks.sm \
    --format=csv,noheader,nounits -lms "$SMI_MS" >"$1" 2>&1 &
  SMI=$!
}
smi_stop() { [[ -n $SMI ]] && stop "$SMI"; SMI=; }
nvlink() { nvidia-smi nvlink -gt d >"$1" 2>&1 || true; }  # cumulative data counters per link, KiB
diag() {  # NAME ARGS...: every finding as JSON, and trap 5's and 10's lines in the log
  local name=$1
  shift
  bench diagnose "$@" --json >"$D/$name.json" 2>"$D/$name.err"
  $BPY - "$D/$name.json" "$(basename "$D") $name" <<'EOF'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(f"{sys.argv[2]}: no findings (see the .err beside it)")
for f in rows:
    if f["trap"] in (5, 10):
        print(f"{sys.argv[2]}: trap {f['trap']} {f['state']}: {f['summary']}")
EOF
}

main() {
log "host: $(nproc) cores, $NGPU GPUs; $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | sort | uniq -c | tr -s ' ')"
nvidia-smi topo -m >"$W/topo.txt" 2>&1
nvidia-smi nvlink -s >"$W/nvlink_status.txt" 2>&1
log "python: $($PY -c 'import sys, torch, aiohttp
nccl = torch.cuda.nccl.version() if torch.cuda.is_available() else None
print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "nccl", nccl,
      "devices", torch.cuda.device_count(), "aiohttp", aiohttp.__version__)')"
log "multicast off: NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE TORCH_SYMM_MEM_DISABLE_MULTICAST=$TORCH_SYMM_MEM_DISABLE_MULTICAST NVSHMEM_DISABLE_NVLS=$NVSHMEM_DISABLE_NVLS"
if ((NGPU < 2)); then
  if [[ ${SMOKE_ONE_GPU:-0} != 1 ]]; then
    log "$NGPU GPU(s): trap 5 and fairness across GPUs need two or more; stopping (SMOKE_ONE_GPU=1 runs the CUDA paths with one rank)"
    return 1
  fi
  log "SMOKE_ONE_GPU=1: one rank on one GPU, no trap 10: a check of the CUDA paths, not a measurement of issue 10"
  NGPU=1 TRAP10=0
fi

for cfg in $CONFIGS; do
  split=${cfg%%:*} ar=${cfg##*:}
  if ((SECONDS + 100 > BUDGET_S)); then log "tp_${split}_${ar} skipped: ${SECONDS} s gone of ${BUDGET_S}" && continue; fi
  D=$W/tp_${split}_${ar}
  mkdir -p "$D/raw"
  log "== tp_${split}_${ar}: $NGPU ranks, preset $PRESET"
  t0=$SECONDS
  $PY "$GMS" --tensor-parallel "$NGPU" --device "$DEVICE" --preset "$PRESET" --split "$split" --allreduce "$ar" --port 8200 \
    --max-batch 128 --prefill-tokens 4096 --threads 2 \
    --profile "$D/raw" --profile-at-batch "$PROFILE_AT" --profile-steps "$PROFILE_STEPS" >"$D/server.log" 2>&1 &
  pid=$!
  if ! wait_up 8200 $pid; then tail -40 "$D/server.log"; stop $pid; continue; fi
  log "server up in $((SECONDS - t0)) s: $(get http://127.0.0.1:8200/debug/info | tee "$D/info.json" | head -c 600)"
  nvlink "$D/nvlink_before.txt"
  smi_start "$D/smi.csv"
  t0=$SECONDS
  timeout 240 "${BENCH[@]}" run --plan "$PLAN" -o "$D/result.json" --gpu-telemetry "$TELEMETRY" --quiet
  log "mcp-bench run rc $? in $((SECONDS - t0)) s"
  smi_stop
  nvlink "$D/nvlink_after.txt"
  get http://127.0.0.1:8200/metrics >"$D/metrics.txt"
  grep -E '^mcp_tp_rank_(collective_share|step_seconds_total|collective_seconds_total)' "$D/metrics.txt"
  stop $pid
  for f in "$D"/raw/tp_rank*.trace.json; do
    [[ -s $f ]] || continue
    $PY "$GT/trim_trace.py" "$f" "$D/$(basename "$f")" --steps "$PROFILE_STEPS"
    diag "diagnose_$(basename "$f" .trace.json)" --trace "$D/$(basename "$f")"
  done
  if compgen -G "$D/tp_rank*.trace.json" >/dev/null; then
    $PY "$HERE/merge_traces.py" "$D/merged.trace.json" "$D"/tp_rank*.trace.json
    diag diagnose_merged --trace "$D/merged.trace.json"
  else
    log "no trace was written (did the batch reach $PROFILE_AT?)"
  fi
  [[ -s $D/result.json ]] && diag diagnose_result "$D/result.json"
  gzip -q "$D"/raw/*.json 2>/dev/null
done

if [[ $TRAP10 == 1 ]] && ((SECONDS + 80 < BUDGET_S)); then
  D=$W/trap10_gpus
  mkdir -p "$D"
  log "== trap 10: an instance on GPU 0 and one on GPU 1 behind a weighted front"
  TRAP=(--preset trap --max-batch 1)  # the traps' model, one request at a time per instance
  CUDA_VISIBLE_DEVICES=0 $PY "$GMS" "${TRAP[@]}" --device "$DEVICE" --port 8101 --instance 0 >"$D/instance0.log" 2>&1 &
  i0=$!
  CUDA_VISIBLE_DEVICES=1 $PY "$GMS" "${TRAP[@]}" --device "$DEVICE" --port 8102 --instance 1 >"$D/instance1.log" 2>&1 &
  i1=$!
  if wait_up 8101 $i0 && wait_up 8102 $i1; then
    for weights in 8,1 1,1; do
      n=instances_${weights/,/_}
      $PY "$GMS" --port 8100 --route http://127.0.0.1:8101,http://127.0.0.1:8102 \
        --weights "$weights" >"$D/front_$n.log" 2>&1 &
      front=$!
      if wait_up 8100 $front; then
        smi_start "$D/$n.smi.csv"
        timeout 120 "${BENCH[@]}" run --plan "$HERE/trap10_gpus.yaml" -o "$D/$n.result.json" --gpu-telemetry "$TELEMETRY" --quiet
        smi_stop
        [[ -s $D/$n.result.json ]] && diag "diagnose_$n" "$D/$n.result.json"
      fi
      stop $front
    done
  fi
  stop $i0 $i1
else
  log "trap 10 skipped (TRAP10=$TRAP10, ${SECONDS} s gone)"
fi

PYTHONPATH=$SITE $BPY "$HERE/summarise.py" "$W" --json "$OUT/summary.json" | tee "$OUT/table.md"
tar -C "$(dirname "$W")" -czf "$OUT/multi_gpu.tar.gz" multi_gpu
log "packed: $(du -sh "$OUT/multi_gpu.tar.gz" | cut -f1); done in $SECONDS s"
}

main 2>&1 | tee "$OUT/run.log"
