"""Pieces both load models share: the record sink type and the drain of in-flight requests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from time import perf_counter_ns
from typing import Protocol, runtime_checkable

from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord

Sink = Callable[[RequestRecord], None]

# Detail of records made for requests still in flight when a level's drain time ran out.
CUT_OFF = "still in flight when the level's drain time ran out"


@runtime_checkable
class CallbackClient(Protocol):
    """Optional fast path of a protocol client: completion by callback, no task per request."""

    def start(
        self, payload: RequestPayload, scheduled_ns: int | None, on_done: Callable[[RequestRecord], None]
    ) -> None: ...

    def cut_inflight(self, detail: str = CUT_OFF) -> int: ...


def cut_off_record(sent_ns: int, scheduled_ns: int | None = None) -> RequestRecord:
    return RequestRecord(
        sent_ns=sent_ns,
        end_ns=perf_counter_ns(),
        scheduled_ns=scheduled_ns,
        error=ErrorKind.TIMEOUT,
        error_detail=CUT_OFF,
    )


async def drain(tasks: Collection[asyncio.Task[None]], timeout_s: float | None) -> int:
    """Wait for in-flight requests; cancel those still running after ``timeout_s``.

    Cancelled requests record themselves as timeouts (see :func:`cut_off_record`), so nothing that
    was sent disappears from the result. Returns how many were cancelled.
    """
    if not tasks:
        return 0
    _, pending = await asyncio.wait(list(tasks), timeout=timeout_s)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
    return len(pending)
