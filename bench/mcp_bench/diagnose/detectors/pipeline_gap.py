"""Trap 7: prefetch / compute pipeline gap. The GPU waits for its next input although work is
queued: SM utilisation drops to nothing between batches while the server's queue is not empty
(GPU telemetry at 5 ms beside the server's queue gauges or Triton's queue time), or, in a trace,
input copies that no kernel overlaps (a serial copy-then-compute pipeline)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.levels import (
    gauge_series,
    probe_deltas,
    telemetry_gpus,
    timeline_sum,
    triton_models,
)
from mcp_bench.diagnose.sources.trace import Span, Trace, intervals, overlap_us
from mcp_bench.results.document import LevelResult

WAITING = ("vllm:num_requests_waiting", "nv_inference_pending_request_count")


def copy_figures(trace: Trace) -> dict[str, float] | None:
    """Per device: copy time, the part of it no kernel overlaps, and the span of both."""
    if not trace.copies or not trace.kernels:
        return None
    by_device: dict[str, tuple[list[Span], list[Span]]] = defaultdict(lambda: ([], []))
    for c in trace.copies:
        by_device[c.track[0]][0].append(c)
    for k in trace.kernels:
        by_device[k.track[0]][1].append(k)
    copy = exposed = span = 0.0
    for copies, kernels in by_device.values():
        if not copies or not kernels:
            continue
        ci = intervals(copies)
        total = sum(hi - lo for lo, hi in ci)
        copy += total
        exposed += total - overlap_us(ci, intervals(kernels))
        every = copies + kernels
        span += max(s.end_us for s in every) - min(s.start_us for s in every)
    if span <= 0 or copy <= 0:
        return None
    return {"copy_share": copy / span, "exposed_copy_share": exposed / span, "overlapped": 1 - exposed / copy}


def queue_evidence(level: LevelResult) -> tuple[bool, str] | None:
    """(was work waiting during the level, from what); None when the run cannot tell."""
    for name, delta in probe_deltas(level).items():
        tl = timeline_sum(delta, *WAITING)
        if tl is not None and any(v is not None for v in tl[1]):
            return any((v or 0) > 0 for v in tl[1]), f"{name} queue gauge sampled during the level"
        for g in WAITING:
            series = gauge_series(delta, g)
            if series:
                return any(
                    (s.get("max") or 0) > 0 for s in series
                ), f"{name} queue gauge at the level's edges"
    for m in triton_models(level):
        per_request_ms = m.queue_us / m.requests / 1e3 if m.requests else 0.0
        return per_request_ms > 1.0, f"{m.source} queue time {per_request_ms:.2f} ms per request"
    return None


@detector(
    7,
    "pipeline-gap",
    "prefetch / compute pipeline gap",
    advice="Overlap input preparation with compute: pinned host memory, a separate copy stream and "
    "prefetching of the next batch (double buffering).",
    needs="GPU telemetry at 5-10 ms (--gpu-telemetry 5ms) of the serving GPUs plus the server's queue "
    "(--server-metrics or --triton-stats), or a trace with memory copies and kernels (--trace)",
    thresholds={"sm_idle_share": 0.2, "exposed_copy_share": 0.15},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    trace = inputs.trace
    if trace is not None:
        fig = copy_figures(trace)
        if fig is not None:
            summary = (
                f"copies take {fig['copy_share']:.0%} of the GPU span, "
                f"{fig['exposed_copy_share']:.0%} with no "
                f"kernel beside them ({fig['overlapped']:.0%} overlapped)"
            )
            hit = fig["exposed_copy_share"] >= t["exposed_copy_share"]
            return (d.found if hit else d.not_found)(summary, t, values=fig, source=f"trace {trace.source}")
    doc = inputs.document
    best = None
    for level in doc.levels if doc else []:
        idle: list[dict[str, Any]] = [
            g["sm_idle"]
            for g in telemetry_gpus(level)
            if isinstance(g.get("sm_idle"), dict) and g["sm_idle"].get("status") == "ok"
        ]
        if not idle:
            continue
        evidence = queue_evidence(level)
        if evidence is None:
            continue
        worst = max(idle, key=lambda i: float(i["share"]))
        row = (level.level_label, float(worst["share"]), float(worst.get("longest_ms") or 0.0), evidence)
        if best is None or (row[3][0], row[1]) > (best[3][0], best[1]):
            best = row
    if best is None:
        return d.no_data("no SM-idle telemetry beside a queue reading, and no trace with copies", t)
    label, share, longest, (waiting, qsrc) = best
    values = {
        "sm_idle_share": share,
        "longest_gap_ms": longest,
        "queue_non_empty": "yes" if waiting else "no",
    }
    src = f"gpu telemetry (NVML) and {qsrc}"
    queue = "not empty" if waiting else "empty"
    summary = f"SMs idle {share:.0%} of the samples (longest {longest:.0f} ms), queue {queue}"
    if waiting and share >= t["sm_idle_share"]:
        return d.found(summary, t, level=label, values=values, source=src)
    return d.not_found(summary, t, level=label, values=values, source=src)
