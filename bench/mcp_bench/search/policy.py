"""The search policy, pure: given what was tried, the next load to probe or why to stop.

Bracket first (from the start, multiply by the factor while the SLO holds, divide while it does
not), then bisect between the highest load that met the SLO and the lowest that missed it. The
state is the list of probes, so the policy can be replayed and tested without running anything.
Noise can make a load pass above one that failed; the lowest failure bounds the answer then, so
the answer is never a load above a miss.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_bench.saturation import SearchSpec, SearchStop


@dataclass(frozen=True)
class Tried:
    load: float
    passed: bool


@dataclass(frozen=True)
class Next:
    load: float
    step: str  # start, bracket-up, bracket-down, bisect


@dataclass(frozen=True)
class Stop:
    reason: SearchStop
    message: str


@dataclass(frozen=True)
class Bracket:
    """The highest load that met the SLO below the lowest that missed it (either may be None)."""

    met: float | None
    missed: float | None


def bracket(tried: Sequence[Tried]) -> Bracket:
    fails = [t.load for t in tried if not t.passed]
    missed = min(fails) if fails else None
    passes = [t.load for t in tried if t.passed and (missed is None or t.load < missed)]
    return Bracket(max(passes) if passes else None, missed)


def bounds(spec: SearchSpec, integral: bool) -> tuple[float, float]:
    """Floor and ceiling as loads the search can run (whole numbers for concurrency)."""
    if integral:
        return float(math.ceil(spec.floor)), float(math.floor(spec.ceiling))
    return spec.floor, spec.ceiling


def _fmt(load: float) -> str:
    return f"{load:g}"


def converged(spec: SearchSpec, met: float, missed: float, integral: bool) -> bool:
    return missed - met <= spec.tolerance * met or (integral and missed - met <= 1)


def next_step(spec: SearchSpec, start: float, tried: Sequence[Tried], *, integral: bool) -> Next | Stop:
    """The next probe, or the reason to stop, from the probes so far (in the order they ran)."""
    floor, ceiling = bounds(spec, integral)
    if not tried:
        return Next(min(max(start, floor), ceiling), "start")
    b = bracket(tried)
    step: Next
    if b.missed is None:
        assert b.met is not None
        if b.met >= ceiling:
            return Stop(
                "ceiling_reached",
                f"the SLO held at the ceiling {_fmt(ceiling)}, the highest load allowed: "
                "capacity may be higher",
            )
        up = b.met * spec.factor
        load = min(ceiling, max(b.met + 1, math.floor(up)) if integral else up)
        step = Next(load, "bracket-up")
    elif b.met is None:
        if b.missed <= floor:
            return Stop(
                "slo_never_met", f"the SLO was missed at the floor {_fmt(floor)}, the lowest load allowed"
            )
        down = b.missed / spec.factor
        load = max(floor, min(b.missed - 1, math.ceil(down)) if integral else down)
        step = Next(load, "bracket-down")
    else:
        if converged(spec, b.met, b.missed, integral):
            return Stop(
                "converged",
                f"met at {_fmt(b.met)}, missed at {_fmt(b.missed)}: within the tolerance "
                f"{spec.tolerance:g} of the load that met it",
            )
        mid = (b.met + b.missed) / 2
        step = Next(float(math.floor(mid)) if integral else mid, "bisect")
    if len(tried) >= spec.max_probes:
        where = {
            (True, True): f"between {_fmt(b.met or 0)} (met) and {_fmt(b.missed or 0)} (missed)",
            (True, False): f"met up to {_fmt(b.met or 0)}, no miss yet",
            (False, True): f"missed down to {_fmt(b.missed or 0)}, never met",
        }[(b.met is not None, b.missed is not None)]
        return Stop("budget_exhausted", f"{spec.max_probes} probes run, {where}")
    return step
