"""The knee of a load curve, pure: where throughput stops growing with load while latency climbs.

Below saturation throughput grows with load (open loop: what is sent completes; closed loop:
Little's law with flat latency); past it throughput stays at its plateau and the extra load
waits in a queue, so latency rises. The knee is the lowest load whose throughput is within
``PLATEAU_SHARE`` of the highest measured, shown by a higher load whose throughput grew by less
than ``efficiency`` of the load's relative step while mean latency rose by more than
``latency_rise``. Judging each candidate against any higher load, not only the next one, keeps
the answer steady where bisection leaves loads a percent apart: such close steps are mostly
noise, and past saturation a closed loop's latency grows only as fast as its concurrency.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mcp_bench.saturation import Knee

# Throughput within 5% of the highest measured counts as on the plateau.
PLATEAU_SHARE = 0.95


@dataclass(frozen=True)
class Point:
    load: float
    throughput_rps: float | None
    latency_mean_ms: float | None


@dataclass(frozen=True)
class _Measured:
    load: float
    throughput_rps: float
    latency_mean_ms: float


def usable(points: Sequence[Point]) -> list[_Measured]:
    """Points with both figures, one per load (the last measured), in load order."""
    by_load: dict[float, _Measured] = {}
    for p in points:
        if p.throughput_rps is not None and p.latency_mean_ms is not None and p.throughput_rps > 0:
            by_load[p.load] = _Measured(p.load, p.throughput_rps, p.latency_mean_ms)
    return [by_load[k] for k in sorted(by_load)]


def _shows(a: _Measured, b: _Measured, efficiency: float, latency_rise: float) -> bool:
    """``b`` (a higher load) shows ``a`` saturated: throughput flat, latency up."""
    load_step = b.load / a.load - 1
    gain = b.throughput_rps / a.throughput_rps - 1
    rise = b.latency_mean_ms / a.latency_mean_ms - 1 if a.latency_mean_ms > 0 else 0.0
    return gain < efficiency * load_step and rise > latency_rise


def find_knee(points: Sequence[Point], efficiency: float, latency_rise: float) -> Knee | str:
    """The knee, or a note saying why none was found."""
    pts = usable(points)
    if len(pts) < 2:
        return f"no knee: {len(pts)} load(s) with throughput and latency, two are needed"
    peak = max(p.throughput_rps for p in pts)
    for i, a in enumerate(pts):
        if a.throughput_rps < PLATEAU_SHARE * peak:
            continue
        b = next((b for b in pts[i + 1 :] if _shows(a, b, efficiency, latency_rise)), None)
        if b is not None:
            return Knee(
                load=a.load,
                next_load=b.load,
                throughput_rps=a.throughput_rps,
                next_throughput_rps=b.throughput_rps,
                latency_mean_ms=a.latency_mean_ms,
                next_latency_mean_ms=b.latency_mean_ms,
            )
    return (
        f"no knee up to {pts[-1].load:g}: no load past the throughput plateau ({peak:.4g} rps) "
        f"shows throughput flat (< {efficiency:g} of the load's step) while mean latency rose "
        f"> {latency_rise:.0%}"
    )
