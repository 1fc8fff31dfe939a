"""The target policy where the engine connects: the address a connection is opened to is judged,
once per connection, against real loopback servers; a refused one is counted as
``not_allowed`` with the reason, never sent a byte, never silent."""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import aiohttp
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
        ("::ffff:0:a9fe:a9fe", False),  # IPv4-translated
        ("64:ff9b:1::a9fe:a9fe", False),  # NAT64 at the local-use prefix
        ("100.100.100.200", False),  # Alibaba Cloud's metadata service
        ("::ffff:100.100.100.200", False),
        ("168.63.129.16", False),  # Azure's WireServer
        ("64:ff9b::a83f:8110", False),  # the WireServer through NAT64
        ("100.100.100.201", True),
        ("168.63.129.17", True),
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


@pytest.mark.parametrize(
    ("address", "inner"),
    [
        ("::ffff:169.254.169.254", "169.254.169.254"),
        ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
        ("64:ff9b:1::a9fe:a9fe", "169.254.169.254"),
        ("64:ff9b:1:ffff:ffff:ffff:a9fe:a9fe", "169.254.169.254"),  # the local-use /48's last
        ("64:ff9b:2::a9fe:a9fe", None),  # past the local-use /48
        ("::ffff:0:a9fe:a9fe", "169.254.169.254"),
        ("::1:ffff:0:a9fe:a9fe", None),  # not the translated prefix
        ("2002:a9fe:a9fe::1", "169.254.169.254"),
        ("::a9fe:a9fe", "169.254.169.254"),
        ("::2", "0.0.0.2"),  # IPv4-compatible from ::2 on
        ("::1", None),  # loopback and the unspecified address carry none
        ("::", None),
        ("2001:db8::a9fe:a9fe", None),  # only the prefixes that embed an IPv4 address
        ("10.0.0.1", None),
    ],
)
def test_the_ipv4_address_an_ipv6_one_carries(address: str, inner: str | None) -> None:
    found = dialguard.embedded_ipv4(ipaddress.ip_address(address))
    assert (None if found is None else str(found)) == inner


@pytest.mark.parametrize(
    ("address", "host", "message"),
    [
        ("169.254.169.254", "", "169.254.169.254 is a link-local or metadata address"),
        ("169.254.169.254", "169.254.169.254", "169.254.169.254 is a link-local or metadata address"),
        ("169.254.169.254", "imds", "imds resolves to 169.254.169.254, a link-local or metadata address"),
        ("fe80::1%eth0", "", "fe80::1 is a link-local or metadata address"),  # the zone is not shown
        (
            "::ffff:169.254.169.254",
            "",
            "::ffff:a9fe:a9fe (169.254.169.254) is a link-local or metadata address",
        ),
        ("8.8.8.8", "", "8.8.8.8 is outside MCP_TARGET_ALLOW_CIDRS"),
        ("8.8.8.8", "dns.google", "dns.google resolves to 8.8.8.8, outside MCP_TARGET_ALLOW_CIDRS"),
    ],
)
def test_a_refusal_names_the_address_and_the_host(address: str, host: str, message: str) -> None:
    rule = AddressRule((ipaddress.ip_network("10.0.0.0/8"),))
    assert (rule.problem(address, host) if host else rule.problem(address)) == message
    with pytest.raises(DialRefused) as refused:
        rule.check(address, host) if host else rule.check(address)
    assert str(refused.value) == f"[Errno {errno.EACCES}] {message}: {REFUSED}"
    assert refused.value.errno == errno.EACCES


def test_a_cidr_from_the_environment_may_have_host_bits() -> None:
    rule = AddressRule.from_env({dialguard.ENV: '{"allowCidrs": ["10.1.2.3/8"]}'})
    assert rule == AddressRule((ipaddress.ip_network("10.0.0.0/8"),))


def test_the_guarded_factory_makes_the_socket_asked_for() -> None:
    """aiohttp hands the factory a getaddrinfo tuple: the socket must be of its family, type
    and protocol (an IPv6 address needs an IPv6 socket)."""
    factory = dialguard.socket_factory(AddressRule())
    assert factory is not None
    info = (socket.AF_INET6, socket.SOCK_DGRAM, socket.IPPROTO_UDP, "", ("::1", 53, 0, 0))
    with factory(info) as made:
        assert (made.family, made.type, made.proto) == (
            socket.AF_INET6,
            socket.SOCK_DGRAM,
            socket.IPPROTO_UDP,
        )


def test_the_guarded_factory_wraps_another_and_no_rule_leaves_it_alone() -> None:
    seen: list[tuple[Any, ...]] = []

    def inner(info: tuple[Any, ...]) -> socket.socket:
        seen.append(info)
        return socket.socket(info[0], info[1], info[2])

    assert dialguard.socket_factory(None, inner) is inner
    assert dialguard.socket_factory(None) is None
    guarded = dialguard.socket_factory(AddressRule(), inner)
    assert guarded is not None
    info = (socket.AF_INET, socket.SOCK_STREAM, 0, "", ("127.0.0.1", 80))
    guarded(info).close()
    assert seen == [info]
    with pytest.raises(DialRefused):
        guarded((socket.AF_INET, socket.SOCK_STREAM, 0, "", ("169.254.169.254", 80)))
    assert seen == [info]  # a refused address never reaches the inner factory


