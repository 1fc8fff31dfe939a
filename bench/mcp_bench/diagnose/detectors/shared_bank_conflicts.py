"""Trap 9: shared-memory bank conflicts. From an Nsight Compute report: shared-memory bank
conflicts relative to the shared-memory wavefronts (loads and stores), per kernel. With no
conflict a warp's access is one wavefront; an n-way conflict replays it n times, so the ratio
conflicts / wavefronts goes from 0 towards 1."""

from __future__ import annotations

from collections.abc import Mapping

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.ncu import NcuKernel, NcuReport

CONFLICTS = (
    (
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    ),
    ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",),
)
WAVEFRONTS = (
    (
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    ),
    ("l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",),
)


def _sum(kernel: NcuKernel, options: tuple[tuple[str, ...], ...]) -> float | None:
    for names in options:
        values = [kernel.metrics[n] for n in names if n in kernel.metrics]
        if values:
            return sum(values)
    return None


def kernel_ratios(report: NcuReport, min_wavefronts: float) -> list[tuple[str, float, float, float]]:
    """(kernel, conflicts, wavefronts, ratio) for kernels with enough shared-memory traffic."""
    out = []
    for k in report.kernels:
        c, w = _sum(k, CONFLICTS), _sum(k, WAVEFRONTS)
        if c is None or not w or w < min_wavefronts:
            continue
        out.append((k.name, c, w, c / w))
    return out


@detector(
    9,
    "bank-conflicts",
    "shared-memory bank conflicts",
    advice="Pad shared-memory tiles (one extra column) or swizzle the indices so the threads of a warp "
    "hit different banks.",
    needs="an Nsight Compute CSV with l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_{ld,st}.sum and "
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_{ld,st}.sum (--ncu)",
    thresholds={"conflict_ratio": 0.1, "min_wavefronts": 1000.0},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    if inputs.ncu is None:
        return d.no_data("no Nsight Compute report", t)
    rows = kernel_ratios(inputs.ncu, t["min_wavefronts"])
    if not rows:
        return d.no_data(
            "the report has no kernel with shared-memory conflict and wavefront counters",
            t,
            source=inputs.ncu.source,
        )
    name, c, w, ratio = max(rows, key=lambda r: r[3])
    values: dict[str, float | str | None] = {"kernel": name, "conflicts": c, "wavefronts": w, "ratio": ratio}
    if inputs.ncu_baseline is not None:
        base = kernel_ratios(inputs.ncu_baseline, 0.0)
        if base:
            values["baseline_ratio"] = min(r[3] for r in base)
    summary = f"{name}: {c:.0f} bank conflicts over {w:.0f} shared-memory wavefronts ({ratio:.0%})"
    hit = ratio >= t["conflict_ratio"]
    return (d.found if hit else d.not_found)(summary, t, values=values, source=f"ncu {inputs.ncu.source}")
