"""Open loop: requests leave at pre-computed instants, whatever the server's latency.

Each record carries its scheduled instant, so lag and latency from the schedule are measured.
When ``cap`` requests are in flight, an arrival either waits for a slot and leaves late
(``overload="late"``; the ones behind it leave late too, no re-anchoring) or is counted as
dropped (``overload="drop"``). No arrival is skipped silently.

Clients with the callback fast path (:class:`CallbackClient`) are driven without a task per
request; others get one task per request around ``send``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from time import perf_counter_ns

from mcp_bench.load.common import CallbackClient, Sink, cut_off_record, drain
from mcp_bench.load.control import LevelControl
from mcp_bench.load.schedule import Schedule
from mcp_bench.plan import Overload
from mcp_bench.records import ProtocolClient, RequestPayload, RequestRecord

# The event loop's timers wake up to ~1 ms late (epoll has ms resolution), so the dispatcher
# sleeps until this long before an arrival and yields in a tight loop for the rest.
SPIN_NS = 1_200_000
# Time between computing the base instant and the first arrival, so arrival 0 is not born late.
LEAD_NS = 2_000_000
# Arrivals dispatched per loop turn when behind schedule, so responses are still read meanwhile.
BATCH = 64


async def sleep_until(target_ns: int) -> None:
    """Return at ``target_ns`` (perf_counter_ns) or as soon after as the loop allows, never before."""
    delta = target_ns - perf_counter_ns()
    if delta > SPIN_NS:
        await asyncio.sleep((delta - SPIN_NS) / 1e9)
    while perf_counter_ns() < target_ns:
        await asyncio.sleep(0)


class _Flight:
    """In-flight accounting shared by the dispatcher and the completions."""

    __slots__ = ("all_done", "count", "dispatching", "slot_waiter")

    def __init__(self) -> None:
        self.count = 0
        self.dispatching = True
        self.slot_waiter: asyncio.Future[None] | None = None
        self.all_done: asyncio.Future[None] | None = None

    def finished_one(self) -> None:
        self.count -= 1
        waiter = self.slot_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if (
            self.count == 0
            and not self.dispatching
            and self.all_done is not None
            and not self.all_done.done()
        ):
            self.all_done.set_result(None)


async def run_open(
    client: ProtocolClient,
    payloads: Iterator[RequestPayload],
    schedule: Schedule,
    cap: int,
    overload: Overload,
    sink: Sink,
    on_dropped: Callable[[], None],
    control: LevelControl,
    drain_s: float,
) -> str:
    """Send the schedule; returns the stop reason ("schedule", or the control's reason)."""
    loop = asyncio.get_running_loop()
    flight = _Flight()
    offsets = schedule.offsets_ns
    warmup_count = schedule.warmup_count
    n = len(offsets)
    base = perf_counter_ns() + LEAD_NS
    measure_from = base + offsets[warmup_count] if warmup_count < n else None
    tasks: set[asyncio.Task[None]] = set()
    fast = client if isinstance(client, CallbackClient) else None

    def done(rec: RequestRecord) -> None:
        flight.finished_one()
        sched = rec.scheduled_ns
        if measure_from is not None and sched is not None and sched >= measure_from:
            sink(rec)

    async def one(payload: RequestPayload, scheduled: int, measured: bool) -> None:
        try:
            rec = await client.send(payload)
        except asyncio.CancelledError:
            if measured:
                cut = cut_off_record(perf_counter_ns(), scheduled)
                cut.tags = payload.tags
                sink(cut)
            raise
        finally:
            flight.finished_one()
        rec.scheduled_ns = scheduled
        rec.tags = payload.tags
        if measured:
            sink(rec)

    def tagged(tags: dict[str, str]) -> Callable[[RequestRecord], None]:
        def done_tagged(rec: RequestRecord) -> None:
            rec.tags = tags
            done(rec)

        return done_tagged

    i = 0
    while i < n and not control.stopped:
        await sleep_until(base + offsets[i])
        now = perf_counter_ns()
        burst = 0
        # Dispatch every arrival that is due, a bounded batch per loop turn.
        while i < n and burst < BATCH and base + offsets[i] <= now:
            measured = i >= warmup_count
            target = base + offsets[i]
            i += 1
            burst += 1
            if flight.count >= cap:
                if overload == "drop":
                    if measured:
                        on_dropped()
                    continue
                while flight.count >= cap:
                    flight.slot_waiter = loop.create_future()
                    await flight.slot_waiter
                    flight.slot_waiter = None
            flight.count += 1
            if fast is not None:
                payload = next(payloads)
                fast.start(payload, target, done if payload.tags is None else tagged(payload.tags))
            else:
                task = loop.create_task(one(next(payloads), target, measured))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        if burst >= BATCH:
            await asyncio.sleep(0)
    flight.dispatching = False
    if fast is not None:
        if flight.count:
            flight.all_done = loop.create_future()
            try:
                await asyncio.wait_for(flight.all_done, drain_s)
            except TimeoutError:
                fast.cut_inflight()
    else:
        await drain(tasks, drain_s)
    return control.stop_reason if control.stopped else "schedule"
