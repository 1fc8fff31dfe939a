"""Open-loop arrival schedules, computed before the level starts so sending never waits on maths."""

from __future__ import annotations

import math
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


def _ramped(times: Iterator[float], ramp_s: float) -> Iterator[float]:
    """The same arrivals with the rate rising linearly from 0 to ``rate`` over ``ramp_s``: a time
    change of the process (its cumulative intensity is ``rate * t**2 / (2 * ramp_s)`` in the ramp),
    so Poisson stays Poisson and a seed replays the same schedule."""
    half = ramp_s / 2
    for s in times:
        yield math.sqrt(2 * ramp_s * s) if s < half else s + half


def arrival_schedule(
    rate: float,
    arrival: Arrival,
    *,
    burstiness: float = 1.0,
    seed: int | str | None = 0,
    warmup_s: float = 0.0,
    duration_s: float | None = None,
    requests: int | None = None,
    ramp_s: float = 0.0,
) -> Schedule:
    """Arrivals at ``rate``/s: warm-up first, then until ``duration_s`` elapses or ``requests`` are due.

    The first arrival is at offset 0. Constant arrivals are exactly 1/rate apart; Poisson and gamma
    gaps are drawn from a seeded generator, so a plan replays the same schedule. With ``ramp_s``
    the rate rises linearly from 0 over the ramp (warm-up and duration count from offset 0).
    """
    if rate <= 0:
        raise ValueError("rate must be > 0")
    if duration_s is None and requests is None:
        raise ValueError("give duration_s and/or requests")
    times = _arrival_times_s(rate, arrival, burstiness, random.Random(seed))
    if ramp_s > 0:
        times = _ramped(times, ramp_s)
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
