"""One keep-alive HTTP/1.1 connection of the lean client: it writes a request, reads its answer.

Why a module of its own: reading a response off the socket (its head, then a body delimited by
Content-Length, chunked framing or the connection's close) is the part of the lean client that
runs on every arrival of bytes; the pool in :mod:`mcp_bench.protocols.http_fast` only hands
requests to connections and takes them back. A connection speaks to its pool through
:class:`ConnectionPool`, so this module does not import the pool.
"""

from __future__ import annotations

import asyncio
import select
from collections.abc import Callable
from time import perf_counter_ns
from typing import Protocol

from mcp_bench.protocols.http_common import KEEPALIVE_EXPIRY_S, BodyReader, fail_record
from mcp_bench.protocols.rx_stamps import StampedTransport
from mcp_bench.records import ErrorKind, RequestRecord

# Gets the finished record of a request (completion is a callback, not a task per request).
OnDone = Callable[[RequestRecord], None]
_MAX_LINE = 65536
# Chunked-body states: expecting a size line, the CRLF after a chunk's data, or trailer lines.
_SIZE, _DATA_END, _TRAILER = 0, 1, 2
# An idle connection is asked whether the server has closed it (one poll) once it sat idle this
# long; a busy pool reuses its connections sooner and pays nothing.
_CHECK_AFTER_NS = 1_000_000_000
_EXPIRY_NS = int(KEEPALIVE_EXPIRY_S * 1e9)


class PendingRequest:
    """A request from the moment it is started until its record is handed to ``on_done``."""

    __slots__ = ("conn", "data", "on_done", "reader", "rec", "timer")

    def __init__(self, data: bytes, rec: RequestRecord, on_done: OnDone, reader: BodyReader) -> None:
        self.data = data
        self.rec = rec
        self.on_done = on_done
        self.reader = reader
        self.conn: Connection | None = None
        self.timer: asyncio.TimerHandle | None = None