@pytest.mark.parametrize(
    ("peer", "host", "message"),
    [
        (None, "", f"the address a connection reached is unknown: {REFUSED}"),
        ((), "svc", f"the address svc reached is unknown: {REFUSED}"),
        (
            ("169.254.1.1", 80),
            "imds",
            f"imds resolves to 169.254.1.1, a link-local or metadata address: {REFUSED}",
        ),
        (("169.254.1.1", 80), "", f"169.254.1.1 is a link-local or metadata address: {REFUSED}"),
    ],
)
def test_a_peer_is_refused_by_what_it_is(peer: Any, host: str, message: str) -> None:
    with pytest.raises(DialRefused) as refused:
        dialguard.check_peer(AddressRule(), peer, host) if host else dialguard.check_peer(AddressRule(), peer)
    assert refused.value.strerror == message
    dialguard.check_peer(None, None)  # no rule: nothing to refuse
    dialguard.check_peer(AddressRule(), ("127.0.0.1", 80))


async def test_a_grpc_target_is_the_first_allowed_address_pinned() -> None:
    assert await dialguard.grpc_target(LOOPBACK, "127.0.0.2:50051") == "ipv4:127.0.0.2:50051"
    assert await dialguard.grpc_target(AddressRule(), "[::1]:50051") == "ipv6:[::1]:50051"
    assert await dialguard.grpc_target(LOOPBACK, "localhost:50051") == "ipv4:127.0.0.1:50051"
    with pytest.raises(ValueError):
        await dialguard.grpc_target(LOOPBACK, "127.0.0.1:grpc")  # a port is a number


async def test_a_grpc_target_nowhere_allowed_names_every_refused_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(DialRefused) as refused:
        await dialguard.grpc_target(ELSEWHERE, "localhost:50051")
    assert (
        refused.value.strerror
        == f"localhost resolves to 127.0.0.1, outside MCP_TARGET_ALLOW_CIDRS: {REFUSED}"
    )
    loop = asyncio.get_running_loop()

    async def two_addresses(host: str, port: int, **_: Any) -> list[tuple[Any, ...]]:
        """The resolver's answer for a name with an IPv4 and an IPv6 address (loopback here)."""
        return [
            (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0)),
        ]

    monkeypatch.setattr(loop, "getaddrinfo", two_addresses)
    with pytest.raises(DialRefused) as every:
        await dialguard.grpc_target(ELSEWHERE, "dual.example:50051")
    assert every.value.strerror == (
        "dual.example resolves to 127.0.0.1, outside MCP_TARGET_ALLOW_CIDRS; "
        f"dual.example resolves to ::1, outside MCP_TARGET_ALLOW_CIDRS: {REFUSED}"
    )
    monkeypatch.undo()
    both = AddressRule((ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8")))
    with pytest.raises(DialRefused) as twice:
        await dialguard.grpc_target(both, "[::1]:50051")
    assert twice.value.strerror == f"::1 is outside MCP_TARGET_ALLOW_CIDRS: {REFUSED}"


def _chain(depth: int, last: BaseException) -> BaseException:
    """``last`` wrapped ``depth`` times as a cause."""
    for _ in range(depth):
        wrapper = RuntimeError("wrapped")
        wrapper.__cause__ = last
        last = wrapper
    return last


def test_a_refusal_is_found_eight_wrappers_deep_and_no_deeper() -> None:
    refused = DialRefused(f"x: {REFUSED}")
    assert dialguard.is_refusal(_chain(7, refused))
    assert not dialguard.is_refusal(_chain(8, refused))
    looped = RuntimeError("a")
    looped.__cause__ = RuntimeError("b")
    looped.__cause__.__cause__ = looped
    assert not dialguard.is_refusal(looped)  # a cycle of causes ends


def test_only_a_permission_error_that_says_refused_is_a_refusal() -> None:
    assert not dialguard.is_refusal(OSError(errno.ECONNREFUSED, f"Connection refused: {REFUSED}"))
    assert not dialguard.is_refusal(OSError(errno.EACCES, "Permission denied"))
    assert not dialguard.is_refusal(None)


def test_aiohttps_connector_error_around_a_refusal_is_one() -> None:
    """aiohttp wraps the factory's refusal in its own connector error (an ``OSError`` with the
    refusal's errno and message, which keeps it in ``os_error``), also without a cause."""
    key = aiohttp.client_reqrep.ConnectionKey("h", 80, False, True, None, None, None)
    wrapped = aiohttp.ClientConnectorError(key, DialRefused(f"x: {REFUSED}"))
    assert wrapped.__cause__ is None and dialguard.is_refusal(wrapped)


def test_the_process_rule_is_read_once_from_the_environment(
    policy: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dialguard, "_ACTIVE", [])
    monkeypatch.setenv(dialguard.ENV, LOOPBACK.to_env())
    assert dialguard.active_rule() == LOOPBACK
    monkeypatch.setenv(dialguard.ENV, ELSEWHERE.to_env())
    assert dialguard.active_rule() == LOOPBACK  # read once per process
    monkeypatch.setattr(dialguard, "_ACTIVE", [])
    monkeypatch.delenv(dialguard.ENV)
    assert dialguard.active_rule() is None
