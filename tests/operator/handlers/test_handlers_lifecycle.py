"""The operator's life: the runtime created by a startup handler and closed by the one cleanup
handler, in the order ``Runtime.close`` writes down (drills stopped, and so reverted, while
their loads still run; then worker processes, the prober's pool and the loads), and the shutdown
deadline below the pod's grace period."""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import kopf
import pytest
from tests.operator.fakekube import FakeKube

from mcp_operator.handlers import lifecycle, startup
from mcp_operator.readiness import runtime
from mcp_operator.settings import OperatorSettings


@pytest.fixture
def own_runtime() -> Iterator[None]:
    """These tests start and stop the process's runtime themselves; the module's is put back."""
    before = runtime._current
    yield
    runtime._current = before


def test_one_cleanup_handler_closes_the_runtime() -> None:
    """Nothing of the shutdown's order rests on the order modules register handlers in."""
    registry = kopf.get_default_registry()
    cleanup = [h.id for h in registry._activities.get_all_handlers() if h.activity.value == "cleanup"]
    startup_ids = [h.id for h in registry._activities.get_all_handlers() if h.activity.value == "startup"]
    assert cleanup == ["graceful-shutdown"]
    assert "runtime" in startup_ids


async def test_startup_creates_the_runtime_and_cleanup_closes_it(
    own_runtime: None, kube_fake: FakeKube
) -> None:
    logger = logging.getLogger(__name__)
    await cast(Callable[..., Any], lifecycle.start_runtime)(logger=logger)
    started = runtime.current()
    assert started.prober.max_concurrent == OperatorSettings.from_env().max_concurrent_checks
    await cast(Callable[..., Any], lifecycle.graceful_shutdown)(logger=logger)
    assert runtime.started() is None
    with pytest.raises(RuntimeError, match="not started"):
        runtime.current()


async def test_close_stops_drills_before_their_loads_and_the_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    """A drill reverts its faults while its load still runs (a drill whose load dies under it
    ends DrillFailed); only then are worker processes, the prober's pool and the loads ended."""
    order: list[str] = []
    closing = runtime.Runtime.from_settings(OperatorSettings.from_env())

    async def drill(uid: str) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0.05)  # the revert's API calls
            order.append(f"reverted {uid}")

    def workers(grace_seconds: float) -> list[int]:
        order.append("workers")
        return [4242]

    monkeypatch.setattr(runtime, "terminate_workers", workers)
    monkeypatch.setattr(closing.prober, "close", lambda: order.append("prober"))
    monkeypatch.setattr(closing.loads, "close", lambda: order.append("loads"))
    for uid in ("a", "b"):
        closing.drills.start(uid, 1, asyncio.create_task(drill(uid)))
    await asyncio.sleep(0)
    closed = await closing.close()
    assert closed == runtime.Closed(drills=2, workers=[4242])
    assert sorted(order[:2]) == ["reverted a", "reverted b"]
    assert order[2:] == ["workers", "prober", "loads"]
    assert await closing.stop_drills() == 0


# targets the spawned interpreter can import (a test module it cannot)
IGNORE_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); ready.set(); time.sleep(3600)"
)


def test_worker_processes_are_ended_even_one_that_ignores_sigterm() -> None:
    context = multiprocessing.get_context("spawn")
    polite = context.Process(target=time.sleep, args=(3600,))
    ready = context.Event()
    stubborn = context.Process(target=exec, args=(IGNORE_SIGTERM, {"ready": ready}))
    polite.start()
    stubborn.start()
    assert ready.wait(60)  # the stubborn one ignores SIGTERM from here on
    started = time.monotonic()
    stopped = runtime.terminate_workers(grace_seconds=1.0)
    assert {polite.pid, stubborn.pid} <= set(stopped)
    assert not polite.is_alive() and not stubborn.is_alive()
    assert stubborn.exitcode == -9 and polite.exitcode == -15
    assert time.monotonic() - started < 5


async def test_shutdown_deadline_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_SHUTDOWN_TIMEOUT_SECONDS", raising=False)
    assert OperatorSettings.from_env().shutdown_timeout_seconds == 45
    monkeypatch.setenv("MCP_SHUTDOWN_TIMEOUT_SECONDS", "20")
    settings = kopf.OperatorSettings()
    monkeypatch.setattr(startup.metrics, "serve", lambda *args, **kwargs: None)
    await startup.configure(settings=settings)
    assert settings.process.ultimate_exiting_timeout == 20
    # a deleted object's timers are looked at every second, not kopf's 60 s (its finalizer waits)
    assert settings.background.cancellation_polling == 1.0


async def test_the_runtime_knows_whether_the_operator_is_namespaced(
    own_runtime: None, kube_fake: FakeKube
) -> None:
    """``mcp-operator run`` hands kopf its ``--namespace`` list in the memo: a namespaced
    operator looks for lost verdict events in each namespace, a cluster-wide one in all at once
    (``readiness.verdictevents``), and it lists them as it starts, before any gate resumes."""
    logger = logging.getLogger(__name__)
    start = cast(Callable[..., Any], lifecycle.start_runtime)
    stop = cast(Callable[..., Any], lifecycle.graceful_shutdown)
    for memo, namespaced, listed in (
        (kopf.Memo({lifecycle.WATCHED: ("team-a",)}), True, [("list_namespaced_event", "team-a")]),
        (kopf.Memo({lifecycle.WATCHED: ()}), False, [("list_event_for_all_namespaces", "")]),
        (None, False, [("list_event_for_all_namespaces", "")]),
    ):
        kube_fake.calls.clear()
        await start(logger=logger, memo=memo)
        assert runtime.current().verdict_events.namespaced is namespaced
        assert [(c.method, c.namespace) for c in kube_fake.calls_to("list", "Event")] == listed
        await stop(logger=logger)
