"""Kernel receive stamps under aiohttp's transport: each payload byte keeps its read's arrival."""

from __future__ import annotations

import asyncio
import itertools
import socket
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import aiohttp
import pytest
from aiohttp import web

from mcp_bench.protocols import rx_stamps
from mcp_bench.protocols.openai_aiohttp import OpenAIClient
from mcp_bench.protocols.rx_stamps_socket import StampingSocket
from mcp_bench.records import RequestPayload
from mcp_refserver import RefServerConfig
from mcp_refserver.app import build_app
from mcp_refserver.model import ServerModel

pytestmark = [
    pytest.mark.timing,
    pytest.mark.skipif(not rx_stamps.AVAILABLE, reason="kernel receive stamps need Linux"),
]


@dataclass
class FakePayload:
    total_bytes: int = 0


def test_split_cuts_where_reads_ended() -> None:
    sock = StampingSocket()
    try:
        payload = FakePayload()
        sock.last_arrival_ns = 100
        sock.attach(payload)
        payload.total_bytes = 4  # came with the read stamped 100 (the one that brought the head)
        sock._note([])  # the next read: bytes up to 4 arrived by 100
        payload.total_bytes = 10
        sock.last_arrival_ns = 200
        sock._note([])
        sock.last_arrival_ns = 300
        payload.total_bytes = 12
        # read late, all at once: each piece keeps its own read's arrival
        assert sock.split(b"aaaabbbbbbcc") == [(b"aaaa", 100), (b"bbbbbb", 200), (b"cc", 300)]
        payload.total_bytes = 15
        assert sock.split(b"ddd") == [(b"ddd", 300)]
    finally:
        sock.close()


@pytest.fixture
def server() -> Iterator[tuple[str, ServerModel]]:
    """The reference server in a thread with its own loop, so blocking the client's loop does not
    hold the server's writes."""
    app, model = build_app(RefServerConfig(ttft_ms=5, tpot_ms=4))
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="refserver", daemon=True)
    thread.start()
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)

    async def start() -> int:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return int(runner.addresses[0][1])

    try:
        port = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=10)
        yield f"http://127.0.0.1:{port}", model
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


async def _late_reader_run(
    url: str, model: ServerModel, monkeypatch: pytest.MonkeyPatch, stamps: bool
) -> tuple[list[int], list[int], int]:
    """One stream whose reading task comes back 25 ms late after its first read (the loop keeps
    reading meanwhile, as a busy client's does): the client's token gaps, the server's, and how
    many reads carried a kernel stamp."""
    client = OpenAIClient(url, "refmodel", timeout_s=5.0)
    client.kernel_stamps = stamps
    await client.open()
    reads = 0
    original = aiohttp.StreamReader.readany
    here = threading.current_thread()  # the server's aiohttp reads through the same class

    async def late_readany(self: aiohttp.StreamReader) -> bytes:
        nonlocal reads
        if threading.current_thread() is here:
            reads += 1
            if reads == 2:
                await asyncio.sleep(0.025)
        return await original(self)

    try:
        assert (await client.send(RequestPayload(prompt="a", max_output_tokens=2))).ok  # opens the connection
        model.timings.clear()
        monkeypatch.setattr(aiohttp.StreamReader, "readany", late_readany)
        rec = await client.send(RequestPayload(prompt="a b", max_output_tokens=8))
        monkeypatch.undo()
        stamped = sum(s.kernel_reads for s in (client._stamping or {}).values())
    finally:
        await client.close()
    assert rec.ok, rec.error_detail
    (truth,) = model.timings
    gaps = [b - a for a, b in itertools.pairwise(rec.token_times_ns)]
    true_gaps = [b - a for a, b in itertools.pairwise(truth.chunk_ns)]
    assert len(gaps) == len(true_gaps) == 7
    return gaps, true_gaps, stamped


async def test_aiohttp_tokens_keep_their_reads_arrival_when_the_task_reads_late(
    server: tuple[str, ServerModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    gaps, true_gaps, stamped = await _late_reader_run(*server, monkeypatch, stamps=True)
    assert stamped > 0
    # each gap is the server's own (typically within 0.1 ms); a busy host can slip a scheduler
    # slice between the server's stamp and its write (it shares this process), so the bound on the
    # worst gap is 3 ms: still far inside the 25 ms that read times alone put in one gap (below)
    errors = sorted(abs(g - t) for g, t in zip(gaps, true_gaps, strict=True))
    assert errors[len(errors) // 2] <= 500_000 and errors[-1] <= 3_000_000, (gaps, true_gaps)


async def test_without_stamps_a_late_task_merges_the_tokens(
    server: tuple[str, ServerModel], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the stamps are for: read times alone put the tokens that waited together."""
    gaps, true_gaps, stamped = await _late_reader_run(*server, monkeypatch, stamps=False)
    assert stamped == 0
    # the 25 ms the task came back late land in one gap, against the server's writes
    assert max(abs(g - t) for g, t in zip(gaps, true_gaps, strict=True)) >= 10_000_000, (gaps, true_gaps)


def test_a_stamp_converted_a_little_after_its_read_is_the_reads_time() -> None:
    """The wall clock and the monotonic clock are read one after the other: on a busy host the
    conversion can put a packet's stamp a millisecond after the read that returned it; that is
    the read's time, not a missing stamp (every read of a request then fell back to the loop)."""
    now = time.perf_counter_ns()
    wall = now + rx_stamps.wall_minus_perf_ns()

    def ancillary(wall_ns: int) -> list[tuple[int, int, bytes]]:
        spec = struct.pack("@qq", wall_ns // 1_000_000_000, wall_ns % 1_000_000_000)
        return [(socket.SOL_SOCKET, rx_stamps.SO_TIMESTAMPNS, spec)]

    assert rx_stamps.kernel_arrival(ancillary(wall - 3_000_000), now) == pytest.approx(
        now - 3_000_000, abs=1_000_000
    )
    assert rx_stamps.kernel_arrival(ancillary(wall + 1_000_000), now) == now  # conversion error: clamped
    assert rx_stamps.kernel_arrival(ancillary(wall + 1_000_000_000), now) is None  # a clock step
    assert rx_stamps.kernel_arrival(ancillary(wall - 60_000_000_000), now) is None  # too old
