"""Fixtures for the server-metrics tests: a real prometheus_client exporter on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Counter, start_http_server


@pytest.fixture
def jobs_exporter() -> Iterator[tuple[int, Counter]]:
    """(port, counter): an exporter on 127.0.0.1 serving one counter, ``jobs_total``, on every path."""
    registry = CollectorRegistry()
    counter = Counter("jobs", "jobs done", registry=registry)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        yield server.server_port, counter
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
