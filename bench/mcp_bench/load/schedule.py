"""Open-loop arrival schedules, computed before the level starts so sending never waits on maths."""

from __future__ import annotations

import random
from array import array
from collections.abc import Iterator

from mcp_bench.plan import Arrival


class Schedule:
    """Arrival offsets in ns from the level start; arrivals before ``warmup_count`` are not measured."""

    __slots__ = ("offsets_ns", "warmup_count")

    def __init__(self, offsets_ns: array[int], warmup_count: int) -> None:
        self.offsets_ns = offsets_ns
        self.warmup_count = warmup_count

    def __len__(self) -> int:
        return len(self.offsets_ns)

    @property
    def measured_count(self) -> int:
        return len(self.offsets_ns) - self.warmup_count


def _arrival_times_s(rate: float, arrival: Arrival, burstiness: float, rng: random.Random) -> Iterator[float]:
    """Endless arrival instants in seconds from 0; constant ones are k/rate exactly (no drift)."""
    if arrival == "constant":
        k = 0
        while True:
            yield k / rate
            k += 1
    # Gamma with shape k and mean 1/rate: k = 1 is Poisson, k < 1 burstier, k > 1 smoother.
    scale = 1.0 / rate / burstiness
    t = 0.0
    while True:
        yield t
        t += rng.expovariate(rate) if arrival == "poisson" else rng.gammavariate(burstiness, scale)


def arrival_schedule(
    rate: float,
    arrival: Arrival,
    *,
    burstiness: float = 1.0,
    seed: int | None = 0,
    warmup_s: float = 0.0,
    duration_s: float | None = None,
    requests: int | None = None,
) -> Schedule:
    """Arrivals at ``rate``/s: warm-up first, then until ``duration_s`` elapses or ``requests`` are due.

    The first arrival is at offset 0. Constant arrivals are exactly 1/rate apart; Poisson and gamma
    gaps are drawn from a seeded generator, so a plan replays the same schedule.
    """
    if rate <= 0:
        raise ValueError("rate must be > 0")
    if duration_s is None and requests is None:
        raise ValueError("give duration_s and/or requests")
    times = _arrival_times_s(rate, arrival, burstiness, random.Random(seed))
    warmup_ns = int(warmup_s * 1e9)
    end_ns = None if duration_s is None else warmup_ns + int(duration_s * 1e9)
    offsets = array("q")
    warmup_count = 0
    measured = 0
    for t in times:
        ns = round(t * 1e9)
        if ns < warmup_ns:
            warmup_count += 1
        else:
            if end_ns is not None and ns >= end_ns:
                break
            if requests is not None and measured >= requests:
                break
            measured += 1
        offsets.append(ns)
    return Schedule(offsets, warmup_count)