def _has_input(transport: asyncio.Transport | StampedTransport) -> bool:
    """Whether the socket under an idle connection holds unread input: the server's FIN (or
    anything else no request asked for), either way the end of the connection."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN)
    return bool(poller.poll(0))


class ConnectionPool(Protocol):
    """What a connection reports to the pool that owns it."""

    def on_connection_lost(self, conn: Connection) -> None:
        """``conn`` is closed: it is no longer in the pool."""
        ...

    def on_request_done(self, req: PendingRequest, reusable: Connection | None) -> None:
        """``req`` is finished (its record filled in); ``reusable`` is its connection when it can
        carry another request."""
        ...


class Connection(asyncio.Protocol):
    """One keep-alive connection carrying at most one request at a time."""

    __slots__ = (
        "body_left",
        "buf",
        "chunk_state",
        "chunked",
        "got_bytes",
        "head_done",
        "idle_since",
        "keep_alive",
        "pool",
        "req",
        "served",
        "transport",
        "until_close",
        "written_at",
    )

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool
        self.transport: asyncio.Transport | StampedTransport | None = None
        self.req: PendingRequest | None = None
        self.buf = bytearray()
        self.head_done = False
        self.body_left = 0  # Content-Length: bytes still to come; chunked: of the current chunk
        self.chunked = False
        self.chunk_state = _SIZE
        self.until_close = False
        self.keep_alive = True
        self.got_bytes = False
        self.served = 0  # answers this connection carried
        self.idle_since = 0  # perf_counter_ns when its last answer ended
        self.written_at = 0  # perf_counter_ns when the current request was written

    # -- asyncio callbacks ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.idle_since = perf_counter_ns()

    def fit_for(self, now: int) -> bool:
        """Whether this idle connection can carry a request written at ``now``; one that cannot
        (closed, idle past :data:`KEEPALIVE_EXPIRY_S`, or with the server's close already in its
        socket while the event loop had not come to it) is closed here.

        Why: writing into a connection the server is closing loses the request before any byte
        of an answer (``disconnected``), a failure of the client's timing and not of the server.
        """
        transport = self.transport
        if transport is None or transport.is_closing():
            return False
        idle = now - self.idle_since
        if idle > _CHECK_AFTER_NS and (idle > _EXPIRY_NS or _has_input(transport)):
            self.abort()
            return False
        return True

    def send(self, req: PendingRequest) -> None:
        self.req = req
        req.conn = self
        self.head_done = False
        self.got_bytes = False
        self.buf.clear()
        assert self.transport is not None
        self.written_at = perf_counter_ns()
        self.transport.write(req.data)

    def data_received(self, data: bytes) -> None:
        self.bytes_arrived(data, perf_counter_ns())  # arrival, before any parsing

    def bytes_arrived(self, data: bytes, now: int) -> None:
        """``data`` came off the socket at ``now`` (the kernel's receive stamp where there is one)."""
        req = self.req
        if req is None:
            # Bytes with no request outstanding: the connection is out of step; drop it.
            self.abort()
            return
        self.got_bytes = True
        buf = self.buf
        buf += data
        while not self.head_done:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > _MAX_LINE:
                    self._fail(ErrorKind.MALFORMED, "response head over 64 KiB")
                return
            if not self._parse_head(bytes(buf[: end + 2])):
                return
            del buf[: end + 4]  # a 1xx interim response leaves head_done False: parse the next head
        if self.chunked:
            self._dechunk(req, now)
        elif self.until_close:
            self._take(req, len(buf), now)
        elif req.reader.wants_body:
            take = min(len(buf), self.body_left)
            if self._take(req, take, now):
                self.body_left -= take
                if self.body_left == 0:
                    self._finish(now)
        elif len(buf) >= self.body_left:  # plain HTTP: only where the body ends matters
            self._finish(now)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.pool.on_connection_lost(self)
        req = self.req
        if req is None:
            return
        if self.head_done and self.until_close:
            self._finish(perf_counter_ns())
        elif not self.got_bytes:
            self._fail(
                ErrorKind.DISCONNECTED,
                f"server closed the connection before answering ({self._history(exc)})",
                close=False,
            )
        elif self.head_done:
            failure = req.reader.lost(req.rec)
            if failure is None:
                self._finish(perf_counter_ns())
            else:
                self._fail(*failure, close=False)
        else:
            self._fail(ErrorKind.DISCONNECTED, "connection closed inside the response head", close=False)

    def _history(self, exc: Exception | None) -> str:
        """How the connection ended and what it carried before: a reused connection the server
        closed while idle is a different story from a new one it refused."""
        how = f"{type(exc).__name__}: {exc}" if exc is not None else "end of stream"
        if not self.served:
            return f"{how}; its first request"
        idle_ms = (self.written_at - self.idle_since) / 1e6
        return f"{how}; after {self.served} answers on it, idle {idle_ms:.0f} ms before this request"

    # -- parsing --------------------------------------------------------------------------------
    def _parse_head(self, head: bytes) -> bool:
        if not head.startswith(b"HTTP/1.") or len(head) < 12 or not head[9:12].isdigit():
            self._fail(ErrorKind.MALFORMED, f"bad status line {head[:40]!r}")
            return False
        status = int(head[9:12])
        assert self.req is not None
        if 100 <= status < 200:
            return True  # interim; head_done stays False
        self.req.rec.status = status
        self.head_done = True
        lower = head.lower()
        self.keep_alive = b"\r\nconnection: close" not in lower and not head.startswith(b"HTTP/1.0")
        self.chunked = False
        self.until_close = False
        i = lower.find(b"\r\ncontent-length:")
        if i >= 0:
            j = lower.find(b"\r\n", i + 17)
            try:
                self.body_left = int(lower[i + 17 : j])
            except ValueError:
                self._fail(ErrorKind.MALFORMED, "bad Content-Length")
                return False
        elif b"\r\ntransfer-encoding:" in lower and b"chunked" in lower:
            self.chunked = True
            self.chunk_state = _SIZE
            self.body_left = 0
        elif status in (204, 304):
            self.body_left = 0
        else:
            self.until_close = True
            self.keep_alive = False
        return True

    def _take(self, req: PendingRequest, n: int, now: int) -> bool:
        """Hand the first ``n`` buffered body bytes to the reader; False when it failed the request."""
        buf = self.buf
        if n and req.reader.wants_body:
            failure = req.reader.feed(req.rec, bytes(buf[:n]), now)
            if failure is not None:
                self._fail(*failure)
                return False
        del buf[:n]
        return True

    def _dechunk(self, req: PendingRequest, now: int) -> None:
        """Strip the chunked framing, handing each piece of chunk data to the reader as it arrives."""
        buf, reader, pos = self.buf, req.reader, 0
        while pos < len(buf):
            if self.body_left:  # inside a chunk's data
                take = min(self.body_left, len(buf) - pos)
                if reader.wants_body:
                    failure = reader.feed(req.rec, bytes(buf[pos : pos + take]), now)
                    if failure is not None:
                        self._fail(*failure)
                        return
                pos += take
                self.body_left -= take
                continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if len(buf) - pos > _MAX_LINE:
                    self._fail(ErrorKind.MALFORMED, "chunk framing line over 64 KiB")
                    return
                break
            state = self.chunk_state
            if state == _DATA_END:
                if eol != pos:
                    self._fail(ErrorKind.MALFORMED, "chunk data longer than its size")
                    return
                self.chunk_state = _SIZE
            elif state == _TRAILER:
                if eol == pos:  # the empty line after the last chunk (and any trailers)
                    buf.clear()
                    self._finish(now)
                    return
            else:
                try:
                    size = int(bytes(buf[pos:eol]).split(b";", 1)[0].strip(), 16)
                except ValueError:
                    size = -1
                if size < 0:
                    self._fail(ErrorKind.MALFORMED, "bad chunk size")
                    return
                self.body_left = size
                self.chunk_state = _DATA_END if size else _TRAILER
            pos = eol + 2
        del buf[:pos]

    # -- completion -----------------------------------------------------------------------------
    def _finish(self, now: int) -> None:
        req = self.req
        assert req is not None
        self.req = None
        rec = req.rec
        rec.end_ns = now
        fail_record(rec, req.reader.end(rec))
        reusable = self.keep_alive and self.transport is not None and not self.until_close
        self.served += 1
        self.idle_since = now
        if not reusable:
            self.abort()
        self.pool.on_request_done(req, self if reusable else None)

    def _fail(self, kind: ErrorKind, detail: str, *, close: bool = True) -> None:
        req = self.req
        self.req = None
        if close:
            self.abort()
        if req is not None:
            req.rec.end_ns = perf_counter_ns()
            fail_record(req.rec, (kind, detail))
            self.pool.on_request_done(req, None)

    def abort(self) -> None:
        """Close the connection at once (a half-read answer cannot be reused)."""
        if self.transport is not None:
            self.transport.abort()
