"""Async tests here run on the reference server's precise-timer loop (select, not epoll), so the
server's modelled delays are not blurred by epoll's millisecond rounding."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp_refserver.loop import precise_event_loop


def pytest_asyncio_loop_factories(config: Any, item: Any) -> Mapping[str, Callable[[], Any]]:
    return {"precise": precise_event_loop}
