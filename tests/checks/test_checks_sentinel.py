"""The sentinel's judgement of a record: success share and recovery after a fault."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web
from tests.httpserve import serving

from mcp_checks.sentinel import Sample, SentinelRecord, run_sentinel

pytestmark = pytest.mark.timing  # run under load by `make test-stress`


def _record(pattern: str, step: float = 0.1, start: float = 100.0) -> SentinelRecord:
    """One sample per character: '+' succeeded, '-' failed."""
    return SentinelRecord([Sample(start + i * step, c == "+", 1.0) for i, c in enumerate(pattern)])


def test_recovery_is_the_first_moment_of_a_sustained_success_window() -> None:
    record = _record("++++----+-++++++++")
    # fault at t=100.4 (index 4); the success at index 8 is not sustained, index 10 is
    assert record.recovery_seconds(since=100.4, window_s=0.5) == pytest.approx(0.6)
    assert record.first_failure(100.0, 200.0) == pytest.approx(100.4)


def test_never_recovered_is_none_not_zero() -> None:
    assert _record("++++------").recovery_seconds(since=100.4, window_s=0.3) is None
    # a success window that the record does not see the end of does not count either
    assert _record("----++").recovery_seconds(since=100.0, window_s=1.0) is None


def test_no_outage_recovers_at_once() -> None:
    assert _record("++++++++").recovery_seconds(since=100.2, window_s=0.3) == pytest.approx(0.0)


def test_an_outage_that_begins_late_is_timed_from_its_first_failure() -> None:
    """Injected at t=100.0, clients fail from 102.5 to 105.4: the recovery is that outage (3 s),
    not the 0 s of the clean window right after the injection."""
    record = _record("+" * 25 + "-" * 30 + "+" * 20)
    outage, recovery = record.outage_recovery(since=100.0, until=200.0, window_s=1.0)
    assert outage and recovery == pytest.approx(3.0)


def test_a_flapping_outage_is_one_outage_up_to_its_last_failure() -> None:
    """Failures 0.3 s apart with successes between are one outage when the window is 0.5 s."""
    record = _record("++--+--+--" + "+" * 10)
    assert record.outage_recovery(100.0, 200.0, window_s=0.5) == (True, pytest.approx(0.8))
    assert record.outage_recovery(100.0, 100.2, window_s=0.5) == (False, 0.0)  # none in the span
    assert _record("++--" + "-" * 5).outage_recovery(100.0, 200.0, 0.3) == (True, None)


def test_success_ratio_over_a_span_and_no_data() -> None:
    record = _record("++-+")
    assert record.success_ratio() == 0.75
    assert record.success_ratio(100.15, 100.25) == 0.0
    assert record.success_ratio(500, 600) is None


async def test_the_sentinel_sees_a_real_outage_and_the_recovery() -> None:
    healthy = {"up": True}

    async def health(_: web.Request) -> web.Response:
        return web.Response(status=200 if healthy["up"] else 503)

    app = web.Application()
    app.router.add_get("/health", health)
    record, stop = SentinelRecord(), asyncio.Event()
    async with serving(app) as url:
        task = asyncio.create_task(run_sentinel(f"{url}/health", record, stop, interval_s=0.02))
        try:
            await asyncio.sleep(0.2)
            healthy["up"], fault = False, time.time()
            await asyncio.sleep(0.3)
            healthy["up"], restored = True, time.time()
            await asyncio.sleep(0.4)
        finally:
            stop.set()
            await task
    # the truth is how long the server really answered 503 (a busy host stretches the sleeps): the
    # sentinel, probing every 20 ms, sees recovery within a few probes of it, never before it
    outage = restored - fault
    recovery = record.recovery_seconds(fault, window_s=0.2)
    assert recovery is not None and outage - 0.03 <= recovery <= outage + 0.2, (recovery, outage)
    ratio = record.success_ratio()
    assert ratio is not None and 0.4 < ratio < 0.9
