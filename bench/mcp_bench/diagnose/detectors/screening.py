"""The bottleneck-layer screening (the reference stress guide's first pass), per level from GPU
telemetry: compute bound (SM utilisation above 95% while NVLink carries under 15 GB/s), transfer
bound (PCIe above 22 GB/s in either direction), or neither; it says which layer to look at first."""

from __future__ import annotations

from collections.abc import Mapping

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.levels import gpu_field, telemetry_gpus

KIB = 1024.0


def classify(sm_pct: float, nvlink_gbs: float | None, pcie_gbs: float | None, t: Mapping[str, float]) -> str:
    if pcie_gbs is not None and pcie_gbs > t["pcie_transfer_gbs"]:
        return "transfer"
    if sm_pct > t["sm_compute_pct"] and (nvlink_gbs is None or nvlink_gbs < t["nvlink_max_gbs"]):
        return "compute"
    return "neither"


@detector(
    0,
    "bottleneck-layer",
    "bottleneck layer screening",
    advice="Start where it points: kernels, batching and precision when compute bound; data movement "
    "(pinned memory, larger transfers, fewer host round trips) when transfer bound; else the server's "
    "queueing and the traps below.",
    needs="GPU telemetry of the serving GPUs per level (mcp-bench run --gpu-telemetry on the GPU host)",
    thresholds={"sm_compute_pct": 95.0, "nvlink_max_gbs": 15.0, "pcie_transfer_gbs": 22.0},
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    doc = inputs.document
    rows = []
    for level in doc.levels if doc else []:
        for g in telemetry_gpus(level):
            sm = gpu_field(g, "sm_util_pct")
            if sm is None:
                continue
            nv_real = [
                v for v in (gpu_field(g, f) for f in ("nvlink_tx_kib_s", "nvlink_rx_kib_s")) if v is not None
            ]
            pcie_real = [
                v for v in (gpu_field(g, f) for f in ("pcie_tx_kb_s", "pcie_rx_kb_s")) if v is not None
            ]
            nvlink_gbs = sum(nv_real) * KIB / 1e9 if nv_real else None
            pcie_gbs = max(pcie_real) * 1e3 / 1e9 if pcie_real else None
            kind = classify(sm, nvlink_gbs, pcie_gbs, t)
            rows.append((level.level_label, g.get("index"), kind, sm, nvlink_gbs, pcie_gbs))
    if not rows:
        return d.no_data("no SM utilisation in the run's telemetry", t)
    bound = [r for r in rows if r[2] != "neither"]
    label, index, kind, sm, nvlink, pcie = bound[0] if bound else max(rows, key=lambda r: r[3])
    gpu = index
    values = {"bound": kind, "gpu": gpu, "sm_util_pct": sm, "nvlink_gbs": nvlink, "pcie_gbs": pcie}
    src = "gpu telemetry (NVML)"
    if bound:
        what = "compute bound: look at kernels first" if kind == "compute" else "transfer bound: PCIe first"
        return d.found(f"GPU {gpu} at {label}: {what}", t, level=label, values=values, source=src)
    return d.not_found(
        f"neither compute nor transfer bound (highest SM {sm:.0f}% at {label}): look at the serving layer",
        t,
        level=label,
        values=values,
        source=src,
    )
