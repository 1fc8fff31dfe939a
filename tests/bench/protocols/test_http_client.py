"""Both plain HTTP clients (aiohttp and the lean keep-alive one) against the loopback server."""

from __future__ import annotations

import asyncio

import pytest

from mcp_bench.load.common import CallbackClient
from mcp_bench.plan import RunPlan
from mcp_bench.protocols import UnknownBackendError, protocol_factory
from mcp_bench.protocols.http_aiohttp import HttpClient, classify_error
from mcp_bench.protocols.http_common import parse_server_header
from mcp_bench.protocols.http_fast import FastHttpClient
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord

PAYLOAD = RequestPayload()
Client = type[HttpClient] | type[FastHttpClient]


class StampedHttpClient(FastHttpClient):
    """The lean client on sockets read with kernel receive stamps (as the OpenAI client runs it)."""

    kernel_stamps = True


@pytest.fixture(params=[HttpClient, FastHttpClient, StampedHttpClient], ids=["aiohttp", "fast", "stamped"])
def client_cls(request: pytest.FixtureRequest) -> Client:
    return request.param  # type: ignore[no-any-return]


async def _send(
    cls: Client, url: str, timeout_s: float = 5.0, n: int = 1, **kw: object
) -> list[RequestRecord]:
    client = cls(url, timeout_s=timeout_s, max_connections=2, **kw)  # type: ignore[arg-type]
    await client.open()
    try:
        return [await client.send(PAYLOAD) for _ in range(n)]
    finally:
        await client.close()


async def test_success_measures_latency(loopback_http, client_cls: Client) -> None:  # type: ignore[no-untyped-def]
    recs = await _send(client_cls, loopback_http.url + "/sleep/20", n=3)
    for rec in recs:
        assert rec.ok and rec.status == 200
        # never shorter than what the server took; the upper bound only catches a wrong unit
        # (a busy 2-core host has delayed one of these past 200 ms)
        assert 19.5e6 <= rec.e2e_ns < 2e9


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/status/503", ErrorKind.HTTP_STATUS),
        ("/close", ErrorKind.DISCONNECTED),
        ("/truncate", ErrorKind.TRUNCATED),
    ],
)
async def test_failures_are_classified(loopback_http, client_cls: Client, path: str, kind: ErrorKind) -> None:  # type: ignore[no-untyped-def]
    (rec,) = await _send(client_cls, loopback_http.url + path)
    assert rec.error == kind, rec.error_detail
    assert rec.end_ns >= rec.sent_ns


async def test_timeout(loopback_http, client_cls: Client) -> None:  # type: ignore[no-untyped-def]
    (rec,) = await _send(client_cls, loopback_http.url + "/sleep/2000", timeout_s=0.1)
    assert rec.error == ErrorKind.TIMEOUT
    assert 0.09e9 <= rec.e2e_ns < 1.5e9


async def test_connect_refused(client_cls: Client, closed_port: int) -> None:
    (rec,) = await _send(client_cls, f"http://127.0.0.1:{closed_port}/")
    assert rec.error == ErrorKind.CONNECT


async def test_chunked_and_connection_close(loopback_http, client_cls: Client) -> None:  # type: ignore[no-untyped-def]
    recs = await _send(client_cls, loopback_http.url + "/chunked", n=3)
    assert all(r.ok and r.status == 200 for r in recs)
    recs = await _send(client_cls, loopback_http.url + "/echo", n=3, method="POST", body=b"hello")
    assert all(r.ok and r.status == 200 for r in recs), [r.error_detail for r in recs]


async def test_fast_client_keeps_connections_alive_under_concurrency(loopback_http) -> None:  # type: ignore[no-untyped-def]
    client = FastHttpClient(loopback_http.url + "/sleep/10", max_connections=4)
    await client.open()
    try:
        recs = await asyncio.gather(*(client.send(PAYLOAD) for _ in range(40)))
        assert all(r.ok for r in recs)
        assert len(client._conns) <= 4
        assert client.inflight == 0
    finally:
        await client.close()


async def test_fast_client_cut_inflight(loopback_http) -> None:  # type: ignore[no-untyped-def]
    client = FastHttpClient(loopback_http.url + "/sleep/2000", max_connections=2)
    assert isinstance(client, CallbackClient)
    await client.open()
    got: list[RequestRecord] = []
    try:
        for _ in range(3):  # the third waits for a connection
            client.start(PAYLOAD, 123, got.append)
        await asyncio.sleep(0.05)
        assert client.cut_inflight() == 3
        assert [r.error for r in got] == [ErrorKind.TIMEOUT] * 3
        assert all(r.scheduled_ns == 123 for r in got)
    finally:
        await client.close()


async def test_fingerprint_and_plan_factory(loopback_http) -> None:  # type: ignore[no-untyped-def]
    data = {
        "url": loopback_http.url + "/ok",
        "levels": {"concurrency": [3]},
        "stage": {"requests": 1},
        "payload": {"method": "POST", "body": "{}", "headers": {"X-A": "1"}},
    }
    plan = RunPlan.from_dict(data)
    fast = protocol_factory("http")(plan, plan.max_connections)
    assert isinstance(fast, FastHttpClient) and fast.max_connections == 3
    slow = protocol_factory("http")(RunPlan.from_dict({**data, "http_client": "aiohttp"}), 3)
    assert isinstance(slow, HttpClient) and slow.method == "POST" and slow.body == b"{}"
    for client in (fast, slow):
        await client.open()
        try:
            assert await client.fingerprint() == {"server_name": "loopback-test", "server_version": "1.2.3"}
            assert (await client.send(PAYLOAD)).ok
        finally:
            await client.close()


def test_server_header_parsing_and_unknown_backend() -> None:
    assert parse_server_header("Python/3.11 aiohttp/3.9") == ("Python", "3.11")
    assert parse_server_header("") == ("", "")
    assert classify_error(ConnectionResetError()) == ErrorKind.DISCONNECTED
    assert classify_error(RuntimeError()) == ErrorKind.OTHER
    with pytest.raises(UnknownBackendError, match="no protocol client"):
        protocol_factory("gopher")
