"""Open-loop arrival schedules, computed before the level starts so sending never waits on maths."""

from __future__ import annotations

import itertools
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


def _unramped(t: float, ramp_s: float) -> float:
    """The instant of the unramped process that ``_ramped`` moves to ``t`` (its inverse)."""
    if ramp_s <= 0:
        return t
    return t * t / (2 * ramp_s) if t < ramp_s else t - ramp_s / 2


def _window(
    rate: float, arrival: Arrival, burstiness: float, rng: random.Random, start_s: float, length_s: float
) -> array[float]:
    """The arrivals of one window: as many as the rate asks (``rate * length_s`` rounded up or down
    at random, so without bias, and at least one), the first at the window's start, the gaps drawn
    from the arrival model and scaled to fill the window. For Poisson this is the process given
    its count (its arrivals are then uniform over the window): a free count strays by its square
    root, so a drill's 6 s of 175/s sent 3 % more or less than asked, and the same every run."""
    count = max(1, math.floor(rate * length_s + rng.random()))
    if arrival == "poisson":
        gaps = array("d", (rng.expovariate(1.0) for _ in range(count)))
    else:
        gaps = array("d", (rng.gammavariate(burstiness, 1.0) for _ in range(count)))
    scale = length_s / math.fsum(gaps)
    t = 0.0
    for i, gap in enumerate(gaps):  # each gap becomes the instant it follows (no second array)
        gaps[i] = start_s + t * scale
        t += gap
    return gaps


def _filled(
    rate: float,
    arrival: Arrival,
    burstiness: float,
    rng: random.Random,
    warmup_s: float,
    duration_s: float,
    ramp_s: float,
) -> tuple[array[float], array[float]]:
    """The warm-up's and the measured window's arrivals (instants before the ramp): each window
    holds the count its rate and time ask."""
    start, end = _unramped(warmup_s, ramp_s), _unramped(warmup_s + duration_s, ramp_s)
    warm = _window(rate, arrival, burstiness, rng, 0.0, start) if warmup_s > 0 else array("d")
    return warm, _window(rate, arrival, burstiness, rng, start, end - start)


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
    gaps are drawn from a seeded generator, so a plan replays the same schedule. With a duration,
    the warm-up and the measured window each hold ``rate`` x their time arrivals (within one):
    the level offers what its rate asks, and its achieved rate measures the client and the
    service, not the draw. Without one, arrivals run on until ``requests``. With ``ramp_s``
    the rate rises linearly from 0 over the ramp (warm-up and duration count from offset 0).
    """
    if rate <= 0:
        raise ValueError("rate must be > 0")
    if duration_s is None and requests is None:
        raise ValueError("give duration_s and/or requests")
    rng = random.Random(seed)
    if duration_s is not None and arrival != "constant":
        warm, window = _filled(rate, arrival, burstiness, rng, warmup_s, duration_s, ramp_s)
        if requests is not None:
            del window[requests:]
        instants: Iterator[float] = itertools.chain(warm, window)
        if ramp_s > 0:
            instants = _ramped(instants, ramp_s)
        return Schedule(array("q", (round(t * 1e9) for t in instants)), len(warm))
    times = _arrival_times_s(rate, arrival, burstiness, rng)
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
