#!/usr/bin/env python3
"""Cut a PyTorch profiler Chrome trace down to what the trap detectors read, so a real trace can
be kept as a small test fixture.

Kept: GPU kernels and memory copies, GPU-side annotations (``gpu_user_annotation``: the steps and
``record_function`` ranges as the GPU ran them), CPU step and layer annotations, and, only when the
trace has no GPU step annotation, the CUDA launch calls whose ``correlation`` ties a kernel to its
CPU step. Only the first ``--steps`` profiler steps are kept. Every event keeps ``ph``, ``name``,
``cat``, ``ts``, ``dur``, ``pid``, ``tid`` and its ``correlation`` id; names are cut to
``--name-chars``; times are shifted to start at 0 and rounded to 0.001 us. Standard library only.

    python3 measurements/gpu_traps/trim_trace.py big.trace.json[.gz] small.trace.json --steps 2
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from pathlib import Path
from typing import Any

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
GPU_MARK = "gpu_user_annotation"
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}
STEP = re.compile(r"^ProfilerStep#\d+")
LAYER = re.compile(r"(?i)(layer|block)\D*\d")


def _corr(e: dict[str, Any]) -> int | None:
    c = (e.get("args") or {}).get("correlation")
    return c if isinstance(c, int) else None


def _end(e: dict[str, Any]) -> float:
    return float(e["ts"]) + float(e.get("dur", 0.0))


def trim(data: dict[str, Any] | list[Any], steps: int, name_chars: int) -> dict[str, Any]:
    events = [
        e
        for e in (data["traceEvents"] if isinstance(data, dict) else data)
        if isinstance(e, dict) and e.get("ph") == "X" and "ts" in e
    ]
    gpu_steps = sorted(
        (e for e in events if e.get("cat") == GPU_MARK and STEP.match(str(e.get("name")))),
        key=lambda e: e["ts"],
    )
    cpu_steps = sorted(
        (e for e in events if e.get("cat") == "user_annotation" and STEP.match(str(e.get("name")))),
        key=lambda e: e["ts"],
    )
    names = list(dict.fromkeys(e["name"] for e in (gpu_steps or cpu_steps)))[:steps]  # once per stream
    keep_names = set(names)
    cpu_win = [e for e in cpu_steps if e["name"] in keep_names]
    gpu_win = [e for e in gpu_steps if e["name"] in keep_names]
    cpu_lo = min((float(e["ts"]) for e in cpu_win), default=float("-inf"))
    cpu_hi = max((_end(e) for e in cpu_win), default=float("inf"))
    kept: list[dict[str, Any]] = []
    if gpu_win:
        lo, hi = min(float(e["ts"]) for e in gpu_win), max(_end(e) for e in gpu_win)
        for e in events:
            cat = e.get("cat")
            if (cat in GPU_CATS or cat == GPU_MARK) and lo <= float(e["ts"]) < hi:
                kept.append(e)
    else:  # steps only on the CPU: kernels follow their launch's correlation id into the window
        launches = {
            _corr(e): e
            for e in events
            if e.get("cat") in RUNTIME_CATS and _corr(e) is not None and cpu_lo <= float(e["ts"]) < cpu_hi
        }
        for e in events:
            if e.get("cat") in GPU_CATS and _corr(e) in launches:
                kept += [e, launches[_corr(e)]]
        gpu = [e for e in kept if e.get("cat") in GPU_CATS]
        if gpu:
            lo, hi = min(float(e["ts"]) for e in gpu), max(_end(e) for e in gpu)
            kept += [e for e in events if e.get("cat") == GPU_MARK and lo <= float(e["ts"]) < hi]
    for e in events:
        if e.get("cat") == "user_annotation" and cpu_lo <= float(e["ts"]) < cpu_hi:
            name = str(e.get("name"))
            if (STEP.match(name) and name in keep_names) or LAYER.search(name):
                kept.append(e)
    uniq = list({id(e): e for e in kept}.values())
    t0 = min((float(e["ts"]) for e in uniq), default=0.0)
    out = []
    for e in sorted(uniq, key=lambda e: (float(e["ts"]), str(e.get("cat")))):
        row: dict[str, Any] = {
            "ph": "X",
            "cat": e.get("cat"),
            "name": str(e.get("name"))[:name_chars],
            "ts": round(float(e["ts"]) - t0, 3),
            "dur": round(float(e.get("dur", 0.0)), 3),
            "pid": e.get("pid"),
            "tid": e.get("tid"),
        }
        if _corr(e) is not None:
            row["args"] = {"correlation": _corr(e)}
        out.append(row)
    return {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": out}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path)
    parser.add_argument("dst", type=Path)
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--name-chars", type=int, default=96)
    args = parser.parse_args(argv)
    raw = args.src.read_bytes()
    small = trim(
        json.loads(gzip.decompress(raw) if args.src.suffix == ".gz" else raw), args.steps, args.name_chars
    )
    args.dst.write_text(json.dumps(small, separators=(",", ":")) + "\n")
    n = len(small["traceEvents"])
    print(f"{args.src.name}: {n} events kept, {args.dst.stat().st_size} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
