"""Rounds are admitted in the order they ask, at most ``limit`` at once (a cold start's backlog)."""

from __future__ import annotations

import asyncio

import pytest

from mcp_operator import metrics
from mcp_operator.readiness.admission import Admission
from mcp_operator.readiness.runtime import Runtime
from mcp_operator.settings import OperatorSettings


async def test_at_most_the_limit_run_at_once_and_the_rest_wait_in_order() -> None:
    admission = Admission(3)
    running: set[int] = set()
    most = 0
    order: list[int] = []
    release = asyncio.Event()

    async def round_(i: int) -> None:
        nonlocal most
        async with admission.admitted():
            order.append(i)
            running.add(i)
            most = max(most, len(running))
            await release.wait()
            running.discard(i)

    tasks = [asyncio.create_task(round_(i)) for i in range(10)]
    await asyncio.sleep(0.05)
    assert (sorted(running), admission.waiting) == ([0, 1, 2], 7)
    assert metrics.ROUNDS_WAITING._value.get() == 7
    release.set()
    await asyncio.gather(*tasks)
    assert most == 3 and order == list(range(10))
    assert admission.waiting == 0 and metrics.ROUNDS_WAITING._value.get() == 0


async def test_a_round_that_raises_gives_its_place_back() -> None:
    admission = Admission(1)
    with pytest.raises(RuntimeError):
        async with admission.admitted():
            raise RuntimeError("the round failed")
    async with asyncio.timeout(1):
        async with admission.admitted():
            pass


def test_the_limit_comes_from_the_settings_and_must_admit_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_MAX_ROUNDS_ADMITTED", "7")
    assert Runtime.from_settings(OperatorSettings.from_env()).admission.limit == 7
    with pytest.raises(ValueError, match="at least one"):
        Admission(0)
