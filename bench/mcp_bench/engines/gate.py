"""Start gates: observers that hold a level until a common start time, so that several shards
(processes, pods, machines) measure a level at the same time and their merge is one
cluster-wide figure.

A gate is an observer with two more hooks. ``level_ready`` is awaited once the level's
connections are open, just before its measured window (the built-in engine and its worker pool
call it there; an external engine's tool starts per level, so for Locust and k6 a gate waits in
``level_started``). ``level_progress`` hears, a few times a second, what the level has sent so
far (cheap: it runs on the load loop). Where the start time comes from is the gate's business:
a wall-clock time given on the command line (:class:`StartAtGate`), or an operator writing it
through the Kubernetes API (``mcp_operator.benchmark.shardgate``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from mcp_bench.engines.base import RunObserver
from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult
from mcp_common import rfc3339


@dataclass(frozen=True, slots=True)
class LevelProgress:
    """How far a running level is: requests sent, completed and failed so far, the share of the
    level done (by time or count) and the seconds since its window began."""

    sent: int
    completed: int
    failed: int
    fraction: float
    elapsed_s: float

    @property
    def in_flight(self) -> int:
        return max(0, self.sent - self.completed - self.failed)


class GateObserver(RunObserver):
    """A run observer that may hold each level until a start time (see the module's text)."""

    async def level_ready(self, plan: RunPlan, meta: LevelMeta) -> None:
        return None

    def level_progress(self, meta: LevelMeta, progress: LevelProgress) -> None:
        return None


def gates(observers: Sequence[RunObserver]) -> list[GateObserver]:
    return [obs for obs in observers if isinstance(obs, GateObserver)]


async def level_ready(observers: Sequence[RunObserver], plan: RunPlan, meta: LevelMeta) -> None:
    """Await every gate among ``observers`` for this level (in order)."""
    for gate in gates(observers):
        await gate.level_ready(plan, meta)


def tell_progress(observers: Sequence[RunObserver], meta: LevelMeta, progress: LevelProgress) -> None:
    for gate in gates(observers):
        gate.level_progress(meta, progress)


async def sleep_until(unix_ns: int) -> None:
    """Sleep until a wall-clock instant; the last millisecond is spun on the loop's clock, so
    processes waiting for the same instant wake within a millisecond of it (not of a timer
    tick)."""
    while True:
        left_s = (unix_ns - time.time_ns()) / 1e9
        if left_s <= 0:
            return
        await asyncio.sleep(left_s - 0.001 if left_s > 0.002 else 0)


class StartAtGate(GateObserver):
    """``mcp-bench run --start-at``: the first level's window begins at a wall-clock time (for
    shards started by hand on several machines with synchronised clocks); later levels follow
    at once. The level records the time it waited for."""

    def __init__(self, start_unix_ns: int) -> None:
        self.start_unix_ns = start_unix_ns
        self._waited: dict[int, int] = {}

    async def level_ready(self, plan: RunPlan, meta: LevelMeta) -> None:
        if meta.index == 0 and not self._waited:
            await sleep_until(self.start_unix_ns)
            self._waited[meta.index] = self.start_unix_ns

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        if plan.engine != "builtin":
            await self.level_ready(plan, meta)

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        if result.index in self._waited:
            result.start_at_unix_ns = self._waited[result.index]


def parse_start_at(text: str) -> int:
    """``--start-at``: Unix seconds (``1796280000.5``) or an ISO 8601 time with its offset
    (``2026-12-03T06:30:00Z``), as Unix ns. A time without an offset is refused: shards on
    several machines must agree on what it means."""
    value = text.strip()
    try:
        return round(float(value) * 1e9)
    except ValueError:
        pass
    try:
        moment = rfc3339.parse(value)
    except rfc3339.MissingZone:
        raise ValueError(f"--start-at {text!r}: give the time's offset (Z or +hh:mm)") from None
    except ValueError:
        raise ValueError(f"--start-at {text!r}: give Unix seconds or an ISO 8601 time") from None
    return round(moment.timestamp() * 1e9)
