"""The lean OpenAI client against a scripted raw HTTP server: framing cut at awkward places.

The reference server writes one whole SSE event per chunk; real servers and proxies do not, so
here the bytes of a response arrive in pieces split inside chunk-size lines, CRLFs and ``data:``
lines, with and without chunked encoding.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
from collections.abc import AsyncIterator
from time import perf_counter_ns

import pytest

from mcp_bench.protocols import rx_stamps
from mcp_bench.protocols.openai_fast import FastOpenAIClient
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord

PAYLOAD = RequestPayload(prompt="a b", input_tokens=2, max_output_tokens=3)
PAUSE_S = 0.003  # between pieces, so they arrive in separate reads


def event(text: str | None = None, usage: int | None = None) -> bytes:
    obj: dict[str, object] = {"choices": [] if text is None else [{"index": 0, "text": text}]}
    if usage is not None:
        obj["usage"] = {"prompt_tokens": 2, "completion_tokens": usage}
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunk(data: bytes, ext: bytes = b"") -> bytes:
    return f"{len(data):x}".encode() + ext + b"\r\n" + data + b"\r\n"


STREAM = event("") + event(" one") + event(" two") + event(" three") + event(usage=3) + b"data: [DONE]\n\n"
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def cut(data: bytes, *at: int) -> list[bytes]:
    bounds = [0, *at, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


class ScriptedServer:
    """Answers every request on a connection with ``script``: byte pieces written with a pause between,
    then closes the connection when ``close`` is set."""

    def __init__(self) -> None:
        self.script: list[bytes] = []
        self.close = False
        self.requests: list[bytes] = []
        self.connections = 0
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                self.requests.append(head + await reader.readexactly(length))
                for i, piece in enumerate(self.script):
                    if i:
                        await asyncio.sleep(PAUSE_S)
                    writer.write(piece)
                    await writer.drain()
                if self.close:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedServer]:
    srv = ScriptedServer()
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    srv.port = server.sockets[0].getsockname()[1]
    try:
        yield srv
    finally:
        server.close()


async def send(srv: ScriptedServer, n: int = 1, stream: bool = True) -> list[RequestRecord]:
    client = FastOpenAIClient(f"http://127.0.0.1:{srv.port}/v1", "m", timeout_s=5.0, stream=stream)
    await client.open()
    try:
        return [await client.send(PAYLOAD) for _ in range(n)]
    finally:
        await client.close()


async def test_chunked_stream_cut_inside_sizes_crlfs_and_data_lines(scripted: ScriptedServer) -> None:
    c1, c2, c3 = chunk(STREAM[:40], b";ext=1"), chunk(STREAM[40:150]), chunk(STREAM[150:])
    data = CHUNKED_HEAD + c1 + c2 + c3 + b"0\r\nX-T: 1\r\n\r\n"
    h, at2 = len(CHUNKED_HEAD), len(CHUNKED_HEAD) + len(c1)
    # Pieces end inside the head, inside the first size line, inside a data line, between the CR
    # and LF after the first chunk's data, inside the second size line, and inside the trailer.
    scripted.script = cut(data, 30, h + 1, h + 25, at2 - 1, at2 + 1, len(data) - 3)
    recs = await send(scripted, n=2)  # the second request reuses the connection
    assert scripted.connections == 1 and len(scripted.requests) == 2
    for rec in recs:
        assert rec.ok, rec.error_detail
        assert rec.status == 200 and len(rec.token_times_ns) == 3  # the empty first event is no token
        assert rec.output_tokens == 3 and rec.tokens_from_server and rec.input_tokens == 2
        t = rec.token_times_ns
        assert rec.first_token_ns == t[0] and rec.sent_ns < t[0] <= t[-1] <= rec.end_ns
    request = scripted.requests[0]
    assert request.startswith(b"POST /v1/completions HTTP/1.1\r\n")
    assert json.loads(request.split(b"\r\n\r\n", 1)[1])["stream_options"] == {"include_usage": True}


def _wait_until_the_kernel_stamps(timeout_s: float = 10.0) -> None:
    """Linux turns receive stamping on system-wide through deferred work (a kernel worker), which
    a busy host can run late: wait until a loopback read carries a stamp, so the client's reads
    after it must carry one too."""
    holder = rx_stamps.keep_enabled()
    listener = socket.create_server(("127.0.0.1", 0))
    deadline = perf_counter_ns() + int(timeout_s * 1e9)
    try:
        while True:
            with socket.create_connection(listener.getsockname()) as out:
                out.setsockopt(socket.SOL_SOCKET, rx_stamps.SO_TIMESTAMPNS, 1)
                peer, _ = listener.accept()
                with peer:
                    peer.sendall(b"x")
                    _, ancillary, _, _ = out.recvmsg(16, rx_stamps.ANCILLARY_SIZE)
            if ancillary:
                return
            assert perf_counter_ns() < deadline, f"no receive stamp on loopback in {timeout_s} s"
    finally:
        listener.close()
        if holder is not None:
            holder.close()


@pytest.mark.skipif(not rx_stamps.AVAILABLE, reason="kernel receive stamps need Linux")
async def test_arrivals_are_the_kernels_receive_stamps(scripted: ScriptedServer) -> None:
    scripted.script = [CHUNKED_HEAD + chunk(STREAM) + b"0\r\n\r\n"]
    client = FastOpenAIClient(f"http://127.0.0.1:{scripted.port}", "m", timeout_s=5.0)
    await client.open()  # holds stamping on from here (the client's own keeper)
    await asyncio.to_thread(_wait_until_the_kernel_stamps)
    try:
        before = perf_counter_ns()
        recs = [await client.send(PAYLOAD) for _ in range(3)]
        (conn,) = client._conns
        assert isinstance(conn.transport, rx_stamps.StampedTransport) and conn.transport.kernel_reads >= 1
    finally:
        await client.close()
    for rec in recs:
        assert rec.ok and before <= rec.sent_ns < rec.first_token_ns <= rec.end_ns < perf_counter_ns()  # type: ignore[operator]


async def test_request_larger_than_the_socket_buffer(scripted: ScriptedServer) -> None:
    scripted.script = [CHUNKED_HEAD + chunk(STREAM) + b"0\r\n\r\n"]
    client = FastOpenAIClient(f"http://127.0.0.1:{scripted.port}", "m", timeout_s=5.0)
    await client.open()
    try:
        rec = await client.send(RequestPayload(prompt="x" * 8_000_000, max_output_tokens=3))
    finally:
        await client.close()
    assert rec.ok, rec.error_detail
    assert json.loads(scripted.requests[0].split(b"\r\n\r\n", 1)[1])["prompt"] == "x" * 8_000_000


async def test_tokens_are_stamped_per_read(scripted: ScriptedServer) -> None:
    # Two events in one write share one arrival; an event in a later write gets a later one.
    first, second = event(" a") + event(" b"), event(" c") + event(usage=3) + b"data: [DONE]\n\n"
    scripted.script = [CHUNKED_HEAD + chunk(first), chunk(second) + b"0\r\n\r\n"]
    (rec,) = await send(scripted)
    assert rec.ok, rec.error_detail
    t = rec.token_times_ns
    assert len(t) == 3 and t[0] == t[1] < t[2] == rec.end_ns


@pytest.mark.parametrize("framing", ["content-length", "close"])
async def test_unchunked_streams(scripted: ScriptedServer, framing: str) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
    if framing == "content-length":
        head += f"Content-Length: {len(STREAM)}\r\n\r\n".encode()
    else:
        head = head.replace(b"HTTP/1.1", b"HTTP/1.0") + b"\r\n"  # the body ends when the server closes
    scripted.script = cut(head + STREAM, len(head) + 7, len(head) + 100)
    scripted.close = framing == "close"
    recs = await send(scripted, n=2)
    assert all(r.ok and len(r.token_times_ns) == 3 and r.output_tokens == 3 for r in recs), recs
    assert scripted.connections == (1 if framing == "content-length" else 2)


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (chunk(b'data: {"choices": [\n\n') + b"0\r\n\r\n", ErrorKind.MALFORMED),
        (chunk(event(" a")) + b"0\r\n\r\n", ErrorKind.TRUNCATED),
        (b"zz\r\n", ErrorKind.MALFORMED),  # a chunk size that is not hex
        (chunk(b'data: {"error": {"message": "overloaded"}}\n\n') + b"0\r\n\r\n", ErrorKind.OTHER),
    ],
)
async def test_bad_streams(scripted: ScriptedServer, body: bytes, kind: ErrorKind) -> None:
    scripted.script = [CHUNKED_HEAD + body]
    (rec,) = await send(scripted)
    assert rec.error is kind, rec.error_detail


async def test_non_streaming_body_in_pieces(scripted: ScriptedServer) -> None:
    doc = json.dumps({"choices": [{"text": " x y"}], "usage": {"prompt_tokens": 2, "completion_tokens": 2}})
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(doc)}\r\n\r\n"
    scripted.script = cut((head + doc).encode(), len(head) + 5)
    (rec,) = await send(scripted, stream=False)
    assert rec.ok and rec.output_tokens == 2 and rec.first_token_ns is None
