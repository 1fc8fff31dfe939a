"""The handler tests call handlers as kopf calls them, after the operator's start-up: the
runtime (claims, drills, the prober's pool) exists, one per test module, and is closed at the
module's end as the cleanup handler closes it (the prober's worker processes ended)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from mcp_operator.readiness import runtime


@pytest.fixture(autouse=True, scope="module")
def started_runtime() -> Iterator[runtime.Runtime]:
    started = runtime.start()
    yield started
    if runtime.started() is started:
        asyncio.run(runtime.stop())
    else:  # a test started its own: this one still holds a pool
        asyncio.run(started.close())
