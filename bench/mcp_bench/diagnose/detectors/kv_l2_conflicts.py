"""Trap 2: KV-cache layout causing L2 cache-line conflicts. Read from an Nsight Compute report of
the attention kernels: L2 hit rate and sector efficiency, against a baseline report (another
layout, or the same kernel at a size that fits). Without one, only the sector efficiency is
judged (against a floor): a decode kernel that reads its cache once hits L2 rarely by design (3%
for a healthy paged-attention kernel on an H200), so a low hit rate alone tells nothing."""

from __future__ import annotations

import re
from collections.abc import Mapping

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.ncu import NcuKernel, NcuReport

ATTENTION = re.compile(r"(?i)attn|attention|flash|paged|fmha|mha|kv_?cache")
L2_HIT = ("lts__t_sector_hit_rate.pct",)
SECTOR_EFF = ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",)
SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"


def attention_kernels(report: NcuReport) -> tuple[list[NcuKernel], bool]:
    """The attention kernels with an L2 hit rate; every kernel with one when none is named so."""
    measured = [k for k in report.kernels if k.get(*L2_HIT) is not None]
    named = [k for k in measured if ATTENTION.search(k.name)]
    return (named, True) if named else (measured, False)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def figures(report: NcuReport) -> dict[str, float | None] | None:
    kernels, named = attention_kernels(report)
    if not kernels:
        return None
    hits = [k.get(*L2_HIT) for k in kernels]
    effs = [k.get(*SECTOR_EFF) for k in kernels]
    per_req = []
    for k in kernels:
        s, r = k.get(SECTORS), k.get(REQUESTS)
        if s is not None and r:
            per_req.append(s / r)
    return {
        "kernels": float(len(kernels)),
        "named_attention": 1.0 if named else 0.0,
        "l2_hit_pct": _mean([h for h in hits if h is not None]),
        "sector_efficiency_pct": _mean([e for e in effs if e is not None]),
        "sectors_per_request": _mean(per_req),
    }


@detector(
    2,
    "kv-l2-conflicts",
    "KV-cache layout causing L2 cache-line conflicts",
    advice="Change the KV-cache layout (page/block size, head-major or padded strides) so concurrent "
    "attention blocks stop mapping onto the same L2 lines; compare the L2 hit rate again.",
    needs="an Nsight Compute CSV of the attention kernels with lts__t_sector_hit_rate.pct (--ncu), "
    "ideally a baseline report too (--ncu-baseline)",
    thresholds={"l2_hit_drop_pct": 10.0, "sector_eff_drop_pct": 20.0, "sector_eff_min_pct": 50.0},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    if inputs.ncu is None:
        return d.no_data("no Nsight Compute report", t)
    fig = figures(inputs.ncu)
    if fig is None or fig["l2_hit_pct"] is None:
        return d.no_data("the Nsight Compute report has no L2 hit rate", t, source=inputs.ncu.source)
    src = f"ncu {inputs.ncu.source}"
    values: dict[str, float | None] = dict(fig)
    hit = fig["l2_hit_pct"]
    base = figures(inputs.ncu_baseline) if inputs.ncu_baseline is not None else None
    if base is not None and base["l2_hit_pct"] is not None:
        src += f" against {inputs.ncu_baseline.source if inputs.ncu_baseline else ''}"
        drop = base["l2_hit_pct"] - hit
        values.update(baseline_l2_hit_pct=base["l2_hit_pct"], l2_hit_drop_pct=drop)
        eff_drop = None
        if fig["sector_efficiency_pct"] is not None and base["sector_efficiency_pct"] is not None:
            eff_drop = base["sector_efficiency_pct"] - fig["sector_efficiency_pct"]
            values.update(
                baseline_sector_efficiency_pct=base["sector_efficiency_pct"], sector_eff_drop_pct=eff_drop
            )
        summary = f"L2 hit rate {hit:.1f}% against {base['l2_hit_pct']:.1f}% in the baseline"
        if eff_drop is not None:  # a layout that wastes most of each sector shows here, not in hits
            summary += (
                f", sector efficiency {fig['sector_efficiency_pct']:.1f}% against "
                f"{base['sector_efficiency_pct']:.1f}%"
            )
        bad = drop >= t["l2_hit_drop_pct"] or (eff_drop is not None and eff_drop >= t["sector_eff_drop_pct"])
    else:
        eff = fig["sector_efficiency_pct"]
        if eff is None:
            return d.no_data(
                f"L2 hit rate {hit:.1f}% with no baseline and no sector efficiency: a low hit rate "
                "alone does not tell a conflicting layout from a kernel that reads its data once",
                t,
                values=values,
                source=src,
                needs="a baseline report (--ncu-baseline) or "
                "smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct in the report",
            )
        summary = (
            f"sector efficiency {eff:.1f}% (no baseline: judged against {t['sector_eff_min_pct']:g}%), "
            f"L2 hit rate {hit:.1f}%"
        )
        bad = eff < t["sector_eff_min_pct"]
    return (d.found if bad else d.not_found)(summary, t, values=values, source=src)
