#!/usr/bin/env python3
"""GPU load for validating telemetry: idle, a bf16 matrix-multiply loop with a memory ballast, idle.

Prints one JSON object per line: ``ready``, then each phase with its ``time.perf_counter_ns()``
bounds (CLOCK_MONOTONIC on Linux, so another process on the same machine can line them up with its
own samples), then ``load_stats``. Needs only PyTorch with CUDA.

    python3 measurements/gpu_load.py --idle-before 3 --load 8 --idle-after 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch


def emit(**event: object) -> None:
    print(json.dumps(event), flush=True)


def idle(name: str, seconds: float) -> None:
    start = time.perf_counter_ns()
    time.sleep(seconds)
    emit(event="phase", name=name, start_ns=start, end_ns=time.perf_counter_ns())


def load(seconds: float, size: int, ballast_gib: float) -> None:
    """Hold ``ballast_gib`` of device memory and multiply two size x size bf16 matrices until time is up."""
    start = time.perf_counter_ns()
    ballast = torch.ones(int(ballast_gib * (1 << 30)), dtype=torch.uint8, device="cuda")
    a = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
    deadline = start + int(seconds * 1e9)
    products = 0
    busy_start = time.perf_counter_ns()
    while time.perf_counter_ns() < deadline:
        for _ in range(8):
            c = a @ b
        torch.cuda.synchronize()
        products += 8
    busy_ns = time.perf_counter_ns() - busy_start
    del a, b, c, ballast
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    end = time.perf_counter_ns()
    emit(event="phase", name="load", start_ns=start, end_ns=end)
    emit(
        event="load_stats",
        products=products,
        size=size,
        ballast_gib=ballast_gib,
        tflops=2.0 * size**3 * products / (busy_ns / 1e9) / 1e12,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle-before", type=float, default=3.0)
    parser.add_argument("--load", type=float, default=8.0)
    parser.add_argument("--idle-after", type=float, default=3.0)
    parser.add_argument("--size", type=int, default=8192)
    parser.add_argument("--ballast-gib", type=float, default=16.0)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    torch.ones(1, device="cuda").sum().item()  # create the context before the first idle phase
    torch.cuda.synchronize()
    emit(event="ready", device=torch.cuda.get_device_name(0), t_ns=time.perf_counter_ns())
    idle("idle_before", args.idle_before)
    load(args.load, args.size, args.ballast_gib)
    idle("idle_after", args.idle_after)
    return 0


if __name__ == "__main__":
    sys.exit(main())
