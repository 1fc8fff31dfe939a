"""How late the prober's own event loop runs while it measures.

A latency figure is only as good as the loop that stamps it: when the prober is overloaded (too
many rounds in one process, a starved CPU), its own scheduling delay lands in every sample and a
healthy target looks slow, or a slow one hides. A ticker asks to wake every ``tick_s`` and records
how late it woke; a round whose prober ran late is not evidence either way.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

DEFAULT_TICK_S = 0.005


@dataclass
class LoopLag:
    samples_ms: list[float] = field(default_factory=list)

    def percentile(self, pct: float) -> float | None:
        if not self.samples_ms:
            return None
        ordered = sorted(self.samples_ms)
        rank = max(1, min(len(ordered), round(pct / 100.0 * len(ordered) + 0.4999)))
        return ordered[rank - 1]

    @property
    def max_ms(self) -> float | None:
        return max(self.samples_ms) if self.samples_ms else None


class LoopLagMonitor:
    """``async with LoopLagMonitor() as lag:`` records the loop's wake-up lateness meanwhile."""

    def __init__(self, tick_s: float = DEFAULT_TICK_S) -> None:
        self.tick_s = tick_s
        self.lag = LoopLag()
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            asked = time.perf_counter()
            await asyncio.sleep(self.tick_s)
            self.lag.samples_ms.append(max(0.0, (time.perf_counter() - asked - self.tick_s) * 1000.0))

    async def __aenter__(self) -> LoopLag:
        self._task = asyncio.get_running_loop().create_task(self._tick())
        return self.lag

    async def __aexit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
