"""Async tests here run on the reference server's precise-timer loop (select, not epoll), so the
server's modelled delays are not blurred by epoll's millisecond rounding."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import pytest

from mcp_bench.records import ProtocolClient
from mcp_refserver.loop import precise_event_loop

Fingerprint = Callable[[ProtocolClient], Awaitable[dict[str, str]]]


def pytest_asyncio_loop_factories(config: Any, item: Any) -> Mapping[str, Callable[[], Any]]:
    return {"precise": precise_event_loop}


@pytest.fixture
def fingerprint_of() -> Fingerprint:
    """Open a client, read the server's fingerprint through it, close it."""

    async def get(client: ProtocolClient) -> dict[str, str]:
        await client.open()
        try:
            return await client.fingerprint()
        finally:
            await client.close()

    return get
