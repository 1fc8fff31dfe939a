"""The periodic ticks (``mcp_operator.ticks``): kopf's non-sharp timer semantics on a clock the
tests move, and an object that wants no tick costs nothing (the reason they left kopf, which
holds the whole body of every object of a resource with a timer)."""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

import pytest

from mcp_operator.ticks import ObjectKey, Tick, Ticker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _body(uid: str = "u1", generation: int = 1, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPReadiness",
        "metadata": {"namespace": "ns", "name": f"gate-{uid}", "uid": uid, "generation": generation},
        "spec": spec,
        "status": {},
    }


def _wants(key: str) -> Any:
    return lambda spec, status: bool(spec.get(key))


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.fixture
def ran() -> list[ObjectKey]:
    return []


@pytest.fixture
def clock() -> Clock:
    return Clock()


def _ticker(clock: Clock, ran: list[ObjectKey], fail: bool = False) -> Ticker:
    async def work(key: ObjectKey) -> None:
        ran.append(key)
        if fail:
            raise RuntimeError("boom")

    return Ticker([Tick("look", 5.0, 2.0, _wants("look"), work, backoff_s=60.0)], clock=clock)


async def test_a_tick_runs_after_its_initial_delay_then_every_interval_after_the_run(
    clock: Clock, ran: list[ObjectKey]
) -> None:
    ticker = _ticker(clock, ran)
    ticker.observe(None, _body(look=True))  # the initial listing has no event type
    assert ticker.due(("u1", "look")) == 1002.0
    assert ticker.start_due() == []
    clock.now = 1002.0
    (task,) = ticker.start_due()
    assert ticker.due(("u1", "look")) is None  # not twice at once
    ticker.observe("MODIFIED", _body(look=True))  # an event while it runs schedules nothing
    assert ticker.due(("u1", "look")) is None
    clock.now = 1003.5
    await task
    assert [k.name for k in ran] == ["gate-u1"]
    assert ticker.due(("u1", "look")) == 1008.5  # interval from the end of the run


async def test_the_tick_gets_the_generation_of_the_last_event_and_a_body_for_events(
    clock: Clock, ran: list[ObjectKey]
) -> None:
    ticker = _ticker(clock, ran)
    ticker.observe("ADDED", _body(look=True))
    ticker.observe("MODIFIED", _body(generation=3, look=True))
    clock.now = 1010.0
    await asyncio.gather(*ticker.start_due())
    (key,) = ran
    assert key.generation == 3
    assert key.body == {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPReadiness",
        "metadata": {"namespace": "ns", "name": "gate-u1", "uid": "u1", "generation": 3},
    }


async def test_an_object_that_wants_no_tick_is_not_held(clock: Clock, ran: list[ObjectKey]) -> None:
    ticker = _ticker(clock, ran)
    for i in range(1000):
        ticker.observe(None, _body(uid=f"u{i}"))
    assert ticker.tracked() == 0
    ticker.observe("MODIFIED", _body(uid="u7", look=True))
    assert ticker.tracked() == 1
    ticker.observe("MODIFIED", _body(uid="u7"))  # no longer wanted: forgotten, nothing due
    assert ticker.tracked() == 0 and ticker.due(("u7", "look")) is None
    clock.now = 2000.0
    assert ticker.start_due() == [] and ran == []


@pytest.mark.parametrize(
    "event",
    [("DELETED", {}), ("MODIFIED", {"deletionTimestamp": "2026-12-06T00:00:00Z"})],
)
async def test_a_deleted_or_deleting_object_is_not_ticked_again(
    clock: Clock, ran: list[ObjectKey], event: tuple[str, dict[str, Any]]
) -> None:
    ticker = _ticker(clock, ran)
    ticker.observe(None, _body(look=True))
    clock.now = 1002.0
    (task,) = ticker.start_due()
    kind, meta = event
    gone = _body(look=True)
    gone["metadata"].update(meta)
    ticker.observe(kind, gone)
    await task
    assert len(ran) == 1  # the run in progress finishes
    assert ticker.due(("u1", "look")) is None and ticker.tracked() == 0


async def test_a_tick_that_raises_is_logged_and_tried_again_after_its_backoff(
    clock: Clock, ran: list[ObjectKey], caplog: pytest.LogCaptureFixture
) -> None:
    ticker = _ticker(clock, ran, fail=True)
    ticker.observe(None, _body(look=True))
    clock.now = 1002.0
    await asyncio.gather(*ticker.start_due())
    assert ticker.due(("u1", "look")) == 1062.0
    assert "ns/gate-u1: look failed; trying again in 60s" in caplog.text and "boom" in caplog.text


async def test_close_cancels_the_running_ticks_and_a_later_start_goes_on(
    clock: Clock, ran: list[ObjectKey]
) -> None:
    release = asyncio.Event()

    async def slow(key: ObjectKey) -> None:
        ran.append(key)
        await release.wait()

    ticker = Ticker([Tick("look", 5.0, 0.0, _wants("look"), slow)], clock=clock)
    ticker.observe(None, _body(look=True))
    ticker.start(resolution_s=0.01)
    while not ran:
        await asyncio.sleep(0.01)
    assert await ticker.close() == 1
    assert ticker.due(("u1", "look")) == clock.now + 5.0  # still wanted: due again after a start
    await _settle()


WHERE: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="nowhere")


async def test_a_tick_runs_in_the_context_of_the_handler_that_fed_the_first_event(clock: Clock) -> None:
    """kopf posts an event only from a context its object processing set up: a tick started by
    the loop must see what the first watch event's handler saw, and leak nothing back."""
    seen: list[str] = []

    async def look(key: ObjectKey) -> None:
        seen.append(WHERE.get())
        WHERE.set("changed by the tick")

    ticker = Ticker([Tick("look", 5.0, 0.0, _wants("look"), look)], clock=clock)

    def handler() -> None:
        WHERE.set("kopf's object processing")
        ticker.observe(None, _body(look=True))

    contextvars.copy_context().run(handler)
    assert WHERE.get() == "nowhere"
    await asyncio.gather(*ticker.start_due())
    clock.now += 5.0
    await asyncio.gather(*ticker.start_due())
    assert seen == ["kopf's object processing"] * 2
