"""Closed loop: ``concurrency`` workers, each sending its next request when the previous one ends."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from time import perf_counter_ns

from mcp_bench.load.common import Sink, cut_off_record, drain
from mcp_bench.load.control import LevelControl
from mcp_bench.load.open import sleep_until
from mcp_bench.plan import Stage
from mcp_bench.records import ProtocolClient, RequestPayload


async def run_closed(
    client: ProtocolClient,
    payloads: Iterator[RequestPayload],
    concurrency: int,
    stage: Stage,
    sink: Sink,
    control: LevelControl,
    drain_s: float,
    *,
    ramp_s: float = 0.0,
) -> str:
    """Run one level; requests sent during warm-up are not handed to ``sink``. Returns the stop reason.

    With ``ramp_s``, worker ``i`` of ``n`` sends its first request ``i/n * ramp_s`` after the
    level's start, so the connections' first requests do not all leave at once.

    The level ends at ``warmup + duration`` (no new requests; in-flight ones finish within
    ``drain_s``), after ``stage.requests`` measured requests, or when ``control`` stops it.
    """
    start = perf_counter_ns()
    measure_start = start + int(stage.warmup_s * 1e9)
    measure_end = None if stage.duration_s is None else measure_start + int(stage.duration_s * 1e9)
    budget = stage.requests
    issued = 0

    async def worker(first_ns: int) -> None:
        nonlocal issued
        send = client.send
        if first_ns > start:
            await sleep_until(first_ns)
        while not control.stopped:
            now = perf_counter_ns()
            if measure_end is not None and now >= measure_end:
                return
            measured = now >= measure_start
            if measured and budget is not None:
                if issued >= budget:
                    return
                issued += 1
            payload = next(payloads)
            try:
                rec = await send(payload)
            except asyncio.CancelledError:
                if measured:
                    cut = cut_off_record(now)
                    cut.tags = payload.tags
                    sink(cut)
                raise
            if measured:
                rec.tags = payload.tags
                sink(rec)

    step = int(ramp_s * 1e9) // concurrency
    tasks = [asyncio.create_task(worker(start + i * step)) for i in range(concurrency)]
    if measure_end is None:
        await asyncio.wait(tasks)
    else:
        # Wait through the planned time, then give in-flight requests ``drain_s`` to finish.
        deadline_s = (measure_end - perf_counter_ns()) / 1e9 + drain_s
        await drain(tasks, max(deadline_s, 0.0))
    if control.stopped:
        return control.stop_reason
    return "requests" if budget is not None and issued >= budget else "duration"
