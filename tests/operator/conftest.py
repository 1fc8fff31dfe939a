"""Fixtures for operator unit tests: the project's reference server on 127.0.0.1 (no cluster),
and an in-memory Kubernetes API with an event log for the handler tests (see ``fakekube``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import kopf
import pytest
from tests.operator.fakekube import EventLog, FakeKube

from mcp_operator import kube
from mcp_refserver import RunningServer, start_refserver


@pytest.fixture
async def refserver() -> AsyncIterator[RunningServer]:
    """Plain HTTP ``/delay?ms=N`` answers after N ms; ``/health`` answers 200 at once."""
    async with await start_refserver() as server:
        yield server


@pytest.fixture
def kube_fake(monkeypatch: pytest.MonkeyPatch, posted_events: EventLog) -> FakeKube:
    """``mcp_operator.kube``'s API accessors answer from an in-memory store, and ``api_client()``
    is a stub that fails on use, so nothing reaches for a real cluster. Events are recorded too
    (``posted_events``): handlers post them as they go."""
    fake = FakeKube()
    monkeypatch.setattr(kube, "core", lambda: fake.core)
    monkeypatch.setattr(kube, "batch", lambda: fake.batch)
    monkeypatch.setattr(kube, "rbac", lambda: fake.rbac)
    monkeypatch.setattr(kube, "custom", lambda: fake.custom)
    monkeypatch.setattr(kube, "authz", lambda: fake.authz)
    monkeypatch.setattr(kube, "api_client", lambda: fake.api_client)
    return fake


@pytest.fixture
def posted_events(monkeypatch: pytest.MonkeyPatch) -> EventLog:
    """Events our handlers post, recorded at ``kopf.event`` (posting needs a running operator):
    ``mcp_operator.events.normal``/``warning`` run as they do in the operator, type and all."""
    log = EventLog()
    monkeypatch.setattr(kopf, "event", log.post)
    return log
