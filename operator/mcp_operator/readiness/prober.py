"""Probe rounds measured away from the operator's own event loop, and bounded.

With every gate probing inside the operator's loop at once, the operator's own load became part
of what it measured (200 gates at once: a quarter failed on latency that was the operator's).
Here each round runs in a worker process with its own loop, at most ``max_concurrent`` at a
time and at most ``per_target`` against one host; the round also measures its own loop lag and
turns itself Inconclusive when the prober ran late (``mcp_checks.health``). Every worker is
started (spawned, its imports done) before the first round is admitted, so a worker's start-up,
seconds on a busy host, is queue time and never part of a check's timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import time
from collections import defaultdict
from collections.abc import AsyncIterator
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing.sharedctypes import Synchronized
from typing import Any
from urllib.parse import urlsplit

from mcp_checks.api import CheckOutcome, HealthProbeSpec, run_health_probe_blocking

from ..orphans import die_with_parent


def target_key(url: str) -> str:
    """Rounds against the same host and port share one per-target bound."""
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"


WORKERS_START_S = 120.0  # at most this long for every worker to start; then rounds go on anyway
WORKERS_POLL_S = 0.02


def _worker_started(count: Synchronized[Any], parent_pid: int) -> None:
    """Run by each worker process as it starts, after its imports: it ends with the operator
    (even a SIGKILLed one), and counts one more worker ready."""
    die_with_parent(parent_pid)
    with count.get_lock():
        count.value += 1


class Prober:
    def __init__(self, max_concurrent: int, per_target: int) -> None:
        self.max_concurrent = max_concurrent
        self.per_target = per_target
        self._slots = asyncio.Semaphore(max_concurrent)
        self._targets: defaultdict[str, asyncio.Semaphore] = defaultdict(
            lambda: asyncio.Semaphore(per_target)
        )
        self._pool: ProcessPoolExecutor | None = None
        self._started: Synchronized[Any] | None = None
        self._spawns: list[Future[int]] = []
        self.rounds = 0

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            # spawn: the operator runs threads, and forking a threaded process is unsafe
            context = multiprocessing.get_context("spawn")
            self._started = context.Value("i", 0)
            self._pool = ProcessPoolExecutor(
                max_workers=self.max_concurrent,
                mp_context=context,
                initializer=_worker_started,
                initargs=(self._started, os.getpid()),
            )
        return self._pool

    @property
    def workers_started(self) -> int:
        """Worker processes that have started (their imports done)."""
        return 0 if self._started is None else int(self._started.value)

    async def ready(self) -> None:
        """Every worker process started: the first caller starts them all at once (each
        submission spawns one while none is idle) and every caller waits for that start (or
        for a worker that failed to start: the round then fails as the pool does)."""
        pool = self._executor()
        if not self._spawns:
            self._spawns = [pool.submit(os.getpid) for _ in range(self.max_concurrent)]
        deadline = time.monotonic() + WORKERS_START_S
        while self.workers_started < self.max_concurrent and time.monotonic() < deadline:
            if any(f.done() and f.exception() is not None for f in self._spawns):
                return
            await asyncio.sleep(WORKERS_POLL_S)

    @contextlib.asynccontextmanager
    async def slot(self, url: str) -> AsyncIterator[None]:
        """Wait for capacity (a started worker, and room at the target's host): queue time,
        which the suite keeps out of the check's own timeout (a gate queued behind 999 others,
        or behind the workers' start, has not timed out)."""
        async with self._targets[target_key(url)], self._slots:
            await self.ready()
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
        self._started, self._spawns = None, []
