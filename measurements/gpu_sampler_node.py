#!/usr/bin/env python3
"""The serving GPUs' sampler (``mcp-bench gpu-sampler``) on a real GPU, asked as a shard asks it.

Starts the sampler service (NVML every ``--interval``, default 5 ms) on 127.0.0.1, runs
``measurements/gpu_load.py`` (idle, bf16 matrix-multiply loop with a memory ballast, idle) in
another process, turns each phase's monotonic bounds into wall-clock ones, and asks the service
for each phase's window over HTTP (``GET /window``), exactly as the shards' observer does. Prints
per phase the SM utilisation (mean, peak), memory peak, power mean, samples against the samples
the interval promises, and the sampler's own cost; then tells the service it is done and prints
its termination line. Needs PyTorch with CUDA, ``pynvml`` and ``aiohttp``; ``bench/`` is put on
the path, so nothing else of the project must be installed.

    python3 measurements/gpu_sampler_node.py --out /tmp/gpu-sampler
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

from mcp_bench.telemetry.nvml import GpuSampler  # noqa: E402
from mcp_bench.telemetry.serve import SamplerService, serve  # noqa: E402


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        body: dict[str, Any] = json.loads(resp.read())
        return body


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--interval", type=float, default=0.005)
    parser.add_argument("--port", type=int, default=19401)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--load", type=float, default=6.0)
    args = parser.parse_args()

    service = SamplerService(GpuSampler(args.interval, capacity=200_000), "this-node", clients=1)
    done: list[str] = []
    thread = threading.Thread(
        target=lambda: done.append(asyncio.run(serve(service, "127.0.0.1", args.port, 600))), daemon=True
    )
    thread.start()
    base = f"http://127.0.0.1:{args.port}"
    for _ in range(200):
        try:
            health = _get(f"{base}/healthz")
            break
        except OSError:
            time.sleep(0.05)
    print("health:", json.dumps(health))
    offset = time.time_ns() - time.perf_counter_ns()  # this machine's clocks, as a shard's would be
    load = subprocess.run(
        [
            sys.executable,
            str(REPO / "measurements" / "gpu_load.py"),
            "--idle-before",
            "3",
            "--load",
            str(args.load),
            "--idle-after",
            "3",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    phases = [json.loads(line) for line in load.stdout.splitlines() if '"phase"' in line]
    results: dict[str, Any] = {"health": health, "interval_s": args.interval, "phases": {}}
    for phase in phases:
        start, end = phase["start_ns"] + offset, phase["end_ns"] + offset
        window = _get(f"{base}/window?start_unix_ns={start}&end_unix_ns={end}")
        results["phases"][phase["name"]] = window
        if window.get("status") != "ok":
            print(f"{phase['name']:12s} {window.get('status')}: {window.get('reason')}")
            continue
        gpu = window["gpus"][0]
        fields = gpu["fields"]
        sm, mem, power = fields["sm_util_pct"], fields["mem_used_bytes"], fields["power_w"]
        expected = (end - start) / 1e9 / args.interval
        line = f"{phase['name']:12s} {(end - start) / 1e9:5.2f} s"
        line += f"  SM mean {sm['mean']:5.1f}% peak {sm['peak']:5.1f}%"
        line += f"  mem peak {mem['peak'] / 2**30:6.2f} GiB ({gpu.get('memory_used_peak_pct', 0):4.1f}%)"
        line += f"  power mean {power.get('mean', float('nan')):6.1f} W"
        print(f"{line}  samples {window['samples']} of {expected:.0f}")
    cost = results["phases"][phases[-1]["name"]].get("sampler_cost", {})
    print("sampler cost:", json.dumps(cost))
    urllib.request.urlopen(
        urllib.request.Request(f"{base}/done?client=check", method="POST"), timeout=10
    ).read()
    thread.join(30)
    print("termination:", done[0] if done else "the service did not stop")
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "gpu_sampler_node.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
