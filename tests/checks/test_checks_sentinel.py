"""The sentinel's judgement of a record: success share and recovery after a fault."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import itertools
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web
from tests.httpserve import serving

from mcp_checks.dialhooks import DialHooks
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


def _at(*samples: tuple[float, bool]) -> SentinelRecord:
    return SentinelRecord([Sample(at, ok, 1.0) for at, ok in samples])


def test_a_span_includes_its_start_and_excludes_its_end() -> None:
    record = _at((10.0, False), (11.0, True), (12.0, False))
    assert record.between(10.0, 12.0) == record.samples[:2]
    assert record.success_ratio(10.0, 12.0) == 0.5
    assert record.first_failure(10.0, 12.0) == 10.0  # a failure at the very start counts
    assert record.first_failure(10.5, 12.0) is None  # and one at the very end does not


def test_the_whole_record_is_the_default_span() -> None:
    assert _at((0.5, False), (1.5, True)).success_ratio() == 0.5


def test_the_window_ends_where_the_next_window_begins() -> None:
    """A window of 1 s from t=10 holds what was sent in [10, 11): a failure at 11 is after it,
    and a sample at 11 is the one that shows the window is complete."""
    assert _at((10.0, True), (11.0, False), (12.0, True), (13.0, True)).recovery_seconds(10.0, 1.0) == 0.0
    assert _at((10.0, True), (11.0, True)).recovery_seconds(10.0, 1.0) == 0.0


@contextlib.asynccontextmanager
async def _target(delay_s: float = 0.0, status: int = 200) -> AsyncIterator[tuple[str, set[Any]]]:
    """A real server answering ``status`` after ``delay_s``; yields its URL and the peers seen."""
    peers: set[Any] = set()

    async def answer(request: web.Request) -> web.Response:
        peers.add(request.transport.get_extra_info("peername") if request.transport else None)
        await asyncio.sleep(delay_s)
        return web.Response(status=status)

    app = web.Application()
    app.router.add_get("/health", answer)
    async with serving(app) as url:
        yield f"{url}/health", peers


async def _run_for(url: str, seconds: float, **kw: Any) -> SentinelRecord:
    record, stop = SentinelRecord(), asyncio.Event()
    task = asyncio.create_task(run_sentinel(url, record, stop, **kw))
    try:
        await asyncio.sleep(seconds)
    finally:
        stop.set()
        await task
    return record


async def test_each_probe_is_a_fresh_connection() -> None:
    async with _target() as (url, peers):
        record = await _run_for(url, 0.5, interval_s=0.05)
    assert len(record.samples) >= 2 and all(s.ok for s in record.samples)
    assert len(peers) == len(record.samples)  # a kept-alive connection would hide a dead backend


async def test_a_redirect_or_error_status_is_a_failed_probe() -> None:
    async with _target(status=300) as (url, _):
        record = await _run_for(url, 0.3, interval_s=0.05)
    assert record.samples and not any(s.ok for s in record.samples)


async def test_no_answer_is_a_failed_probe_not_a_crash() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    record = await _run_for(f"http://127.0.0.1:{port}/health", 0.3, interval_s=0.05)
    assert record.samples and all(s.ok is False for s in record.samples)
    assert record.success_ratio() == 0.0


async def test_the_dial_hooks_judge_every_probe() -> None:
    def refuse(addr_info: tuple[Any, ...]) -> socket.socket:
        raise OSError(errno.EACCES, "refused by the target policy")

    async with _target() as (url, peers):
        record = await _run_for(url, 0.3, interval_s=0.05, dial=DialHooks(socket_factory=refuse))
    assert record.samples and not any(s.ok for s in record.samples) and not peers


async def test_a_probe_gives_up_after_its_timeout_by_default() -> None:
    """The default time-out is one second: an answer 1.5 s late is a failed probe, timed near 1 s."""
    async with _target(delay_s=1.5) as (url, _):
        record = await _run_for(url, 0.2)
    first = record.samples[0]
    assert first.ok is False and 900.0 <= first.latency_ms < 1500.0, first


async def test_probes_keep_their_cadence_and_time_each_answer() -> None:
    """Sent every ``interval_s`` from send to send (an answer's own time is part of the
    interval, not added to it); each sample's latency is that answer's time in ms."""
    async with _target(delay_s=0.2) as (url, _):
        record = await _run_for(url, 2.0, interval_s=0.3)
    sent = [s.at for s in record.samples]
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    assert len(gaps) >= 2 and 0.27 <= min(gaps) < 0.45, gaps
    assert all(150.0 <= s.latency_ms < 2000.0 for s in record.samples), record.samples


async def test_probes_follow_the_default_interval() -> None:
    async with _target() as (url, _):
        record = await _run_for(url, 0.6)
    assert len(record.samples) >= 3  # one every 100 ms by default
