"""The target policy where the engine connects: the address a connection is opened to is judged,
once per connection, against real loopback servers; a refused one is counted as
``not_allowed`` with the reason, never sent a byte, never silent."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
from collections.abc import AsyncIterator, Iterator

import pytest
import requests
from tests.httpserve import recording

from mcp_bench import dialguard
from mcp_bench.dialguard import REFUSED, AddressRule, DialRefused
from mcp_bench.dialguard_requests import guard
from mcp_bench.protocols.http_aiohttp import HttpClient
from mcp_bench.protocols.http_fast import FastHttpClient
from mcp_bench.protocols.triton import TritonClient
from mcp_bench.records import ErrorKind, RequestPayload
from mcp_bench.servermetrics import PrometheusEndpointProbe
from mcp_refserver import RefServerConfig, start_refserver

ELSEWHERE = AddressRule((ipaddress.ip_network("10.0.0.0/8"),))  # loopback is outside it
LOOPBACK = AddressRule((ipaddress.ip_network("127.0.0.0/8"),))


class StampedHttpClient(FastHttpClient):
    kernel_stamps = True


@pytest.fixture
def policy() -> Iterator[None]:
    """Each test installs its rule; afterwards the process has the one ``MCP_DIAL_GUARD`` says."""
    yield
    dialguard.install(AddressRule.from_env())


@pytest.fixture
async def server() -> AsyncIterator[tuple[str, list[str]]]:
    """A real server that records every request it was sent."""
    async with recording("ok\n# TYPE up gauge\nup 1\n") as (url, hits):
        yield url, hits


@pytest.mark.parametrize(
    ("address", "allowed"),
    [
        ("169.254.169.254", False),
        ("::ffff:169.254.169.254", False),
        ("::ffff:a9fe:a9fe", False),
        ("64:ff9b::a9fe:a9fe", False),
        ("fe80::1%eth0", False),
        ("127.0.0.1", True),
        ("::1", True),
    ],
)
def test_the_default_rule_judges_the_address_itself(address: str, allowed: bool) -> None:
    assert (AddressRule().problem(address) is None) is allowed
    if not allowed:
        with pytest.raises(DialRefused, match=REFUSED):
            AddressRule().check(address)


def test_the_rule_travels_to_pods_in_the_environment() -> None:
    assert AddressRule.from_env({}) is None  # a plain mcp-bench run: no policy of the operator's
    assert AddressRule.from_env({dialguard.ENV: LOOPBACK.to_env()}) == LOOPBACK
    assert AddressRule.from_env({dialguard.ENV: AddressRule().to_env()}) == AddressRule()


def test_a_refusal_is_recognised_through_wrappers_and_merged_errors() -> None:
    refused = DialRefused(f"169.254.169.254 is a link-local or metadata address: {REFUSED}")
    wrapped = RuntimeError("cannot connect")
    wrapped.__cause__ = refused
    assert dialguard.is_refusal(refused) and dialguard.is_refusal(wrapped)
    # happy eyeballs merges several addresses' errors into one OSError that keeps the errno
    assert dialguard.is_refusal(OSError(errno.EACCES, f"Multiple exceptions: a: {REFUSED}, b: {REFUSED}"))
    assert not dialguard.is_refusal(OSError(errno.ECONNREFUSED, "Connection refused"))


@pytest.mark.parametrize(
    "cls", [HttpClient, FastHttpClient, StampedHttpClient], ids=["aiohttp", "fast", "stamped"]
)
async def test_every_client_refuses_a_connection_the_policy_denies(
    policy: None, server: tuple[str, list[str]], cls: type[HttpClient] | type[FastHttpClient]
) -> None:
    url, hits = server
    dialguard.install(ELSEWHERE)
    client = cls(url + "/x", timeout_s=5.0, max_connections=2)
    await client.open()
    try:
        recs = [await client.send(RequestPayload()) for _ in range(3)]
    finally:
        await client.close()
    assert [r.error for r in recs] == [ErrorKind.NOT_ALLOWED] * 3, [r.error_detail for r in recs]
    assert all("outside MCP_TARGET_ALLOW_CIDRS" in r.error_detail for r in recs), recs[0].error_detail
    assert hits == []  # not a byte reached the server

    dialguard.install(LOOPBACK)
    client = cls(url + "/y", timeout_s=5.0, max_connections=2)
    await client.open()
    try:
        rec = await client.send(RequestPayload())
    finally:
        await client.close()
    assert rec.ok, rec.error_detail
    assert hits == ["/y"]


async def test_a_server_metrics_scrape_is_refused_and_says_so(
    policy: None, server: tuple[str, list[str]]
) -> None:
    url, hits = server
    dialguard.install(ELSEWHERE)
    snap = await PrometheusEndpointProbe(url + "/metrics").snapshot()
    assert snap.error_kind == ErrorKind.NOT_ALLOWED and REFUSED in snap.error
    assert hits == []


async def test_requests_sessions_check_each_new_connections_peer(server: tuple[str, list[str]]) -> None:
    url, hits = server

    def get(rule: AddressRule) -> requests.Response:
        with requests.Session() as session:
            guard(session, url, rule)
            return session.get(url + "/q", timeout=5)

    with pytest.raises(requests.ConnectionError, match=REFUSED):
        await asyncio.to_thread(get, ELSEWHERE)
    assert hits == []
    assert (await asyncio.to_thread(get, LOOPBACK)).status_code == 200
    assert hits == ["/q"]


@pytest.mark.parametrize("use_grpc", [False, True], ids=["http", "grpc"])
async def test_the_triton_clients_connect_only_where_the_policy_allows(policy: None, use_grpc: bool) -> None:
    """tritonclient opens its own connections: over HTTP its session is replaced by a guarded
    one, over gRPC the channel dials the address checked here (the name kept as authority)."""
    async with await start_refserver(RefServerConfig(infer_ms=1, grpc_port=0)) as srv:
        url = srv.grpc_url if use_grpc else srv.url
        assert url is not None
        dialguard.install(ELSEWHERE)
        refused = TritonClient(url, "refmodel", use_grpc=use_grpc)
        with pytest.raises(Exception) as caught:
            await refused.open()
        await refused.close()
        assert dialguard.is_refusal(caught.value) or REFUSED in str(caught.value), caught.value
        assert srv.model.stats.success.count == 0

        dialguard.install(LOOPBACK)
        allowed = TritonClient(url.replace("127.0.0.1", "localhost"), "refmodel", use_grpc=use_grpc)
        await allowed.open()
        try:
            rec = await allowed.send(RequestPayload())
        finally:
            await allowed.close()
        assert rec.ok, rec.error_detail
        assert srv.model.stats.success.count == 1
