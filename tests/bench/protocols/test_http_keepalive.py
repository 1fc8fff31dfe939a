"""Idle keep-alive connections the server has closed, or may be closing, are not reused.

A server closes an idle connection on a timer of its own (uvicorn, under vLLM and SGLang, after
5 s). A client that writes a request into it as the server's FIN arrives loses the request
before any byte of an answer. On a busy host the event loop can come to that FIN seconds late,
which is how a real vLLM run under a CPU hog lost 2 of 16 requests; these tests recreate that
with a real server closing idle connections after 0.3 s and a client loop blocked past it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from tests.httpserve import send_json

from mcp_bench.protocols import http_connection
from mcp_bench.protocols.http_aiohttp import HttpClient
from mcp_bench.protocols.http_fast import FastHttpClient
from mcp_bench.records import ErrorKind, RequestPayload

PAYLOAD = RequestPayload()
SERVER_IDLE_TIMEOUT_S = 0.3


class _Peers:
    """The server's view: the client ports of the connections it answered on."""

    def __init__(self) -> None:
        self.ports: set[int] = set()


@contextlib.contextmanager
def _server(idle_timeout_s: float | None) -> Iterator[tuple[str, _Peers]]:
    """A real HTTP/1.1 keep-alive server in threads of its own (a blocked client loop does not
    stop it) that closes a connection idle for ``idle_timeout_s``; None keeps it."""
    peers = _Peers()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = idle_timeout_s

        def do_GET(self) -> None:
            peers.ports.add(self.client_address[1])
            send_json(self, 200, "ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", peers
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def closing_server() -> Iterator[tuple[str, _Peers]]:
    """A server that closes a connection idle for :data:`SERVER_IDLE_TIMEOUT_S`."""
    with _server(SERVER_IDLE_TIMEOUT_S) as served:
        yield served


@pytest.fixture(params=[False, True], ids=["plain", "stamped"])
def fast_client(request: pytest.FixtureRequest, closing_server: tuple[str, _Peers]) -> FastHttpClient:
    client = FastHttpClient(closing_server[0] + "/", max_connections=1, timeout_s=5.0)
    client.kernel_stamps = request.param  # the kernel-stamped sockets the OpenAI client reads
    return client


def _block_loop_past_the_servers_close() -> None:
    """The event loop does nothing while the server's FIN arrives (a starved client process)."""
    time.sleep(SERVER_IDLE_TIMEOUT_S + 1.0)


async def test_a_connection_closed_while_the_loop_was_busy_is_replaced(
    fast_client: FastHttpClient, closing_server: tuple[str, _Peers]
) -> None:
    await fast_client.open()
    try:
        first = await fast_client.send(PAYLOAD)
        assert first.ok, first.error_detail
        _block_loop_past_the_servers_close()
        second = await fast_client.send(PAYLOAD)
        assert second.ok, second.error_detail
        assert second.new_connection  # reported: it waited for a connect
        assert len(closing_server[1].ports) == 2
    finally:
        await fast_client.close()


async def test_without_the_check_the_request_is_lost_and_the_detail_says_why(
    fast_client: FastHttpClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the check prevents, and what the client says when a connection dies unanswered:
    how it ended and how long it had sat idle."""
    monkeypatch.setattr(http_connection, "_CHECK_AFTER_NS", 10**12)
    monkeypatch.setattr(http_connection, "_EXPIRY_NS", 10**12)
    await fast_client.open()
    try:
        assert (await fast_client.send(PAYLOAD)).ok
        _block_loop_past_the_servers_close()
        lost = await fast_client.send(PAYLOAD)
    finally:
        await fast_client.close()
    assert lost.error == ErrorKind.DISCONNECTED
    assert "server closed the connection before answering" in lost.error_detail
    assert "after 1 answers on it, idle " in lost.error_detail


async def test_an_idle_connection_past_the_expiry_is_not_reused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server that keeps idle connections: past the client's own expiry the
    connection is replaced before the request is written, whatever the socket says."""
    monkeypatch.setattr(http_connection, "_CHECK_AFTER_NS", 50_000_000)
    monkeypatch.setattr(http_connection, "_EXPIRY_NS", 100_000_000)
    with _server(None) as (url, peers):
        client = FastHttpClient(url + "/", max_connections=1)
        await client.open()
        try:
            assert (await client.send(PAYLOAD)).ok
            soon = await client.send(PAYLOAD)
            time.sleep(0.15)
            late = await client.send(PAYLOAD)
        finally:
            await client.close()
    assert soon.ok and not soon.new_connection
    assert late.ok and late.new_connection
    assert len(peers.ports) == 2


async def test_a_warm_level_replaces_connections_idle_since_an_earlier_one(
    closing_server: tuple[str, _Peers],
) -> None:
    """Warm means no measured request waits for a connect: connections the server closed
    between levels are replaced before the level, not found dead by its first requests."""
    url, peers = closing_server
    client = FastHttpClient(url + "/", max_connections=2)
    await client.open()
    try:
        await client.prepare_connections("warm", 2)
        assert all(r.ok for r in [await client.send(PAYLOAD), await client.send(PAYLOAD)])
        before = set(peers.ports)
        _block_loop_past_the_servers_close()
        await client.prepare_connections("warm", 2)
        recs = [await client.send(PAYLOAD) for _ in range(2)]
    finally:
        await client.close()
    assert all(r.ok and not r.new_connection for r in recs), [
        (r.error_detail, r.new_connection) for r in recs
    ]
    assert peers.ports - before  # answered on connections opened by the second warm-up


async def test_aiohttp_client_against_the_closing_server(closing_server: tuple[str, _Peers]) -> None:
    """The aiohttp client under the same starved loop (its pool is aiohttp's own)."""
    client = HttpClient(closing_server[0] + "/", max_connections=1, timeout_s=5.0)
    await client.open()
    try:
        assert (await client.send(PAYLOAD)).ok
        _block_loop_past_the_servers_close()
        again = await client.send(PAYLOAD)
    finally:
        await client.close()
    assert again.ok, again.error_detail
