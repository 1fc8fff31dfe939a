"""Per-level summaries of GPU telemetry: peak, mean and P95 per field per GPU, and sampler jitter.

Pure functions over :class:`SampleWindow`, so they are tested with real sample data and no GPU.
NaN marks "no reading" and is skipped; a field with no reading says so instead of reporting zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mcp_bench.observed import STATUS_OK
from mcp_bench.telemetry.series import SampleWindow, TelemetrySeries


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an already sorted, non-empty sequence."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be within 0..100, got {q}")
    rank = max(1, math.ceil(q / 100.0 * len(sorted_values)))
    return float(sorted_values[rank - 1])


def field_summary(values: Sequence[float]) -> dict[str, Any]:
    """Peak, mean, P95 and min of the readings; ``no_data`` when there is none."""
    real = sorted(v for v in values if not math.isnan(v))
    if not real:
        return {"status": "no_data", "samples": 0}
    return {
        "status": STATUS_OK,
        "samples": len(real),
        "mean": math.fsum(real) / len(real),
        "p95": percentile(real, 95.0),
        "peak": real[-1],
        "min": real[0],
    }


def _dist_ms(values_ns: Sequence[int]) -> dict[str, float] | None:
    if not values_ns:
        return None
    ordered = sorted(values_ns)
    return {
        "p50": percentile(ordered, 50.0) / 1e6,
        "p99": percentile(ordered, 99.0) / 1e6,
        "max": ordered[-1] / 1e6,
    }


def jitter_stats(window: SampleWindow) -> dict[str, Any]:
    """How well the sampler kept its interval.

    ``lateness``: achieved tick start minus scheduled start. ``interval_error``: absolute difference
    between each achieved interval (consecutive timestamps) and the configured one. ``read``: time the
    NVML reads of one tick took.
    """
    interval_ns = window.interval_s * 1e9
    gaps = [b - a for a, b in zip(window.t_ns, window.t_ns[1:], strict=False)]
    return {
        "interval_ms": window.interval_s * 1e3,
        "achieved_interval_mean_ms": (sum(gaps) / len(gaps) / 1e6) if gaps else None,
        "interval_error_ms": _dist_ms([round(abs(g - interval_ns)) for g in gaps]),
        "lateness_ms": _dist_ms([t - s for t, s in zip(window.t_ns, window.scheduled_ns, strict=True)]),
        "read_ms": _dist_ms(window.read_ns),
    }


SM_IDLE_BELOW_PCT = 10.0


def idle_gaps(
    t_ns: Sequence[int], values: Sequence[float], below: float = SM_IDLE_BELOW_PCT
) -> dict[str, Any]:
    """Stretches of consecutive readings under ``below`` (SM utilisation gaps): their share of the
    readings, how many there were and the longest, in ms from its first idle reading to the next
    busy one. ``no_data`` without readings."""
    real = [(t, v) for t, v in zip(t_ns, values, strict=True) if not math.isnan(v)]
    if not real:
        return {"status": "no_data"}
    idle = 0
    gaps = 0
    longest_ns = 0
    start: int | None = None
    for t, v in real:
        if v < below:
            idle += 1
            if start is None:
                start, gaps = t, gaps + 1
        elif start is not None:
            longest_ns, start = max(longest_ns, t - start), None
    if start is not None:
        longest_ns = max(longest_ns, real[-1][0] - start)
    return {
        "status": STATUS_OK,
        "below_pct": below,
        "share": idle / len(real),
        "gaps": gaps,
        "longest_ms": longest_ns / 1e6,
    }


def summarise_window(window: SampleWindow) -> dict[str, Any]:
    """Summary of one window: per GPU, per field peak/mean/P95/min, memory peak %, and jitter."""
    span_ns = None if window.start_ns is None or window.end_ns is None else window.end_ns - window.start_ns
    expected = None if span_ns is None or window.interval_s <= 0 else int(span_ns / (window.interval_s * 1e9))
    gpus: list[dict[str, Any]] = []
    for pos, gpu in enumerate(window.gpus):
        fields: dict[str, Any] = {}
        for name, values in window.values[pos].items():
            reason = window.unsupported.get((gpu.index, name))
            fields[name] = (
                {"status": "unsupported", "reason": reason} if reason is not None else field_summary(values)
            )
        mem = fields.get("mem_used_bytes")
        peak_pct = None
        if isinstance(mem, dict) and mem.get("status") == STATUS_OK and gpu.memory_total_bytes > 0:
            peak_pct = 100.0 * float(mem["peak"]) / gpu.memory_total_bytes
        entry: dict[str, Any] = {
            "index": gpu.index,
            "name": gpu.name,
            "uuid": gpu.uuid,
            "memory_total_bytes": gpu.memory_total_bytes,
            "memory_used_peak_pct": peak_pct,
            "fields": fields,
        }
        sm = window.values[pos].get("sm_util_pct")
        if sm is not None and (gpu.index, "sm_util_pct") not in window.unsupported:
            entry["sm_idle"] = idle_gaps(window.t_ns, sm)  # trap 7: compute gaps while work waits
        gpus.append(entry)
    return {
        "status": STATUS_OK if window.t_ns else "no_data",
        "samples": len(window.t_ns),
        "expected_samples": expected,
        "complete": window.complete,
        "sampler": jitter_stats(window),
        "gpus": gpus,
    }


def summarise(
    series: TelemetrySeries, start_ns: int | None = None, end_ns: int | None = None
) -> dict[str, Any]:
    """Summary of the samples taken between two ``time.perf_counter_ns()`` instants (one level).

    An unavailable series yields ``{"status": "unavailable", "reason": ...}`` and no figures.
    """
    if not series.available:
        return {"status": series.status, "reason": series.reason}
    out = summarise_window(series.window(start_ns, end_ns))
    out["sampler_cost"] = series.stats.to_dict()
    if series.errors:
        out["read_errors"] = dict(series.errors)
    return out


def plot_points(window: SampleWindow, max_points: int = 2000) -> dict[str, Any]:
    """Down-sample a window for plotting: bucket means (None where a bucket has no reading)."""
    if max_points < 1:
        raise ValueError(f"max_points must be at least 1, got {max_points}")
    n = len(window.t_ns)
    size = max(1, math.ceil(n / max_points))
    t0 = window.t_ns[0] if n else 0
    buckets = [range(i, min(i + size, n)) for i in range(0, n, size)]

    def mean(values: list[float], idx: range) -> float | None:
        real = [values[i] for i in idx if not math.isnan(values[i])]
        return math.fsum(real) / len(real) if real else None

    return {
        "t_s": [(window.t_ns[b[0]] - t0) / 1e9 for b in buckets],
        "gpus": [
            {"index": gpu.index, **{name: [mean(vals, b) for b in buckets] for name, vals in per.items()}}
            for gpu, per in zip(window.gpus, window.values, strict=True)
        ],
    }


def _memory_sum(window: SampleWindow, pick: str) -> float | None:
    """GPU memory used, summed over the window's GPUs, at its first or last reading or its peak."""
    per_gpu: list[float] = []
    for values in window.values:
        real = [v for v in values.get("mem_used_bytes", []) if not math.isnan(v)]
        if not real:
            return None
        per_gpu.append(real[0] if pick == "first" else real[-1] if pick == "last" else max(real))
    return math.fsum(per_gpu) if per_gpu else None


def memory_around(
    series: TelemetrySeries, start_ns: int, end_ns: int, settled_ns: int | None, interval_s: float
) -> dict[str, Any] | None:
    """GPU memory around one level (the forensics' input): the last reading before it started (or
    its first), the peak during it, and the last reading of the settle wait after it (None without
    one). Summed over the GPUs; None where the series has no memory readings."""
    if not series.available:
        return None
    level = series.window(start_ns, end_ns)
    peak = _memory_sum(level, "peak")
    if peak is None:
        return None
    lead = series.window(start_ns - round(max(interval_s, 0.05) * 4e9), start_ns - 1)
    before = _memory_sum(lead, "last") if lead.t_ns else _memory_sum(level, "first")
    after = None
    if settled_ns is not None:
        tail = series.window(end_ns, settled_ns)
        after = _memory_sum(tail, "last") if tail.t_ns else None
    return {
        "before_bytes": before,
        "peak_bytes": peak,
        "after_bytes": after,
        "total_bytes": float(sum(g.memory_total_bytes for g in level.gpus)) or None,
    }
