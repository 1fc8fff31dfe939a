"""The Locust engine: real Locust subprocesses against servers on 127.0.0.1 (short levels)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_bench.engines import get_engine, run_plan
from mcp_bench.engines.external import ExternalEngineError
from mcp_bench.engines.locust import LocustEngine, parse_locust_stats, parse_record_line
from mcp_bench.load.common import CUT_OFF
from mcp_bench.load.schedule import arrival_schedule
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.records import ErrorKind
from mcp_bench.results import dumps_document, loads_document
from mcp_refserver import start_refserver

DELAY_MS = 3


def _plan(url: str, levels: dict[str, object], stage: dict[str, object], **extra: object) -> RunPlan:
    return RunPlan.from_dict({"url": url, "engine": "locust", "levels": levels, "stage": stage, **extra})


async def test_closed_loop_fills_the_same_document_as_builtin() -> None:
    async with await start_refserver() as srv:
        plan = _plan(
            f"{srv.url}/delay?ms={DELAY_MS}", {"concurrency": [2]}, {"warmup_s": 0.2, "requests": 40}
        )
        engine = LocustEngine()
        doc = await engine.run(plan)
    assert doc.engine.engine == "locust"
    assert doc.engine.engine_version == engine.engine_version() != "unknown"
    assert (doc.engine.server_name, doc.engine.server_version) == ("mcp-refserver", "0.1.0")
    (level,) = doc.levels
    assert level.mode == "closed" and level.concurrency == 2
    assert level.stop_reason == "requests"
    assert (level.sent, level.completed, level.failed) == (40, 40, 0)
    e2e = level.histogram("e2e")
    assert e2e is not None and e2e.count == 40
    # Every request waited DELAY_MS in the server; the histogram keeps sub-ms resolution.
    assert level.latency["e2e"].min_ms is not None and level.latency["e2e"].min_ms >= DELAY_MS
    assert level.latency["e2e"].p50_ms != round(level.latency["e2e"].p50_ms or 0)
    # Locust's own count covers warm-up too: at least the measured ones, and it agreed with the log.
    (stats,) = engine.last_stats
    assert stats.requests >= 40 and stats.failures == 0
    assert not any("locust counted" in n for n in doc.notes)
    again = loads_document(dumps_document(doc))
    assert again.levels[0].histogram("e2e") is not None
    assert again.engine.engine == "locust"


async def test_open_loop_sends_the_plan_schedule() -> None:
    rate, duration = 40.0, 0.5
    async with await start_refserver() as srv:
        plan = _plan(
            f"{srv.url}/delay?ms=1",
            {"rate": [rate], "arrival": "constant", "max_concurrency": 4},
            {"duration_s": duration},
        )
        doc = await run_plan(plan)
    (level,) = doc.levels
    expected = arrival_schedule(rate, "constant", duration_s=duration).measured_count
    assert level.mode == "open" and level.requested_rate == rate
    assert level.sent == level.completed == expected
    lag = level.histogram("schedule_lag")
    assert lag is not None and lag.count == expected
    sched = level.latency["e2e_from_schedule"]
    assert sched.count == expected
    assert sched.max_ms is not None and level.latency["e2e"].max_ms is not None
    assert sched.max_ms >= level.latency["e2e"].max_ms * 0.999
    assert level.achieved_rate is not None and level.achieved_rate > 0


async def test_connection_refused_is_counted_by_kind(closed_port: int) -> None:
    plan = _plan(f"http://127.0.0.1:{closed_port}/", {"concurrency": [1]}, {"requests": 5})
    doc = await run_plan(plan)
    (level,) = doc.levels
    assert level.completed == 0
    assert level.errors == {ErrorKind.CONNECT: 5}
    assert any(n.startswith("c=1: connect:") for n in doc.notes)
    assert not doc.measured_anything


async def test_http_status_and_cut_off_requests_are_counted(loopback_http) -> None:  # type: ignore[no-untyped-def]
    bad = _plan(loopback_http.url + "/status/503", {"concurrency": [2]}, {"requests": 6})
    (level,) = (await run_plan(bad)).levels
    assert level.errors == {ErrorKind.HTTP_STATUS: 6} and level.completed == 0

    # Requests still in flight when the drain time runs out are recorded as timeouts, not lost.
    slow = _plan(
        loopback_http.url + "/sleep/1000",
        {"concurrency": [2]},
        {"duration_s": 0.2, "drain_timeout_s": 0.2},
    )
    (level,) = (await run_plan(slow)).levels
    assert level.completed == 0
    assert level.errors == {ErrorKind.TIMEOUT: 2}


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"backend": "openai"}, "backend"),
        ({"stability": {}}, "stability"),
        ({"breaker": {"consecutive_errors": 3}}, "breaker"),
        ({"levels": {"rate": [10], "overload": "drop"}}, "levels.overload"),
    ],
)
def test_unsupported_plans_fail_before_traffic(change: dict[str, object], field: str) -> None:
    data: dict[str, object] = {
        "url": "http://127.0.0.1:9/",
        "engine": "locust",
        "levels": {"concurrency": [1]},
        "stage": {"requests": 1},
    }
    data.update(change)
    with pytest.raises(PlanError, match=f"^{field}:"):
        get_engine("locust").check_plan(RunPlan.from_dict(data))  # type: ignore[attr-defined]


async def test_missing_locust_command_is_a_clear_error(tmp_path: Path) -> None:
    plan = _plan("http://127.0.0.1:9/", {"concurrency": [1]}, {"requests": 1})
    with pytest.raises(ExternalEngineError, match="cannot start"):
        await LocustEngine([str(tmp_path / "no-such-locust")]).run(plan)


def test_record_lines_and_stats_parse() -> None:
    measured, rec = parse_record_line("1\t-\t1000\t4000\t200\t-\t-")
    assert measured and rec.ok and rec.e2e_ns == 3000 and rec.scheduled_ns is None and rec.status == 200
    measured, rec = parse_record_line("0\t900\t1000\t2000\t0\ttimeout\tcut_off")
    assert not measured and rec.error is ErrorKind.TIMEOUT and rec.error_detail == CUT_OFF
    assert rec.schedule_lag_ns == 100
    with pytest.raises(ValueError, match="7 tab-separated"):
        parse_record_line("1\t2\t3")
    with pytest.raises(ValueError):
        parse_record_line("1\t-\t1\t2\t0\tno-such-kind\t-")
    entries = [
        {"name": "a", "num_requests": 7, "num_failures": 2, "max_response_time": 12.5},
        {"name": "b", "num_requests": 3, "num_failures": 0, "max_response_time": 40.0},
    ]
    stats = parse_locust_stats(json.dumps(entries))
    assert (stats.requests, stats.failures, stats.max_response_time_ms) == (10, 2, 40.0)
    with pytest.raises(ValueError, match="list"):
        parse_locust_stats("{}")
