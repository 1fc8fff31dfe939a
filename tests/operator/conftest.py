"""Fixtures for operator unit tests: the project's reference server on 127.0.0.1 (no cluster)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mcp_refserver import RunningServer, start_refserver


@pytest.fixture
async def refserver() -> AsyncIterator[RunningServer]:
    """Plain HTTP ``/delay?ms=N`` answers after N ms; ``/health`` answers 200 at once."""
    async with await start_refserver() as server:
        yield server
