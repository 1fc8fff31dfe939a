"""The reference server's latency model: FIFO admission, per-request delays, fault draws.

Protocol handlers (OpenAI, V2 HTTP, V2 gRPC) all go through :meth:`ServerModel.serve`, so
every request is queued, timed and counted the same way whichever protocol carried it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum

from mcp_refserver.config import RefServerConfig
from mcp_refserver.memory import MemoryModel
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
    it (``asyncio.Semaphore`` does not promise that ordering). With ``strict``, waiters are served
    by priority first (lower first), in arrival order within one priority: a strict priority
    queue, which starves the low class under load (trap 8).
    """

    def __init__(self, capacity: int, strict: bool = False) -> None:
        self._capacity = capacity
        self._strict = strict
        self._busy = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    @property
    def running(self) -> int:
        return self._busy

    @property
    def waiting(self) -> int:
        return len(self._heap) if self._strict else len(self._waiters)

    async def acquire(self, priority: int = 0) -> bool:
        """Take a slot; True when the caller had to wait for it."""
        if self._capacity == 0 or (self._busy < self._capacity and not self.waiting):
            self._busy += 1
            return False
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._strict:
            entry = (priority, next(self._seq), fut)
            heapq.heappush(self._heap, entry)
        else:
            self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # the slot was handed over just as we gave up: pass it on
            elif self._strict:
                self._heap.remove(entry)
                heapq.heapify(self._heap)
            else:
                self._waiters.remove(fut)
            raise
        return True

    def _next_waiter(self) -> asyncio.Future[None] | None:
        if self._strict:
            return heapq.heappop(self._heap)[2] if self._heap else None
        return self._waiters.popleft() if self._waiters else None

    def release(self) -> None:
        while (fut := self._next_waiter()) is not None:
            if not fut.done():
                fut.set_result(None)  # hand the slot over; _busy is unchanged
                return
        self._busy -= 1


@dataclass(slots=True)
class Instance:
    """One model instance (trap 10): its own slots, and how long it had work in service."""

    index: int
    gate: FifoGate
    busy_ns: int = 0
    in_service: int = 0
    busy_since: int = 0
    last_read: tuple[int, int] | None = None  # (instant, busy_ns) at the previous utilisation read
    created_ns: int = field(default_factory=time.perf_counter_ns)

    def begin(self, now: int) -> None:
        if self.in_service == 0:
            self.busy_since = now
        self.in_service += 1

    def end(self, now: int) -> None:
        self.in_service -= 1
        if self.in_service == 0:
            self.busy_ns += now - self.busy_since

    def busy_at(self, now: int) -> int:
        return self.busy_ns + (now - self.busy_since if self.in_service else 0)

    def utilisation_since_last_read(self, now: int) -> float:
        """Busy share since the previous call (since start on the first), as a GPU's
        utilisation gauge reports the last sampling period."""
        busy = self.busy_at(now)
        t0, b0 = self.last_read or (self.created_ns, 0)
        self.last_read = (now, busy)
        return min(1.0, (busy - b0) / (now - t0)) if now > t0 else 0.0


class KvCache:
    """A paged KV cache (trap 6): ``blocks`` of ``block_tokens`` tokens; only ``usable`` of them can
    ever be allocated (the rest is lost to fragmentation although it counts as free)."""

    def __init__(self, blocks: int, block_tokens: int, fragmentation: float) -> None:
        self.blocks = blocks
        self.block_tokens = block_tokens
        self.usable = int(blocks * (1 - fragmentation))
        self.used = 0
        self.preemptions = 0
        self.waiting = 0
        self._freed = asyncio.Event()

    def blocks_for(self, tokens: int) -> int:
        return math.ceil(tokens / self.block_tokens)

    @property
    def usage(self) -> float:
        return self.used / self.blocks

    def try_take(self, n: int) -> bool:
        if self.used + n > self.usable:
            return False
        self.used += n
        return True

    def give_back(self, n: int) -> None:
        self.used -= n
        self._freed.set()

    async def take(self, n: int) -> bool:
        """Wait until ``n`` blocks can be had, then take them; True when it had to wait."""
        if self.try_take(n):
            return False
        self.waiting += 1
        try:
            while not self.try_take(n):
                self._freed.clear()
                await self._freed.wait()
        finally:
            self.waiting -= 1
        return True


class ShapeCache:
    """Shapes already "compiled" (trap 12): the first request of a new shape pays the penalty,
    requests of that shape arriving meanwhile wait for the same compile."""

    def __init__(self, penalty_ns: int) -> None:
        self.penalty_ns = penalty_ns
        self.compiled: set[Hashable] = set()
        self.compiles = 0
        self._pending: dict[Hashable, asyncio.Event] = {}

    async def ensure(self, shape: Hashable) -> bool:
        """Compile ``shape`` unless it is; True when the caller had to wait for a compile."""
        if self.penalty_ns <= 0 or shape in self.compiled:
            return False
        pending = self._pending.get(shape)
        if pending is not None:
            await pending.wait()
            return True
        event = self._pending[shape] = asyncio.Event()
        try:
            await sleep_until(time.perf_counter_ns() + self.penalty_ns)
            self.compiled.add(shape)
            self.compiles += 1
        finally:
            del self._pending[shape]
            event.set()
        return True


@dataclass(slots=True)
class RequestPlan:
    """What the model decided for one request, before it is served."""

    ttft_ns: int
    tpot_ns: int
    infer_ns: int
    fault: Fault


