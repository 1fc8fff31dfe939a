"""Trap 1: kernel fusion split (operator granularity mismatch). An unfused decode step is many
tiny kernels with the GPU idle between their launches; read from a profiler trace: kernels per
step, the share of tiny kernels and the launch gaps as a share of the step's GPU time."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.trace import Span, Trace, union_us


def step_figures(trace: Trace, tiny_us: float) -> dict[str, float] | None:
    """Per step and device: kernel count, tiny kernels, GPU span and idle gaps, summed."""
    kernels = tiny = 0
    span = busy = 0.0
    counts = []
    for _, step in trace.steps():
        by_device: dict[str, list[Span]] = defaultdict(list)
        for k in step:
            by_device[k.track[0]].append(k)
        for ks in by_device.values():
            counts.append(len(ks))
            kernels += len(ks)
            tiny += sum(1 for k in ks if k.dur_us < tiny_us)
            span += max(k.end_us for k in ks) - min(k.start_us for k in ks)
            busy += union_us(ks)
    if not kernels or span <= 0:
        return None
    return {
        "steps": float(len(counts)),
        "kernels_per_step": float(statistics.median(counts)),
        "tiny_share": tiny / kernels,
        "gap_share": (span - busy) / span,
        "mean_kernel_us": sum(k.dur_us for k in trace.kernels) / len(trace.kernels),
    }


@detector(
    1,
    "kernel-fusion",
    "kernel fusion split / operator granularity mismatch",
    advice="Fuse the small kernels (torch.compile, TensorRT-LLM fused plugins) or capture the decode "
    "step in a CUDA graph, so launch gaps stop dominating the step.",
    needs="a profiler trace of decode steps (--trace: PyTorch profiler or Nsight Systems as Chrome trace)",
    thresholds={"tiny_kernel_us": 10.0, "tiny_share": 0.4, "gap_share": 0.25},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    trace = inputs.trace
    if trace is None or not trace.kernels:
        return d.no_data("no profiler trace with GPU kernels", t)
    fig = step_figures(trace, t["tiny_kernel_us"])
    if fig is None:
        return d.no_data("the trace's kernels span no time", t, source=trace.source)
    summary = (
        f"{fig['kernels_per_step']:.0f} kernels per step, {fig['tiny_share']:.0%} under "
        f"{t['tiny_kernel_us']:g} us, GPU idle between launches {fig['gap_share']:.0%} of the step"
    )
    hit = fig["tiny_share"] >= t["tiny_share"] and fig["gap_share"] >= t["gap_share"]
    return (d.found if hit else d.not_found)(summary, t, values=fig, source=f"trace {trace.source}")
