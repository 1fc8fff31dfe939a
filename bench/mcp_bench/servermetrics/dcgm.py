"""The serving GPUs as the DCGM exporter reports them, one entry per GPU per level.

A server-metrics delta keeps one row per label set and metric; readers (the status table, the
report) want the GPU's figures together: SM utilisation, frame buffer used (and its peak share of
used plus free) and power, over the level. Where the level was sampled during its run (the
delta's ``timeline``) the figures come from every sample, else from the two snapshots around it.
A gauge the exporter did not serve is left out, never reported as zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
POWER = "DCGM_FI_DEV_POWER_USAGE"
ROLE = "serving"

GpuKey = tuple[str, str]


def is_dcgm(delta: Mapping[str, Any]) -> bool:
    """Whether a delta holds any DCGM exporter gauge."""
    metrics = delta.get("metrics")
    return isinstance(metrics, Mapping) and any(str(name).startswith("DCGM_FI_") for name in metrics)


def _key(labels: Mapping[str, str]) -> GpuKey:
    return str(labels.get("Hostname", "")), str(labels.get("UUID") or labels.get("gpu", ""))


def _values(delta: Mapping[str, Any], name: str) -> dict[GpuKey, tuple[dict[str, str], list[float]]]:
    """Per GPU the readings of one gauge over the level: the timeline's, else before and after."""
    out: dict[GpuKey, tuple[dict[str, str], list[float]]] = {}
    timeline = (delta.get("timeline") or {}).get("metrics", {}).get(name)
    rows = timeline["series"] if isinstance(timeline, Mapping) else None
    if rows is None:
        metric = (delta.get("metrics") or {}).get(name)
        if not isinstance(metric, Mapping) or metric.get("status") not in ("ok", "missing_before"):
            return out
        rows = [
            {"labels": r["labels"], "values": [r.get("before"), r.get("after")]} for r in metric["series"]
        ]
    for row in rows:
        labels = dict(row.get("labels") or {})
        real = [float(v) for v in row.get("values") or [] if v is not None and math.isfinite(float(v))]
        if real:
            kept = out.setdefault(_key(labels), (labels, []))
            kept[1].extend(real)
    return out


def _stats(values: Sequence[float]) -> dict[str, float | int]:
    return {"mean": math.fsum(values) / len(values), "max": max(values), "samples": len(values)}


def dcgm_gpus(delta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One entry per GPU (by host and UUID) of a DCGM delta over one level, labelled ``serving``."""
    util, used, free, power = (_values(delta, n) for n in (GPU_UTIL, FB_USED, FB_FREE, POWER))
    gpus: list[dict[str, Any]] = []
    for key in sorted(set(util) | set(used) | set(power)):
        labels = next(src[key][0] for src in (util, used, power) if key in src)
        gpu: dict[str, Any] = {
            "role": ROLE,
            "gpu": labels.get("gpu"),
            "uuid": labels.get("UUID"),
            "hostname": labels.get("Hostname"),
            "model": labels.get("modelName"),
        }
        if key in util:
            gpu["sm_util_pct"] = _stats(util[key][1])
        if key in power:
            gpu["power_w"] = _stats(power[key][1])
        if key in used:
            peak = max(used[key][1])
            gpu["fb_used_mib"] = {"max": peak, "first": used[key][1][0], "last": used[key][1][-1]}
            if key in free:
                # the free reading taken with the peak is not known: used + free is the card's
                # frame buffer, constant, so any pair gives the total
                total = used[key][1][-1] + free[key][1][-1]
                gpu["fb_used_peak_pct"] = 100.0 * peak / total if total > 0 else None
        gpus.append({k: v for k, v in gpu.items() if v is not None})
    return gpus


def memory_peak_pct(gpus: Sequence[Mapping[str, Any]]) -> float | None:
    """The highest frame-buffer peak share over the serving GPUs, or None without one."""
    peaks = [float(g["fb_used_peak_pct"]) for g in gpus if g.get("fb_used_peak_pct") is not None]
    return max(peaks) if peaks else None
