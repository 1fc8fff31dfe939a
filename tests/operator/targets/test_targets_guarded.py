"""The operator's own connections hold to the target policy on the address each one is opened
to, not on the resolution admission made: a name that answers an allowed address first and the
metadata address next (DNS rebinding) is refused at the connection, and nothing is sent.

DNS cannot be controlled here, so a fake resolver stands in for it: the event loop's
``getaddrinfo``, which both the policy's admission lookup and aiohttp's default (threaded)
resolver call, answers loopback first and 169.254.169.254 afterwards. The servers are real.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from tests.httpserve import recording

from mcp_bench.dialguard import REFUSED, DialRefused, is_refusal
from mcp_operator.api.drillmeasures import ServerRequests
from mcp_operator.readiness.drill.retries import read_requests
from mcp_operator.targets import guarded
from mcp_operator.targets.policy import TargetPolicy

METADATA = "169.254.169.254"


class Rebinding:
    """A resolver that answers ``first`` once and ``then`` ever after, as a rebinding DNS server
    with a zero TTL does."""

    def __init__(self, first: str, then: str) -> None:
        self.answers = [first]
        self.then = then
        self.calls = 0

    async def getaddrinfo(self, host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        self.calls += 1
        address = self.answers.pop(0) if self.answers else self.then
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, int(port or 0)))]


@pytest.fixture
async def server() -> AsyncIterator[tuple[int, list[str]]]:
    async with recording("# TYPE requests_total counter\nrequests_total 3\n") as (url, hits):
        yield int(url.rsplit(":", 1)[1]), hits


def _fake_dns(monkeypatch: pytest.MonkeyPatch, fake: Rebinding) -> None:
    loop = asyncio.get_running_loop()
    monkeypatch.setattr(loop, "getaddrinfo", fake.getaddrinfo)


async def test_a_name_rebound_after_admission_is_refused_at_the_connection(
    monkeypatch: pytest.MonkeyPatch, server: tuple[int, list[str]]
) -> None:
    port, hits = server
    fake = Rebinding("127.0.0.1", METADATA)
    _fake_dns(monkeypatch, fake)
    url = f"http://rebind.example:{port}/metrics"
    assert await TargetPolicy().url_problem(url) is None  # admission saw 127.0.0.1
    async with guarded.session(5.0, TargetPolicy()) as session:
        with pytest.raises(aiohttp.ClientConnectorError) as caught:
            await session.get(url)
    assert is_refusal(caught.value) and "169.254.169.254 is a link-local or metadata address" in str(
        caught.value
    )
    assert fake.calls == 2 and hits == []


async def test_the_drill_retry_counter_read_is_refused_after_a_rebinding(
    monkeypatch: pytest.MonkeyPatch, server: tuple[int, list[str]]
) -> None:
    """End to end through the drill's own read: admission passes, the connection does not, and
    the reading says why (an Inconclusive row, never a count)."""
    port, hits = server
    _fake_dns(monkeypatch, Rebinding("127.0.0.1", METADATA))
    spec = ServerRequests.model_validate(
        {"urls": [f"http://rebind.example:{port}/metrics"], "counters": ["requests_total"]}
    )
    reading = await read_requests(spec)
    assert reading.total is None and REFUSED in reading.problem, reading
    assert hits == []


@pytest.mark.parametrize("host", ["[::ffff:169.254.169.254]", "[::ffff:a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]"])
async def test_an_address_literal_is_judged_where_it_connects(host: str) -> None:
    """aiohttp skips its resolver for a literal; the socket factory still sees the address."""
    async with guarded.session(5.0, TargetPolicy()) as session:
        with pytest.raises(aiohttp.ClientConnectorError) as caught:
            await session.get(f"http://{host}:80/latest/meta-data")
    assert is_refusal(caught.value)


async def test_an_allow_list_refuses_every_other_address(server: tuple[int, list[str]]) -> None:
    port, hits = server
    elsewhere = TargetPolicy(allow_cidrs=(ipaddress.ip_network("10.0.0.0/8"),))
    async with guarded.session(5.0, elsewhere) as session:
        with pytest.raises(aiohttp.ClientConnectorError, match="outside MCP_TARGET_ALLOW_CIDRS"):
            await session.get(f"http://127.0.0.1:{port}/x")
    async with (
        guarded.session(5.0, TargetPolicy()) as session,
        session.get(f"http://127.0.0.1:{port}/y") as resp,
    ):
        assert resp.status == 200
    assert hits == ["/y"]


async def test_a_grpc_channel_dials_the_address_that_was_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """gRPC would resolve the name again itself: the name is resolved and checked here and the
    channel given the checked address (the authority stays the name)."""
    _fake_dns(monkeypatch, Rebinding("127.0.0.1", METADATA))
    assert await guarded.grpc_target("xds.example:18000", TargetPolicy()) == "ipv4:127.0.0.1:18000"
    with pytest.raises(DialRefused, match=r"xds\.example resolves to 169\.254\.169\.254"):
        await guarded.grpc_target("xds.example:18000", TargetPolicy())


def test_pods_get_the_rule_in_their_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_TARGET_ALLOW_CIDRS", "10.0.0.0/8")
    entry = guarded.pod_env()
    assert entry == {"name": "MCP_DIAL_GUARD", "value": '{"allowCidrs": ["10.0.0.0/8"]}'}
