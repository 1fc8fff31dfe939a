"""The reference server's latency model: FIFO admission, per-request delays, fault draws.

Protocol handlers (OpenAI, V2 HTTP, V2 gRPC) all go through :meth:`ServerModel.serve`, so
every request is queued, timed and counted the same way whichever protocol carried it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from enum import StrEnum

from mcp_refserver.config import RefServerConfig
from mcp_refserver.stats import ServerStats


class Fault(StrEnum):
    NONE = "none"
    ERROR = "error"
    STALL = "stall"
    CLOSE = "close"
    MALFORMED = "malformed"
    TRUNCATE = "truncate"


class FifoGate:
    """At most ``capacity`` holders at once (0: unlimited); waiters are served strictly in order.

    A released slot is handed straight to the oldest waiter, so a newcomer can never overtake
    it (``asyncio.Semaphore`` does not promise that ordering).
    """

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._busy = 0
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def running(self) -> int:
        return self._busy

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    async def acquire(self) -> bool:
        """Take a slot; True when the caller had to wait for it."""
        if self._capacity == 0 or (self._busy < self._capacity and not self._waiters):
            self._busy += 1
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot was handed over just as we gave up: pass it on
            else:
                self._waiters.remove(fut)
            raise
        return True

    def release(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)  # hand the slot over; _busy is unchanged
                return
        self._busy -= 1


@dataclass(slots=True)
class RequestPlan:
    """What the model decided for one request, before it is served."""

    ttft_ns: int
    tpot_ns: int
    infer_ns: int
    fault: Fault


@dataclass(slots=True)
class Service:
    """One request in service: when it arrived and when it got its slot."""

    arrival_ns: int
    start_ns: int
    failed: bool = False

    @property
    def queue_ns(self) -> int:
        return self.start_ns - self.arrival_ns


@dataclass(slots=True, frozen=True)
class ServedTiming:
    """Server-side truth for one completed LLM request: arrival to first/last token write."""

    queue_ns: int
    ttft_ns: int
    e2e_ns: int
    output_tokens: int

    @property
    def tpot_ns(self) -> float | None:
        n = self.output_tokens
        return None if n < 2 else (self.e2e_ns - self.ttft_ns) / (n - 1)


TIMINGS_KEPT = 1_000_000


async def sleep_until(deadline_ns: int) -> None:
    """Sleep to an absolute ``perf_counter_ns`` instant, so overshoot never accumulates."""
    delay = deadline_ns - time.perf_counter_ns()
    if delay > 0:
        await asyncio.sleep(delay / 1e9)


class Waker:
    """Sleeps to absolute deadlines, waking early by the *median* timer overshoot seen so far.

    A timer fires late by the loop's wake-up latency (tens to hundreds of microseconds, more on
    a busy host). Asking for ``deadline - advance`` with ``advance`` tracking the median
    overshoot (a stochastic-approximation median: one small step up or down per sleep) makes
    the median emission land on the deadline; half land a little early, half a little late.
    The server records its real emission instants (``/debug/timings``), so the truth stays exact.
    """

    STEP_NS = 5_000
    MAX_ADVANCE_NS = 2_000_000

    def __init__(self) -> None:
        self.advance_ns = 0

    async def sleep_until(self, deadline_ns: int) -> None:
        wake = deadline_ns - self.advance_ns
        delay = wake - time.perf_counter_ns()
        if delay <= 0:
            return
        await asyncio.sleep(delay / 1e9)
        overshoot = time.perf_counter_ns() - wake
        if overshoot > self.advance_ns:
            self.advance_ns = min(self.advance_ns + self.STEP_NS, self.MAX_ADVANCE_NS)
        else:
            self.advance_ns = max(self.advance_ns - self.STEP_NS, 0)


class ServerModel:
    """Shared state of one reference server instance."""

    def __init__(self, config: RefServerConfig) -> None:
        self.config = config
        self.gate = FifoGate(config.capacity)
        self.stats = ServerStats()
        self.waker = Waker()
        self._rng = random.Random(config.seed)
        # Bounded: the last TIMINGS_KEPT completed LLM requests, served at /debug/timings.
        self.timings: deque[ServedTiming] = deque(maxlen=TIMINGS_KEPT)

    def plan(self) -> RequestPlan:
        """Draw this request's delays and fault (seeded: the same sequence every run)."""
        c, rng = self.config, self._rng
        ttft = c.ttft_ms.sample(rng)
        tpot = c.tpot_ms.sample(rng)
        infer = c.infer_ms.sample(rng)
        fault = Fault.NONE
        f = c.faults
        for kind, rate in (
            (Fault.ERROR, f.error_rate),
            (Fault.STALL, f.stall_rate),
            (Fault.CLOSE, f.close_rate),
            (Fault.MALFORMED, f.malformed_rate),
            (Fault.TRUNCATE, f.truncate_rate),
        ):
            if rate > 0 and rng.random() < rate:
                fault = kind
                break
        return RequestPlan(
            ttft_ns=round(ttft * 1e6), tpot_ns=round(tpot * 1e6), infer_ns=round(infer * 1e6), fault=fault
        )

    @asynccontextmanager
    async def serve(self, arrival_ns: int) -> AsyncIterator[Service]:
        """Wait for a slot (FIFO), yield the service record, then count it as success or failure.

        Service starts at arrival when a slot is free (request parsing is part of the service
        time, not extra), else when the slot is handed over.
        """
        waited = await self.gate.acquire()
        svc = Service(arrival_ns=arrival_ns, start_ns=time.perf_counter_ns() if waited else arrival_ns)
        try:
            yield svc
        except BaseException:
            svc.failed = True
            raise
        finally:
            self.gate.release()
            end = time.perf_counter_ns()
            self.stats.record(
                queue_ns=svc.queue_ns,
                compute_ns=end - svc.start_ns,
                total_ns=end - arrival_ns,
                ok=not svc.failed,
            )
