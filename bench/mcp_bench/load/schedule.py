"""Open-loop arrival schedules, computed before the level starts so sending never waits on maths."""

from __future__ import annotations

import random
from array import array
from collections.abc import Callable

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


def _gap_sampler(rate: float, arrival: Arrival, burstiness: float, rng: random.Random) -> Callable[[], float]:
    mean = 1.0 / rate
    if arrival == "constant":
        return lambda: mean
    if arrival == "poisson":
        return lambda: rng.expovariate(rate)
    # Gamma with shape k and mean 1/rate: k = 1 is Poisson, k < 1 burstier, k > 1 smoother.
    scale = mean / burstiness
    return lambda: rng.gammavariate(burstiness, scale)


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
    rng = random.Random(seed)
    gap = _gap_sampler(rate, arrival, burstiness, rng)
    warmup_ns = int(warmup_s * 1e9)
    end_ns = None if duration_s is None else warmup_ns + int(duration_s * 1e9)
    offsets = array("q")
    t = 0.0
    warmup_count = 0
    measured = 0
    while True:
        ns = int(t * 1e9)
        if ns < warmup_ns:
            warmup_count += 1
        else:
            if end_ns is not None and ns >= end_ns:
                break
            if requests is not None and measured >= requests:
                break
            measured += 1
        offsets.append(ns)
        t += gap()
    return Schedule(offsets, warmup_count)
