"""The knee of a load curve, pure: where throughput stops growing with load while latency climbs.

Points are taken in load order. For each step to the next load, the throughput's relative gain is
compared with the load's: below saturation they grow together (open loop: what is sent completes;
closed loop: Little's law with flat latency), past it throughput stays flat and the extra load
waits in a queue, so latency rises. The knee is the last load before the first step whose
throughput gained less than ``efficiency`` of the load's relative step while mean latency rose by
more than ``latency_rise``: both must hold, so noise in one alone does not make a knee.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_bench.search.model import Knee


@dataclass(frozen=True)
class Point:
    load: float
    throughput_rps: float | None
    latency_mean_ms: float | None


def usable(points: Sequence[Point]) -> list[Point]:
    """Points with both figures, one per load (the last measured), in load order."""
    by_load: dict[float, Point] = {}
    for p in points:
        if p.throughput_rps is not None and p.latency_mean_ms is not None and p.throughput_rps > 0:
            by_load[p.load] = p
    return [by_load[k] for k in sorted(by_load)]


def find_knee(points: Sequence[Point], efficiency: float, latency_rise: float) -> Knee | str:
    """The knee, or a note saying why none was found."""
    pts = usable(points)
    if len(pts) < 2:
        return f"no knee: {len(pts)} load(s) with throughput and latency, two are needed"
    for a, b in itertools.pairwise(pts):
        assert a.throughput_rps is not None and a.latency_mean_ms is not None
        assert b.throughput_rps is not None and b.latency_mean_ms is not None
        load_step = b.load / a.load - 1
        gain = b.throughput_rps / a.throughput_rps - 1
        rise = b.latency_mean_ms / a.latency_mean_ms - 1 if a.latency_mean_ms > 0 else 0.0
        if gain < efficiency * load_step and rise > latency_rise:
            return Knee(
                load=a.load,
                next_load=b.load,
                throughput_rps=a.throughput_rps,
                next_throughput_rps=b.throughput_rps,
                latency_mean_ms=a.latency_mean_ms,
                next_latency_mean_ms=b.latency_mean_ms,
            )
    return (
        f"no knee up to {pts[-1].load:g}: throughput kept within {efficiency:g} of the load's growth "
        f"or latency rose by at most {latency_rise:.0%} at every step"
    )
