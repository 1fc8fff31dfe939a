"""Backend ``mix``: a traffic mix against one service, each request class on its own protocol
(health checks over plain HTTP, V2 inference, chat streaming), drawn by the classes' weights.

One client per class, each built by its own backend's factory from the plan with that class's
backend, path and model; a request goes to the client of the class the payload source drew for
it (the ``class`` tag), so latency and errors are reported per class as for any classed plan.
The mix has no callback fast path: each request is a task, which costs the client more per
request than a single-protocol plan at the same rate (the engine flags a client-bound level).
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns
from urllib.parse import urlsplit, urlunsplit

from mcp_bench.load.payloads import CLASS_TAG
from mcp_bench.plan import RequestClass, RunPlan
from mcp_bench.protocols import protocol_factory, register_protocol
from mcp_bench.records import (
    ConnectionControl,
    ConnectionMode,
    ConnectTime,
    ErrorKind,
    ProtocolClient,
    RequestPayload,
    RequestRecord,
)


def class_url(base: str, path: str | None) -> str:
    """The plan's url with the class's path appended to its own path (none: the plan's url)."""
    if not path:
        return base
    parts = urlsplit(base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


def class_plan(plan: RunPlan, cls: RequestClass) -> RunPlan:
    """The plan one class's client is built from: its backend, url and model, no classes."""
    assert cls.backend is not None
    payload = plan.payload.model_copy(update={"classes": []})
    return plan.model_copy(
        update={
            "backend": cls.backend,
            "url": class_url(plan.url, cls.path),
            "model": cls.model if cls.model is not None else plan.model,
            "payload": payload,
        }
    )


class MixClient:
    """One protocol client per request class, chosen per request by the class it was drawn into."""

    def __init__(self, clients: dict[str, ProtocolClient]) -> None:
        self.clients = clients

    async def open(self) -> None:
        await asyncio.gather(*(c.open() for c in self.clients.values()))

    async def close(self) -> None:
        await asyncio.gather(*(c.close() for c in self.clients.values()), return_exceptions=True)

    async def send(self, payload: RequestPayload) -> RequestRecord:
        name = (payload.tags or {}).get(CLASS_TAG, "")
        client = self.clients.get(name)
        if client is None:  # the payload source draws only the plan's classes: a defect if seen
            now = perf_counter_ns()
            return RequestRecord(
                sent_ns=now, end_ns=now, error=ErrorKind.OTHER, error_detail=f"no client for class {name!r}"
            )
        return await client.send(payload)

    async def fingerprint(self) -> dict[str, str]:
        """The first class's server answers for the service (one service behind every class)."""
        for client in self.clients.values():
            found = await client.fingerprint()
            if any(found.values()):
                return found
        return {}

    async def prepare_connections(self, mode: ConnectionMode, count: int) -> None:
        await asyncio.gather(
            *(
                c.prepare_connections(mode, count)
                for c in self.clients.values()
                if isinstance(c, ConnectionControl)
            )
        )

    def take_connect_times(self) -> list[ConnectTime]:
        return [
            t
            for c in self.clients.values()
            if isinstance(c, ConnectionControl)
            for t in c.take_connect_times()
        ]


def _factory(plan: RunPlan, max_connections: int) -> ProtocolClient:
    return MixClient(
        {
            c.name: protocol_factory(c.backend or "")(class_plan(plan, c), max_connections)
            for c in plan.payload.classes
        }
    )


register_protocol("mix", _factory)
