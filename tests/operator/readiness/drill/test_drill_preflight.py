"""The drill's preflight against real HTTP servers: a target nobody can reach, or one that does
not answer 2xx, ends the drill before any fault; the operator's Drill injects nothing then."""

from __future__ import annotations

import socket
from typing import Any

from aiohttp import web
from tests.httpserve import serving

from mcp_checks.verdict import Verdict
from mcp_operator.api.drill import DrillSpec
from mcp_operator.readiness.drill.load import LoadRunner
from mcp_operator.readiness.drill.preflight import preflight
from mcp_operator.readiness.drill.run import Drill, DrillContext


def _health(status: int) -> web.Application:
    async def health(_: web.Request) -> web.Response:
        return web.Response(status=status, text="x")

    app = web.Application()
    app.router.add_get("/health", health)
    return app


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


async def test_a_healthy_target_passes_and_others_are_named() -> None:
    async with serving(_health(200)) as url:
        assert await preflight(url + "/health", tries=1) is None
    async with serving(_health(503)) as url:
        sick = await preflight(url + "/health", tries=2)
    assert sick is not None and (sick.outcome, sick.reason) == (Verdict.ERROR, "TargetNotHealthy")
    assert "HTTP 503" in sick.message
    gone = await preflight(f"http://127.0.0.1:{_closed_port()}/health", tries=1)
    assert gone is not None and gone.reason == "TargetUnreachable" and "no fault was injected" in gone.message


async def test_a_drill_against_an_unreachable_target_runs_no_stage_and_injects_nothing() -> None:
    writes: list[dict[str, Any]] = []

    async def write_status(fields: dict[str, Any]) -> None:
        writes.append(fields)

    spec = DrillSpec.model_validate(
        {
            "stages": [
                {
                    "name": "s",
                    "load": {"rate": 5, "durationSeconds": 30},
                    "faults": [{"kind": "scaleDown", "workload": "srv", "replicas": 1}],
                }
            ]
        }
    )
    ctx = DrillContext(
        "ns",
        f"http://127.0.0.1:{_closed_port()}",
        "/health",
        api=None,
        write_status=write_status,  # type: ignore[arg-type]
    )
    outcome = await Drill(spec, ctx, LoadRunner()).run()
    assert [o.reason for o in outcome.outcomes] == ["TargetUnreachable"]
    assert outcome.journal == [] and outcome.reverted and outcome.kpis == []
    assert [s.phase for s in outcome.stages] == ["Skipped"]
    assert [s["phase"] for s in writes[-1]["stages"]] == ["Skipped"]  # as status holds it
    assert all(not w.get("faults") for w in writes)
