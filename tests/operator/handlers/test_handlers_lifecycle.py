"""A graceful shutdown: the cleanup order kopf will follow, drills stopped (and so reverted)
first, worker processes ended, and the shutdown deadline below the pod's grace period."""

from __future__ import annotations

import asyncio
import multiprocessing
import time

import kopf
import pytest
from kopf._core.intents.causes import Activity

from mcp_operator.handlers import lifecycle, readiness, startup
from mcp_operator.settings import OperatorSettings


def test_cleanup_stops_drills_before_the_loads_are_killed() -> None:
    """kopf runs cleanup handlers in registration order: ours before readiness's stop_prober,
    which kills the drills' load processes (a drill whose load dies under it ends DrillFailed)."""
    handlers = kopf.get_default_registry()._activities.get_handlers(activity=Activity.CLEANUP)
    ids = [h.id for h in handlers]
    assert ids.index("graceful-shutdown") < ids.index("stop_prober"), ids


async def test_stop_drills_cancels_each_and_waits_for_its_revert(monkeypatch: pytest.MonkeyPatch) -> None:
    reverted: list[str] = []

    async def drill(uid: str) -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            await asyncio.sleep(0.05)  # the revert's API calls
            reverted.append(uid)

    drills = readiness.Drills()
    monkeypatch.setattr(readiness, "DRILLS", drills)
    for uid in ("a", "b"):
        drills.start(uid, 1, asyncio.create_task(drill(uid)))
    await asyncio.sleep(0)
    assert await lifecycle.stop_drills() == 2
    assert sorted(reverted) == ["a", "b"]
    assert await lifecycle.stop_drills() == 0


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
    stopped = lifecycle.terminate_workers(grace_seconds=1.0)
    assert {polite.pid, stubborn.pid} <= set(stopped)
    assert not polite.is_alive() and not stubborn.is_alive()
    assert stubborn.exitcode == -9 and polite.exitcode == -15
    assert time.monotonic() - started < 5


def test_shutdown_deadline_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_SHUTDOWN_TIMEOUT_SECONDS", raising=False)
    assert OperatorSettings.from_env().shutdown_timeout_seconds == 45
    monkeypatch.setenv("MCP_SHUTDOWN_TIMEOUT_SECONDS", "20")
    settings = kopf.OperatorSettings()
    monkeypatch.setattr(startup.metrics, "serve", lambda *args, **kwargs: None)
    startup.configure(settings=settings)
    assert settings.process.ultimate_exiting_timeout == 20
