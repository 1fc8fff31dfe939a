from __future__ import annotations

import pytest

from mcp_bench.plan import RunPlan
from mcp_bench.protocols import UnknownBackendError, protocol_factory
from mcp_bench.protocols.http import HttpClient, parse_server_header
from mcp_bench.records import ErrorKind, RequestPayload

PAYLOAD = RequestPayload()


async def _one(url: str, timeout_s: float = 5.0) -> tuple[HttpClient, object]:
    client = HttpClient(url, timeout_s=timeout_s, max_connections=2)
    await client.open()
    try:
        return client, await client.send(PAYLOAD)
    finally:
        await client.close()


async def test_success_measures_latency(loopback_http) -> None:  # type: ignore[no-untyped-def]
    _, rec = await _one(loopback_http.url + "/sleep/20")
    assert rec.ok and rec.status == 200  # type: ignore[attr-defined]
    assert 19.5e6 <= rec.e2e_ns < 200e6  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/status/503", ErrorKind.HTTP_STATUS),
        ("/close", ErrorKind.DISCONNECTED),
        ("/truncate", ErrorKind.TRUNCATED),
    ],
)
async def test_failures_are_classified(loopback_http, path: str, kind: ErrorKind) -> None:  # type: ignore[no-untyped-def]
    _, rec = await _one(loopback_http.url + path)
    assert rec.error == kind, rec.error_detail  # type: ignore[attr-defined]


async def test_timeout(loopback_http) -> None:  # type: ignore[no-untyped-def]
    _, rec = await _one(loopback_http.url + "/sleep/2000", timeout_s=0.1)
    assert rec.error == ErrorKind.TIMEOUT  # type: ignore[attr-defined]
    assert rec.e2e_ns < 1.5e9  # type: ignore[attr-defined]


async def test_connect_refused(closed_port: int) -> None:
    _, rec = await _one(f"http://127.0.0.1:{closed_port}/")
    assert rec.error == ErrorKind.CONNECT  # type: ignore[attr-defined]


async def test_fingerprint_and_post_body(loopback_http) -> None:  # type: ignore[no-untyped-def]
    plan = RunPlan.from_dict(
        {
            "url": loopback_http.url + "/ok",
            "levels": {"concurrency": [3]},
            "stage": {"requests": 1},
            "payload": {"method": "POST", "body": "{}", "headers": {"X-A": "1"}},
        }
    )
    client = protocol_factory("http")(plan, plan.max_connections)
    assert isinstance(client, HttpClient) and client.method == "POST" and client.body == b"{}"
    await client.open()
    try:
        assert await client.fingerprint() == {"server_name": "loopback-test", "server_version": "1.2.3"}
        assert (await client.send(PAYLOAD)).ok
    finally:
        await client.close()


def test_server_header_parsing_and_unknown_backend() -> None:
    assert parse_server_header("Python/3.11 aiohttp/3.9") == ("Python", "3.11")
    assert parse_server_header("") == ("", "")
    with pytest.raises(UnknownBackendError, match="no protocol client"):
        protocol_factory("gopher")
