"""The change handlers' rounds wait as keys: queued once, run in order by ``limit`` runners under
the admission, tried again after the delay a round asked for or after one that raised, in the
context of the handler that queued first, and stopped with their retries at shutdown."""

from __future__ import annotations

import asyncio
import contextvars
import logging

import pytest

from mcp_operator import metrics
from mcp_operator.readiness.admission import Admission
from mcp_operator.readiness.backlog import Backlog, Retry
from mcp_operator.ticks import ObjectKey

HANDLER_CONTEXT: contextvars.ContextVar[str] = contextvars.ContextVar("handler_context")


def _key(name: str, generation: int = 1) -> ObjectKey:
    return ObjectKey("mcp2026.io/v1alpha1", "MCPReadiness", "ns", name, f"uid-{name}", generation)


async def _until(condition: object, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not callable(condition) or not condition():
            await asyncio.sleep(0.005)


def test_a_key_is_queued_once_per_generation_and_counts_as_waiting() -> None:
    admission = Admission(2)
    backlog = Backlog(admission)
    assert backlog.add(_key("a")) and not backlog.add(_key("a"))  # kopf's create, then a resume
    assert backlog.add(_key("a", 2)) and backlog.add(_key("b"))  # a newer spec, another gate
    assert len(backlog) == 3 and admission.waiting == 3 and metrics.ROUNDS_WAITING._value.get() == 3
    assert [backlog.take(), backlog.take()] == [_key("a"), _key("a", 2)]
    assert backlog.add(_key("a"))  # taken: a later ask is queued again
    assert [backlog.take(), backlog.take(), backlog.take()] == [_key("b"), _key("a"), None]
    assert admission.waiting == 0 and metrics.ROUNDS_WAITING._value.get() == 0


async def test_runners_take_keys_in_order_at_most_the_limit_at_once_in_the_handlers_context() -> None:
    admission = Admission(3)
    backlog = Backlog(admission)
    running: set[str] = set()
    most, order, seen = 0, [], set()
    release = asyncio.Event()

    async def run(key: ObjectKey) -> None:
        nonlocal most
        order.append(key.name)
        seen.add(HANDLER_CONTEXT.get("none"))
        running.add(key.name)
        most = max(most, len(running))
        await release.wait()
        running.discard(key.name)

    backlog.serve(run, admission.limit)  # before any key: the runners wait for the first
    token = HANDLER_CONTEXT.set("kopf's object processing")
    try:
        for i in range(10):
            backlog.add(_key(f"g{i}"))
    finally:
        HANDLER_CONTEXT.reset(token)
    await _until(lambda: len(running) == 3)
    assert admission.waiting == 7  # queued keys wait as rounds do
    release.set()
    await _until(lambda: len(order) == 10 and not running)
    assert most == 3 and order == [f"g{i}" for i in range(10)]
    assert seen == {"kopf's object processing"} and admission.waiting == 0
    assert await backlog.close() == 0


async def test_a_round_that_asks_again_or_raises_is_queued_again_after_its_delay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    backlog = Backlog(Admission(2), error_delay_s=0.2)
    calls: list[tuple[str, float]] = []
    loop = asyncio.get_running_loop()
    started = loop.time()

    async def run(key: ObjectKey) -> None:
        calls.append((key.name, loop.time() - started))
        if len(calls) == 1:
            raise Retry("a name does not resolve yet", 0.1)
        if len(calls) == 2:
            raise ValueError("what no one expected")

    backlog.add(_key("late"))
    backlog.serve(run, 2)
    with caplog.at_level(logging.ERROR, logger="mcp_operator.readiness.backlog"):
        await _until(lambda: len(calls) == 3)
    (first, _), (second, after_retry), (third, after_error) = calls
    assert first == second == third == "late"
    assert after_retry >= 0.1 and after_error >= 0.3  # 0.1 s, then 0.2 s more
    (logged,) = caplog.records
    assert "ns/late: the round failed; trying again in 0.2s" in logged.getMessage()
    assert logged.exc_info is not None and "what no one expected" in str(logged.exc_info[1])
    assert len(backlog) == 0 and await backlog.close() == 0


async def test_close_cancels_the_running_rounds_and_the_retries_that_wait() -> None:
    backlog = Backlog(Admission(1))
    cancelled = asyncio.Event()
    ran: list[str] = []

    async def run(key: ObjectKey) -> None:
        ran.append(key.name)
        if key.name == "later":
            raise Retry("not yet", 2)
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    backlog.serve(run, 1)
    backlog.add(_key("later"))
    backlog.add(_key("long"))
    await _until(lambda: ran == ["later", "long"])
    assert await backlog.close() == 1  # the retry of "later" was waiting
    assert cancelled.is_set() and len(backlog) == 0
    await asyncio.sleep(2.2)  # past the retry's delay: it was cancelled, not queued
    assert len(backlog) == 0 and ran == ["later", "long"]
