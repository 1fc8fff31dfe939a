#!/usr/bin/env python3
"""Join the per-rank PyTorch profiler traces of ``../gpu_model_server/server.py --tensor-parallel N
--profile`` into one Chrome trace, so ``mcp-bench diagnose --trace`` judges every GPU of the step
at once.

Why: trap 5's detector groups kernels by device through the trace's process id, which the PyTorch
profiler sets to the CUDA device index on GPU events. With one process per GPU the indices differ,
but a rank started with ``CUDA_VISIBLE_DEVICES`` set to its own GPU calls it device 0 too, and two
ranks' kernels would then fall on one track. Here every GPU event (kernels, copies, memsets, GPU
annotations) gets ``pid`` ``"rank<R>:<pid>"``; CPU events keep theirs (the operating system's
process ids differ anyway). Each rank's times are shifted to start at 0, since only times within
one device's step are compared. Standard library only.

    python3 measurements/multi_gpu/merge_traces.py merged.trace.json tp_rank0.trace.json tp_rank1.trace.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_kernel", "gpu_kernel"}
RANK = re.compile(r"rank(\d+)")


def _events(data: Any) -> list[dict[str, Any]]:
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    return [e for e in events if isinstance(e, dict)]


def merge(traces: list[tuple[int, Any]]) -> dict[str, Any]:
    """``traces``: (rank, parsed trace) pairs; one trace with a device track per rank's GPU."""
    out: list[dict[str, Any]] = []
    for rank, data in traces:
        events = [e for e in _events(data) if "ts" in e]
        t0 = min((float(e["ts"]) for e in events if e.get("ph") in ("X", "B")), default=0.0)
        for e in events:
            row = dict(e)
            row["ts"] = round(float(e["ts"]) - t0, 3)
            if str(e.get("cat", "")).lower() in GPU_CATS:
                row["pid"] = f"rank{rank}:{e.get('pid')}"
            out.append(row)
    return {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": out}


def _load(path: Path) -> Any:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if path.suffix == ".gz" else raw)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("dst", type=Path)
    parser.add_argument("src", type=Path, nargs="+", help="tp_rank<R>.trace.json[.gz], any order")
    args = parser.parse_args(argv)
    traces = []
    for i, p in enumerate(args.src):
        m = RANK.search(p.name)
        traces.append((int(m.group(1)) if m else i, _load(p)))
    merged = merge(sorted(traces, key=lambda t: t[0]))
    args.dst.write_text(json.dumps(merged, separators=(",", ":")) + "\n")
    print(f"{args.dst.name}: {len(merged['traceEvents'])} events from {len(traces)} ranks", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
