"""Probe rounds measured away from the operator's own event loop, and bounded.

With every gate probing inside the operator's loop at once, the operator's own load became part
of what it measured (200 gates at once: a quarter failed on latency that was the operator's).
Here each round runs in a worker process with its own loop, at most ``max_concurrent`` at a
time and at most ``per_target`` against one host; the round also measures its own loop lag and
turns itself Inconclusive when the prober ran late (``mcp_checks.health``).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
from collections import defaultdict
from collections.abc import AsyncIterator
from concurrent.futures import ProcessPoolExecutor
from urllib.parse import urlsplit

from mcp_checks.api import CheckOutcome, HealthProbeSpec, run_health_probe_blocking


def target_key(url: str) -> str:
    """Rounds against the same host and port share one per-target bound."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


class Prober:
    def __init__(self, max_concurrent: int, per_target: int) -> None:
        self.max_concurrent = max_concurrent
        self.per_target = per_target
        self._slots = asyncio.Semaphore(max_concurrent)
        self._targets: defaultdict[str, asyncio.Semaphore] = defaultdict(
            lambda: asyncio.Semaphore(per_target)
        )
        self._pool: ProcessPoolExecutor | None = None
        self.rounds = 0

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn: the operator runs threads, and forking a threaded process is unsafe
            context = multiprocessing.get_context("spawn")
            self._pool = ProcessPoolExecutor(max_workers=self.max_concurrent, mp_context=context)
        return self._pool

    @contextlib.asynccontextmanager
    async def slot(self, url: str) -> AsyncIterator[None]:
        """Wait for capacity (a worker, and room at the target's host): queue time, which the
        suite keeps out of the check's own timeout (a gate queued behind 999 others has not
        timed out)."""
        async with self._targets[target_key(url)], self._slots:
            yield

    async def run_round(self, spec: HealthProbeSpec) -> CheckOutcome:
        """One round in a worker process; the caller holds a ``slot``."""
        self.rounds += 1
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor(), run_health_probe_blocking, spec)

    async def health_probe(self, spec: HealthProbeSpec) -> CheckOutcome:
        async with self.slot(spec.url):
            return await self.run_round(spec)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
