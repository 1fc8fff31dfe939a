"""Backend ``mix``: health checks, V2 inference and chat streaming against one reference server in
one run, each class on its own protocol, counted per class by the engine and per route by the
server itself."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from mcp_bench.engines import run_plan
from mcp_bench.plan import PlanError, RunPlan
from mcp_bench.protocols.mix import class_url
from mcp_refserver import RefServerConfig, start_refserver

CLASSES = [
    {"name": "health", "weight": 6, "backend": "http", "path": "/health"},
    {"name": "infer", "weight": 3, "backend": "triton-http", "model": "refmodel"},
    {"name": "chat", "weight": 1, "backend": "openai-chat", "model": "refmodel"},
]
ROUTES = {"health": "/health", "infer": "/v2/models/{m}/infer", "chat": "/v1/chat/completions"}


async def _served(url: str) -> dict[str, float]:
    """The server's own count of answered requests (200) by route."""
    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as resp:
        text = await resp.text()
    return {
        sample.labels["path"]: sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "mcp_refserver_http_requests"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels["code"] == "200"
    }


def _plan(url: str, **extra: Any) -> RunPlan:
    return RunPlan.model_validate(
        {
            "url": url,
            "backend": "mix",
            "levels": {"rate": [60.0], "arrival": "constant"},
            "stage": {"duration_s": 2.0},
            "payload": {"classes": CLASSES, "max_output_tokens": 4},
            **extra,
        }
    )


async def test_each_class_goes_over_its_own_protocol_and_is_counted_per_class() -> None:
    async with await start_refserver(RefServerConfig(ttft_ms=2, tpot_ms=1)) as srv:
        doc = await run_plan(_plan(srv.url))
        served = await _served(srv.url)
    (level,) = doc.levels
    assert level.breakdown is not None
    by_class = level.breakdown["class"]
    assert set(by_class) == set(ROUTES)
    for name, route in ROUTES.items():
        row = by_class[name]
        assert row.failed == 0 and row.completed > 0, (name, row)
        # what the engine counted for the class is what the server answered on that class's route
        assert served.get(route, 0) >= row.completed, (name, served)
    assert sum(r.completed for r in by_class.values()) == level.completed
    # the weights hold over about 120 draws: health the most, chat the least
    assert by_class["health"].completed > by_class["infer"].completed > by_class["chat"].completed
    assert by_class["chat"].histogram("ttft") is not None  # streamed: the chat class has its TTFT


def test_a_mix_names_every_class_backend_and_only_a_mix_does() -> None:
    with pytest.raises(PlanError, match=r"name no backend"):
        RunPlan.from_dict(
            {
                "url": "http://h:1",
                "backend": "mix",
                "levels": {"rate": [1.0]},
                "stage": {"duration_s": 1},
                "payload": {"classes": [{"name": "a"}]},
            }
        )
    with pytest.raises(PlanError, match=r"needs payload.classes"):
        RunPlan.from_dict(
            {"url": "http://h:1", "backend": "mix", "levels": {"rate": [1.0]}, "stage": {"duration_s": 1}}
        )
    with pytest.raises(PlanError, match=r"only backend 'mix' reads"):
        RunPlan.from_dict(
            {
                "url": "http://h:1",
                "levels": {"rate": [1.0]},
                "stage": {"duration_s": 1},
                "payload": {"classes": [{"name": "a", "backend": "http"}]},
            }
        )


@pytest.mark.parametrize(
    ("base", "path", "url"),
    [
        ("http://srv:8000", "/health", "http://srv:8000/health"),
        ("http://srv:8000/", "/health", "http://srv:8000/health"),
        ("http://srv:8000/api", "/v2/health/ready", "http://srv:8000/api/v2/health/ready"),
        ("http://srv:8000/api", None, "http://srv:8000/api"),
    ],
)
def test_a_class_path_is_appended_to_the_plans_url(base: str, path: str | None, url: str) -> None:
    assert class_url(base, path) == url
