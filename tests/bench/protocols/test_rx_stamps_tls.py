"""Kernel receive stamps over TLS: the lean OpenAI client on HTTPS against the reference server."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from time import perf_counter_ns

import pytest
from aiohttp import web

from mcp_bench.protocols import rx_stamps
from mcp_bench.protocols.openai_fast import FastOpenAIClient
from mcp_bench.protocols.rx_stamps_tls import StampedTlsTransport
from mcp_bench.records import ErrorKind, RequestPayload
from mcp_devcluster.certs import self_signed_pair
from mcp_refserver import RefServerConfig
from mcp_refserver.app import build_app
from mcp_refserver.config import Faults
from mcp_refserver.model import ServerModel

pytestmark = [
    pytest.mark.timing,
    pytest.mark.skipif(not rx_stamps.AVAILABLE, reason="kernel receive stamps need Linux"),
]
PAYLOAD = RequestPayload(prompt="a b", input_tokens=2, max_output_tokens=4)


@contextlib.contextmanager
def https_refserver(tmp_path: Path, config: RefServerConfig) -> Iterator[tuple[str, ServerModel]]:
    """The reference server on HTTPS, in a thread with its own event loop: a server sharing the
    client's loop would hold its writes while the client runs, and blur what the stamps show."""
    cert, key = self_signed_pair(tmp_path, "127.0.0.1", "127.0.0.1")
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="https-refserver", daemon=True)
    thread.start()
    app, model = build_app(config)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)

    async def start() -> int:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx).start()
        return int(runner.addresses[0][1])

    try:
        port = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
        yield f"https://127.0.0.1:{port}", model
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


@pytest.fixture
def https_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, ServerModel]]:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "tls.crt"))  # trust exactly this server
    with https_refserver(tmp_path, RefServerConfig(ttft_ms=3, tpot_ms=2)) as server:
        yield server


async def test_https_streams_carry_kernel_stamps(https_server: tuple[str, ServerModel]) -> None:
    url, model = https_server
    client = FastOpenAIClient(url, "refmodel", timeout_s=5.0)
    await client.open()
    try:
        assert (await client.send(PAYLOAD)).ok  # opens the connection (its first answer comes unhurried)
        model.timings.clear()
        before = perf_counter_ns()
        recs = [await client.send(PAYLOAD) for _ in range(3)]
        (conn,) = client._conns  # one keep-alive TLS connection carried them all
        transport = conn.transport
        assert isinstance(transport, StampedTlsTransport) and transport.kernel_reads >= 4
        (timed,) = client.take_connect_times()
        assert timed.tls_ns is not None and timed.tls_ns > 0
    finally:
        await client.close()
    assert len(model.timings) == 3
    for rec, truth in zip(recs, model.timings, strict=True):
        assert rec.ok, rec.error_detail
        assert rec.output_tokens == 4 and len(rec.token_times_ns) == 4
        t = rec.token_times_ns
        assert before <= rec.sent_ns < t[0] <= t[-1] <= rec.end_ns < perf_counter_ns()
        # each gap between tokens is the gap between the server's writes (the kernel stamped them
        # as they entered loopback), whenever the client got round to reading them
        gaps = [b - a for a, b in itertools.pairwise(t)]
        true_gaps = [b - a for a, b in itertools.pairwise(truth.chunk_ns)]
        # (within 3 ms: a busy host can slip a scheduler slice between the server's stamp and its
        # write, the server being a thread of this process)
        assert all(abs(g - tg) <= 3_000_000 for g, tg in zip(gaps, true_gaps, strict=True)), (gaps, true_gaps)


async def test_a_session_cut_mid_stream_is_a_disconnect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "tls.crt"))
    config = RefServerConfig(ttft_ms=1, tpot_ms=1, faults=Faults(close_rate=1.0, fault_after_tokens=2))
    with https_refserver(tmp_path, config) as (url, _):
        client = FastOpenAIClient(url, "refmodel", timeout_s=5.0)
        await client.open()
        try:
            rec = await client.send(PAYLOAD)
        finally:
            await client.close()
    assert not rec.ok and rec.error == ErrorKind.DISCONNECTED
    assert len(rec.token_times_ns) == 2
