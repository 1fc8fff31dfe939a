"""Trap 5: hidden NCCL communication wait in tensor parallelism. From a trace: the collective
kernels' share of each device's step time, and how much of it no compute kernel overlaps; from
telemetry of several GPUs: NVLink throughput while the GPUs' SMs sit idle."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.levels import gpu_field, telemetry_gpus
from mcp_bench.diagnose.sources.trace import Span, Trace, intervals, overlap_us

COLLECTIVE = re.compile(r"(?i)nccl|all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|cross_device_reduce")
KIB = 1024.0


def trace_figures(trace: Trace) -> dict[str, float] | None:
    span = comm = exposed = 0.0
    collectives = 0
    for _, step in trace.steps():
        by_device: dict[str, list[Span]] = defaultdict(list)
        for k in step:
            by_device[k.track[0]].append(k)
        for ks in by_device.values():
            coll = [k for k in ks if COLLECTIVE.search(k.name)]
            compute = [k for k in ks if not COLLECTIVE.search(k.name)]
            collectives += len(coll)
            span += max(k.end_us for k in ks) - min(k.start_us for k in ks)
            c = intervals(coll)
            total = sum(hi - lo for lo, hi in c)
            comm += total
            exposed += total - overlap_us(c, intervals(compute))
    if span <= 0:
        return None
    return {
        "collective_kernels": float(collectives),
        "comm_share": comm / span,
        "exposed_comm_share": exposed / span,
    }


@detector(
    5,
    "nccl-wait",
    "hidden NCCL communication wait in tensor parallelism",
    advice="Overlap communication with compute (async tensor parallelism, sequence parallelism), check "
    "the NVLink topology and NCCL_ALGO/NCCL_PROTO, or lower the tensor-parallel degree.",
    needs="a multi-GPU profiler trace with the collective kernels (--trace), or telemetry of several "
    "GPUs with NVLink counters (--gpu-telemetry on a multi-GPU host)",
    thresholds={"exposed_comm_share": 0.2, "nvlink_active_gbs": 1.0, "sm_idle_share": 0.3},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    trace = inputs.trace
    if trace is not None and trace.kernels:
        fig = trace_figures(trace)
        if fig is not None:
            src = f"trace {trace.source}"
            if not fig["collective_kernels"]:
                return d.not_found(
                    "no collective kernel in the trace: no tensor-parallel traffic", t, values=fig, source=src
                )
            summary = (
                f"collectives take {fig['comm_share']:.0%} of the step, {fig['exposed_comm_share']:.0%} "
                "with no compute beside them"
            )
            # the trap is the wait, not the traffic: communication that compute overlaps costs
            # no step time, however large its share
            hit = fig["exposed_comm_share"] >= t["exposed_comm_share"]
            return (d.found if hit else d.not_found)(summary, t, values=fig, source=src)
    doc = inputs.document
    best = None
    for level in doc.levels if doc else []:
        gpus = telemetry_gpus(level)
        if len(gpus) < 2:
            continue
        sms = [gpu_field(g, "sm_util_pct") for g in gpus]
        links = [
            sum(
                v for v in (gpu_field(g, "nvlink_tx_kib_s"), gpu_field(g, "nvlink_rx_kib_s")) if v is not None
            )
            for g in gpus
        ]
        real = [s for s in sms if s is not None]
        if not real:
            continue
        row = {
            "gpus": float(len(gpus)),
            "nvlink_gbs": sum(links) * KIB / 1e9,
            "sm_idle_share": 1.0 - sum(real) / len(real) / 100.0,
        }
        if best is None or row["nvlink_gbs"] > best[1]["nvlink_gbs"]:
            best = (level.level_label, row)
    if best is None:
        return d.no_data("no trace with kernels and no telemetry of two or more GPUs", t)
    label, row = best
    summary = (
        f"NVLink {row['nvlink_gbs']:.1f} GB/s across {row['gpus']:.0f} GPUs, "
        f"SMs idle {row['sm_idle_share']:.0%}"
    )
    hit = row["nvlink_gbs"] >= t["nvlink_active_gbs"] and row["sm_idle_share"] >= t["sm_idle_share"]
    return (d.found if hit else d.not_found)(
        summary, t, level=label, values=row, source="gpu telemetry (NVML)"
    )
