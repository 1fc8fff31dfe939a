"""The request counter by route and status, and the load shedding that answers 503 when full."""

from __future__ import annotations

import asyncio

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from mcp_refserver import RefServerConfig, start_refserver


async def _requests(session: aiohttp.ClientSession, url: str) -> dict[tuple[str, str], float]:
    async with session.get(f"{url}/metrics") as resp:
        text = await resp.text()
    counts: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "mcp_refserver_http_requests":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    counts[(sample.labels["path"], sample.labels["code"])] = sample.value
    return counts


async def test_every_request_is_counted_by_route_and_status() -> None:
    async with await start_refserver(RefServerConfig()) as srv, aiohttp.ClientSession() as s:
        for _ in range(3):
            async with s.get(f"{srv.url}/delay") as resp:
                assert resp.status == 200
        async with s.get(f"{srv.url}/delay?ms=-1") as resp:
            assert resp.status == 400
        async with s.get(f"{srv.url}/no/such/path/{123}") as resp:
            assert resp.status == 404
        counts = await _requests(s, srv.url)
    assert counts[("/delay", "200")] == 3
    assert counts[("/delay", "400")] == 1
    assert counts[("other", "404")] == 1  # a path no route serves does not make a label of its own


async def test_a_full_server_sheds_at_once_and_counts_the_shed_requests() -> None:
    config = RefServerConfig(max_inflight=2)
    async with await start_refserver(config) as srv, aiohttp.ClientSession() as s:

        async def one() -> int:
            async with s.get(f"{srv.url}/delay?ms=300") as resp:
                return resp.status

        slow = [asyncio.create_task(one()) for _ in range(2)]
        await asyncio.sleep(0.1)
        async with s.get(f"{srv.url}/delay") as resp:
            assert resp.status == 503 and resp.headers["Retry-After"] == "1"
        async with s.get(f"{srv.url}/health") as resp:
            assert resp.status == 200  # probes are never shed
        assert await asyncio.gather(*slow) == [200, 200]
        counts = await _requests(s, srv.url)
    assert counts[("/delay", "503")] == 1
    assert counts[("/delay", "200")] == 2
