#!/usr/bin/env python3
"""Prints the reference table (P50/P95/P99 latency, throughput, GPU memory peak %) of one or more
``mcp-bench run`` results against the GPU model server, with what the server itself saw beside it
(the most requests running and waiting, the KV-cache usage sampled during each level) and the
GPU's SM utilisation, as Markdown. Reads the documents through mcp-bench's own reader, so a
result whose checksum does not match is refused.

    python3 measurements/gpu_model_server/summarise.py text.result.json multimodal.result.json
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from mcp_bench.diagnose.sources.levels import probe_deltas, timeline_sum
from mcp_bench.results.document import LevelResult, PercentileTable, loads_document
from mcp_bench.results.summary import gpu_field_mean, gpu_memory_peak_pct


def _fmt(v: float | None, digits: int = 1) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:,.{digits}f}"


def _timeline_max(level: LevelResult, family: str) -> float | None:
    best: float | None = None
    for delta in probe_deltas(level).values():
        tl = timeline_sum(delta, family)
        if tl is None:
            continue
        real = [v for v in tl[1] if v is not None]
        if real:
            best = max(real) if best is None else max(best, *real)
    return best


def _gpu_field_max(telemetry: Any, field: str) -> float | None:
    """Highest reading of a sampled field over the level's GPUs (the mean hides bursts)."""
    if not isinstance(telemetry, dict):
        return None
    peaks = [
        (g.get("fields") or {}).get(field, {}).get("peak")
        for g in telemetry.get("gpus", [])
        if isinstance(g, dict)
    ]
    real = [float(p) for p in peaks if isinstance(p, int | float)]
    return max(real) if real else None


def rows(path: Path) -> list[list[str]]:
    doc = loads_document(path.read_text(encoding="utf-8"))
    workload = doc.plan.labels.get("workload", path.name.split(".")[0])
    out = []
    for lv in doc.levels:
        none = PercentileTable()
        e2e, ttft, tpot = (lv.latency.get(k, none) for k in ("e2e", "ttft", "tpot"))
        errors = sum(lv.errors.values()) if isinstance(lv.errors, dict) else 0
        out.append(
            [
                str(workload),
                str(lv.concurrency),
                _fmt(e2e.p50_ms),
                _fmt(e2e.p95_ms),
                _fmt(e2e.p99_ms),
                _fmt(ttft.p50_ms),
                _fmt(ttft.p99_ms),
                _fmt(tpot.p50_ms, 2),
                _fmt(lv.throughput_rps),
                _fmt(lv.output_token_throughput, 0),
                _fmt(gpu_memory_peak_pct(lv.telemetry), 2),
                _fmt(gpu_field_mean(lv.telemetry, "sm_util_pct"), 0),
                _fmt(_gpu_field_max(lv.telemetry, "power_w"), 0),
                _fmt(_timeline_max(lv, "vllm:num_requests_running"), 0),
                _fmt(_timeline_max(lv, "vllm:num_requests_waiting"), 0),
                f"{lv.completed:,}",
                str(errors),
            ]
        )
    return out


HEADER = [
    "workload",
    "concurrency",
    "e2e P50 ms",
    "e2e P95 ms",
    "e2e P99 ms",
    "TTFT P50 ms",
    "TTFT P99 ms",
    "TPOT P50 ms",
    "req/s",
    "output tok/s",
    "GPU mem peak %",
    "SM util mean %",
    "power peak W",
    "server running max",
    "server waiting max",
    "completed",
    "errors",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("results", nargs="+", type=Path)
    args = parser.parse_args(argv)
    table = [HEADER, ["---"] * len(HEADER)]
    for p in args.results:
        table += rows(p)
    sys.stdout.write("".join("| " + " | ".join(r) + " |\n" for r in table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
