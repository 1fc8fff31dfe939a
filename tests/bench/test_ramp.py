"""Ramps: closed-loop workers start spread over the ramp, the open-loop rate rises over it; and
what the CLI and the external engines make of ramps and connection modes."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_bench.cli.parser import build_parser
from mcp_bench.cli.runflags import plan_from_args
from mcp_bench.engines import run_plan
from mcp_bench.engines.external import reject_unsupported
from mcp_bench.load.closed import run_closed
from mcp_bench.load.control import LevelControl
from mcp_bench.load.schedule import arrival_schedule
from mcp_bench.plan import PlanError, RunPlan, Stage
from mcp_bench.protocols.http_fast import FastHttpClient
from mcp_bench.records import RequestPayload, RequestRecord

WORKERS = 8
RAMP_S = 0.4


async def test_closed_loop_ramp_spreads_first_sends(loopback_http) -> None:  # type: ignore[no-untyped-def]
    # each request takes longer than the ramp, so every worker sends exactly one
    client = FastHttpClient(loopback_http.url + "/sleep/600", max_connections=WORKERS)
    await client.open()
    records: list[RequestRecord] = []
    payloads = iter(lambda: RequestPayload(), None)
    try:
        await client.prepare_connections("warm", WORKERS)
        await run_closed(
            client,
            payloads,
            WORKERS,
            Stage(requests=WORKERS),
            records.append,
            LevelControl(None, None),
            5.0,
            ramp_s=RAMP_S,
        )
    finally:
        await client.close()
    assert len(records) == WORKERS and all(r.ok for r in records)
    sent = sorted(r.sent_ns for r in records)
    offsets_s = [(t - sent[0]) / 1e9 for t in sent]
    step = RAMP_S / WORKERS
    print("\nfirst sends (s after the first):", [round(o, 4) for o in offsets_s])
    for i, offset in enumerate(offsets_s):
        # worker i leaves i * step after the level's start: never before, close after
        assert i * step - 0.005 <= offset < i * step + 0.2


def test_open_loop_rate_rises_over_the_ramp() -> None:
    sched = arrival_schedule(1000.0, "constant", duration_s=2.0, ramp_s=1.0)
    t = [o / 1e9 for o in sched.offsets_ns]

    def count(a: float, b: float) -> int:
        return sum(1 for x in t if a <= x < b)

    # rate r(t) = 1000 t over the first second: 1000 * (b^2 - a^2) / 2 arrivals in [a, b)
    assert count(0.0, 0.25) == pytest.approx(31.25, abs=1)
    assert count(0.25, 0.5) == pytest.approx(93.75, abs=1)
    assert count(0.5, 0.75) == pytest.approx(156.25, abs=1)
    assert count(0.75, 1.0) == pytest.approx(218.75, abs=1)
    assert count(1.0, 1.5) == pytest.approx(500, abs=1)  # full rate after the ramp
    # the same seed replays the same ramped Poisson schedule
    a = arrival_schedule(500.0, "poisson", seed=3, duration_s=1.0, ramp_s=0.5)
    b = arrival_schedule(500.0, "poisson", seed=3, duration_s=1.0, ramp_s=0.5)
    assert list(a.offsets_ns) == list(b.offsets_ns)


async def test_open_loop_ramp_through_the_engine(loopback_http) -> None:  # type: ignore[no-untyped-def]
    plan = RunPlan.from_dict(
        {
            "url": loopback_http.url + "/ok",
            "levels": {"rate": [400.0], "arrival": "constant", "ramp_s": 0.5},
            "stage": {"duration_s": 1.0},
        }
    )
    doc = await run_plan(plan)
    (lv,) = doc.levels
    # 400/s over 1 s with the first half second ramped: 400 * (1 - 0.25) arrivals
    assert lv.sent == pytest.approx(300, abs=2) and lv.failed == 0
    assert lv.connections == "warm" and doc.plan.levels.ramp_s == 0.5


def test_cli_connections_and_ramp() -> None:
    args = build_parser().parse_args(
        ["run", "--url", "http://x:1/", "--concurrency", "4", "--connections", "per-request", "--ramp", "5s"]
    )
    plan = plan_from_args(args)
    assert plan.levels.connections == "per-request" and plan.levels.ramp_s == 5.0
    default = plan_from_args(build_parser().parse_args(["run", "--url", "http://x:1/", "--concurrency", "4"]))
    assert default.levels.connections is None and default.levels.ramp_s == 0.0


def _levels(**kw: Any) -> RunPlan:
    return RunPlan.from_dict(
        {"url": "http://x:1/", "levels": {"concurrency": [2], **kw}, "stage": {"requests": 1}}
    )


@pytest.mark.parametrize("engine", ["locust", "k6"])
def test_external_engines_refuse_what_they_cannot_do(engine: str) -> None:
    for mode in ("warm", "per-request"):
        with pytest.raises(PlanError, match=rf"levels\.connections: the {engine} engine .*cold"):
            reject_unsupported(engine, _levels(connections=mode), ["http"])
    with pytest.raises(PlanError, match=r"levels\.ramp_s"):
        reject_unsupported(engine, _levels(ramp_s=5), ["http"])
    reject_unsupported(engine, _levels(connections="cold"), ["http"])  # what they do anyway
    reject_unsupported(engine, _levels(), ["http"])