@dataclass(slots=True)
class Service:
    """One request in service: when it arrived and when it got its slot; ``input_ns`` and
    ``output_ns`` are the parts of its service spent decoding and encoding (trap 11)."""

    arrival_ns: int
    start_ns: int
    failed: bool = False
    input_ns: int = 0
    output_ns: int = 0
    instance: int = 0

    @property
    def queue_ns(self) -> int:
        return self.start_ns - self.arrival_ns


@dataclass(slots=True, frozen=True)
class ServedTiming:
    """Server-side truth for one completed LLM request: arrival to first/last token write.

    ``chunk_ns`` holds every streamed chunk's write instant from arrival (the inter-token truth),
    ``done_ns`` the end marker's (where a client's e2e ends), and ``late_ns`` how far each chunk's
    write was past its model deadline (the server's own lateness,
    negative when the waker woke early), so a client's ITL can be checked against the gaps the
    server really produced and the server's share of an error told apart from the client's.
    """

    queue_ns: int
    ttft_ns: int
    e2e_ns: int
    output_tokens: int
    chunk_ns: tuple[int, ...] = ()
    late_ns: tuple[int, ...] = ()
    arrival_unix_ns: int = 0
    done_ns: int = 0  # the write of a stream's ``data: [DONE]`` from arrival (0: not streamed)

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
        strict = config.priority == "strict"
        self.instances = [Instance(i, FifoGate(config.capacity, strict)) for i in range(config.instances)]
        self.gate = self.instances[0].gate
        self.stats = ServerStats()
        self.waker = Waker()
        self._rng = random.Random(config.seed)
        self._instance_rng = random.Random(config.seed + 1)  # its own draws: the delays stay as seeded
        # Bounded: the last TIMINGS_KEPT completed LLM requests, served at /debug/timings.
        self.timings: deque[ServedTiming] = deque(maxlen=TIMINGS_KEPT)
        self.kv = (
            KvCache(config.kv_blocks, config.kv_block_tokens, config.kv_fragmentation)
            if config.kv_blocks
            else None
        )
        self.shapes = ShapeCache(round(config.shape_penalty_ms * 1e6))
        self.batcher = Batcher(self) if config.batch_max_size > 1 else None
        self.memory = MemoryModel(
            config.gpu_memory_used_bytes, config.gpu_memory_per_request_bytes, config.leak_bytes_per_request
        )

    @property
    def running(self) -> int:
        return sum(i.gate.running for i in self.instances)

    @property
    def waiting(self) -> int:
        return sum(i.gate.waiting for i in self.instances) + (self.kv.waiting if self.kv else 0)

    def pick_instance(self) -> Instance:
        if len(self.instances) == 1:
            return self.instances[0]
        weights = self.config.instance_weights or (1.0,) * len(self.instances)
        return self._instance_rng.choices(self.instances, weights)[0]

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
    async def serve(self, arrival_ns: int, priority: int = 0) -> AsyncIterator[Service]:
        """Wait for a slot (FIFO, or by priority when strict), yield the service record, then count
        it as success or failure.

        Service starts at arrival when a slot is free (request parsing is part of the service
        time, not extra), else when the slot is handed over.
        """
        instance = self.pick_instance()
        waited = await instance.gate.acquire(priority)
        svc = Service(
            arrival_ns=arrival_ns,
            start_ns=time.perf_counter_ns() if waited else arrival_ns,
            instance=instance.index,
        )
        instance.begin(svc.start_ns)
        try:
            yield svc
        except BaseException:
            svc.failed = True
            raise
        finally:
            instance.gate.release()
            end = time.perf_counter_ns()
            instance.end(end)
            self.stats.record(
                queue_ns=svc.queue_ns,
                compute_ns=end - svc.start_ns,
                total_ns=end - arrival_ns,
                ok=not svc.failed,
                input_ns=svc.input_ns,
                output_ns=svc.output_ns,
            )
            self.memory.finished()


class Batcher:
    """Triton's dynamic batcher, as the trap 3 knob sets it: a request waits until
    ``batch_max_size`` requests are there or ``batch_delay_ms`` has passed since the first of
    them; the batch then takes one slot and executes once (the first request's ``infer_ms``)."""

    def __init__(self, model: ServerModel) -> None:
        self.model = model
        self.max_size = model.config.batch_max_size
        self.delay_s = model.config.batch_delay_ms / 1e3
        self._pending: list[tuple[int, int, asyncio.Future[None]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self, arrival_ns: int, infer_ns: int) -> None:
        """Join the open batch and return once the batch has executed."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        self._pending.append((arrival_ns, infer_ns, fut))
        if len(self._pending) >= self.max_size:
            self._dispatch()
        elif len(self._pending) == 1:
            self._timer = loop.call_later(self.delay_s, self._dispatch)
        await fut

    def _dispatch(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        batch, self._pending = self._pending, []
        if batch:
            task = asyncio.get_running_loop().create_task(self._execute(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _execute(self, batch: list[tuple[int, int, asyncio.Future[None]]]) -> None:
        model = self.model
        instance = model.pick_instance()
        await instance.gate.acquire()
        start = time.perf_counter_ns()
        instance.begin(start)
        try:
            await model.waker.sleep_until(start + batch[0][1])
        finally:
            instance.gate.release()
            end = time.perf_counter_ns()
            instance.end(end)
        for i, (arrival, _, fut) in enumerate(batch):
            model.stats.record(
                queue_ns=start - arrival,
                compute_ns=end - start,
                total_ns=end - arrival,
                ok=True,
                executions=1 if i == 0 else 0,
            )
            model.memory.finished()
            if not fut.done():
                fut.set_result(None)
