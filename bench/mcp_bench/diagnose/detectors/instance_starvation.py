"""Trap 10: model-instance GPU starvation. Some instances (or GPUs) do the work while others
idle. Per level, the utilisation share of each instance: the server's per-instance busy counters
(``*instance_busy_seconds_total``), its per-GPU utilisation gauges (Triton's
``nv_gpu_utilization``, DCGM's ``DCGM_FI_DEV_GPU_UTIL``; sampled during the level when the run
sampled them), or the run's own GPU telemetry; judged with the fairness figures of
:mod:`mcp_bench.fairness` (std < 0.18, min/max > 0.65, Jain > 0.85) and no instance
under 15% while another is busy."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_bench.diagnose.finding import Finding
from mcp_bench.diagnose.inputs import DiagnoseInputs
from mcp_bench.diagnose.registry import Detector, detector
from mcp_bench.diagnose.sources.levels import counter_series, gauge_series, probe_deltas, timeline
from mcp_bench.fairness import fairness
from mcp_bench.results.document import LevelResult

GAUGES = (("nv_gpu_utilization", 1.0, "gpu_uuid"), ("DCGM_FI_DEV_GPU_UTIL", 100.0, "gpu"))


def _clip(v: float) -> float:
    return min(1.0, max(0.0, v))


def server_shares(delta: dict[str, Any]) -> dict[str, float] | None:
    interval = float(delta.get("interval_s") or 0.0)
    for name in delta.get("metrics", {}):
        if name.endswith("instance_busy_seconds_total") and interval > 0:
            series = counter_series(delta, name)
            if len(series) >= 2:
                return {
                    f"instance {labels.get('instance', i)}": _clip(v / interval)
                    for i, (labels, v) in enumerate(series)
                }
    for name, scale, label in GAUGES:
        tl = timeline(delta, name)
        if tl is not None and len(tl[1]) >= 2:
            shares = {}
            for i, s in enumerate(tl[1]):
                # the edge samples are the level's before/after snapshots: the readings inside it count
                inner = [v for v in s["values"][1:] if v is not None]
                if inner:
                    shares[str(s["labels"].get(label, i))] = _clip(sum(inner) / len(inner) / scale)
            if len(shares) >= 2:
                return shares
        gauges = gauge_series(delta, name)
        if len(gauges) >= 2:
            return {
                str(g["labels"].get(label, i)): _clip(float(g["after"]) / scale)
                for i, g in enumerate(gauges)
                if g.get("after") is not None
            }
    return None


def level_shares(level: LevelResult) -> tuple[dict[str, float], str] | None:
    for name, delta in probe_deltas(level).items():
        shares = server_shares(delta)
        if shares:
            return shares, f"{name} per-instance utilisation"
    tel = level.telemetry
    if isinstance(tel, dict):
        fair = tel.get("fairness")
        if isinstance(fair, dict) and isinstance(fair.get("shares"), dict) and len(fair["shares"]) >= 2:
            return {k: float(v) for k, v in fair["shares"].items()}, "gpu telemetry (NVML) per GPU"
    return None


@detector(
    10,
    "instance-starvation",
    "model-instance GPU starvation",
    advice="Balance the instance group: equal instance counts per GPU, a rate limiter or a "
    "least-loaded scheduler, so no instance starves while another saturates.",
    needs="per-instance or per-GPU utilisation of the serving side (--server-metrics with per-GPU "
    "utilisation or instance busy counters, or --gpu-telemetry on a multi-GPU server host)",
    thresholds={
        "std_max": 0.18,
        "min_max_ratio": 0.65,
        "jain_min": 0.85,
        "starving_below": 0.15,
        "busy_min": 0.3,
    },
)
def check(d: Detector, inputs: DiagnoseInputs, t: Mapping[str, float]) -> Finding:
    doc = inputs.document
    rows = []
    for level in doc.levels if doc else []:
        found = level_shares(level)
        if found is not None and len(found[0]) >= 2:
            rows.append((level.level_label, *found))
    if not rows:
        return d.no_data("no per-instance or per-GPU utilisation of two or more instances", t)
    label, shares, src = max(rows, key=lambda r: max(r[1].values()))
    top = max(shares.values())
    if top < t["busy_min"]:
        return d.no_data(
            f"no level kept an instance {t['busy_min']:.0%} busy (highest {top:.0%} at {label}): fairness "
            "cannot be judged",
            t,
            level=label,
            values={"max_share": top},
            source=src,
            needs="a level that loads the instances (at least one past busy_min)",
        )
    rep = fairness(shares)
    starving = sorted(k for k, v in shares.items() if v < t["starving_below"])
    unfair = (
        rep.std >= t["std_max"]
        or (rep.min_max_ratio is not None and rep.min_max_ratio <= t["min_max_ratio"])
        or (rep.jain_index is not None and rep.jain_index <= t["jain_min"])
        or bool(starving)
    )
    values = {
        "instances": rep.instances,
        "std": rep.std,
        "min_max_ratio": rep.min_max_ratio,
        "jain_index": rep.jain_index,
        "max_share": top,
        "min_share": min(shares.values()),
        "starving": ", ".join(starving) or None,
    }
    summary = (
        f"{rep.instances} instances, utilisation {min(shares.values()):.0%}..{top:.0%}: std {rep.std:.2f}, "
        f"min/max {rep.min_max_ratio or 0:.2f}, Jain {rep.jain_index or 0:.2f}"
    )
    if starving:
        summary += f"; starving: {', '.join(starving)}"
    return (d.found if unfair else d.not_found)(summary, t, level=label, values=values, source=src)
