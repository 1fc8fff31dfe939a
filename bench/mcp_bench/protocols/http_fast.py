"""A lean HTTP/1.1 keep-alive client on ``asyncio.Protocol``, for load generation at high rates.

Why not only aiohttp: per request it costs a task, a response object and header parsing into
multidicts, which caps one core at a few thousand requests/s. Here a request is a prebuilt byte
string written to an idle connection, and the response is parsed just enough to know its status
and where its body ends (Content-Length, chunked, or connection close). Completion is a callback
(:meth:`FastHttpClient.start`), so the open-loop driver needs no task per request; :meth:`send`
wraps it for the ordinary :class:`~mcp_bench.records.ProtocolClient` contract.
Failures map to the same :class:`ErrorKind` values as the aiohttp client.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections import deque
from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING, Protocol, Self
from urllib.parse import urlsplit

from mcp_bench.protocols import rx_stamps
from mcp_bench.protocols.rx_stamps import StampedTransport
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord

if TYPE_CHECKING:
    from mcp_bench.plan import RunPlan

OnDone = Callable[[RequestRecord], None]
# Why a request failed, as (kind, detail); what a body reader returns instead of raising.
Failure = tuple[ErrorKind, str]
CUT_OFF = "still in flight when the level's drain time ran out"
_MAX_CALLBACK_ERRORS = 20
_DETAIL_MAX = 300
_MAX_LINE = 65536
# Chunked-body states: expecting a size line, the CRLF after a chunk's data, or trailer lines.
_SIZE, _DATA_END, _TRAILER = 0, 1, 2


class BodyReader(Protocol):
    """What a client makes of a response body, fed piece by piece as its bytes come off the socket.

    ``now_ns`` is the arrival instant of the read that carried the piece (stamped before any
    parsing), so a streaming reader can time events exactly. ``rec.status`` is set before the
    first piece. A reader that returns a :data:`Failure` ends the request and its connection.
    """

    wants_body: bool  # False: pieces are not even sliced out (plain HTTP only counts bytes)

    def feed(self, rec: RequestRecord, data: bytes, now_ns: int) -> Failure | None: ...

    def end(self, rec: RequestRecord) -> Failure | None:
        """The body ended cleanly (``rec.end_ns`` holds its arrival); judge the answer."""
        ...

    def lost(self, rec: RequestRecord) -> Failure | None:
        """The connection dropped inside the body; None when the answer was already complete."""
        ...


class PlainBody:
    """Plain HTTP: the body only has to end; a status outside 200-399 is the failure."""

    __slots__ = ()
    wants_body = False

    def feed(self, rec: RequestRecord, data: bytes, now_ns: int) -> Failure | None:
        return None

    def end(self, rec: RequestRecord) -> Failure | None:
        status = rec.status or 0
        if status >= 400 or status < 200:
            return ErrorKind.HTTP_STATUS, f"HTTP {status}"
        return None

    def lost(self, rec: RequestRecord) -> Failure | None:
        return ErrorKind.TRUNCATED, "connection closed before the end of the body"


PLAIN_BODY = PlainBody()


def fail_record(rec: RequestRecord, failure: Failure | None) -> RequestRecord:
    """Mark ``rec`` failed (detail cut to a bounded length); ``None`` leaves it as it is."""
    if failure is not None:
        rec.error = failure[0]
        rec.error_detail = failure[1][:_DETAIL_MAX]
    return rec


class _Request:
    __slots__ = ("conn", "data", "on_done", "reader", "rec", "timer")

    def __init__(self, data: bytes, rec: RequestRecord, on_done: OnDone, reader: BodyReader) -> None:
        self.data = data
        self.rec = rec
        self.on_done = on_done
        self.reader = reader
        self.conn: _Conn | None = None
        self.timer: asyncio.TimerHandle | None = None


class _Conn(asyncio.Protocol):
    """One keep-alive connection carrying at most one request at a time."""

    __slots__ = (
        "body_left",
        "buf",
        "chunk_state",
        "chunked",
        "client",
        "got_bytes",
        "head_done",
        "keep_alive",
        "req",
        "transport",
        "until_close",
    )

    def __init__(self, client: FastHttpClient) -> None:
        self.client = client
        self.transport: asyncio.Transport | StampedTransport | None = None
        self.req: _Request | None = None
        self.buf = bytearray()
        self.head_done = False
        self.body_left = 0  # Content-Length: bytes still to come; chunked: of the current chunk
        self.chunked = False
        self.chunk_state = _SIZE
        self.until_close = False
        self.keep_alive = True
        self.got_bytes = False

    # -- asyncio callbacks ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, req: _Request) -> None:
        self.req = req
        req.conn = self
        self.head_done = False
        self.got_bytes = False
        self.buf.clear()
        assert self.transport is not None
        self.transport.write(req.data)

    def data_received(self, data: bytes) -> None:
        self.bytes_arrived(data, perf_counter_ns())  # arrival, before any parsing

    def bytes_arrived(self, data: bytes, now: int) -> None:
        """``data`` came off the socket at ``now`` (the kernel's receive stamp where there is one)."""
        req = self.req
        if req is None:
            # Bytes with no request outstanding: the connection is out of step; drop it.
            self._close()
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
        self.client._lost(self)
        req = self.req
        if req is None:
            return
        if self.head_done and self.until_close:
            self._finish(perf_counter_ns())
        elif not self.got_bytes:
            self._fail(ErrorKind.DISCONNECTED, "server closed the connection before answering", close=False)
        elif self.head_done:
            failure = req.reader.lost(req.rec)
            if failure is None:
                self._finish(perf_counter_ns())
            else:
                self._fail(*failure, close=False)
        else:
            self._fail(ErrorKind.DISCONNECTED, "connection closed inside the response head", close=False)

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

    def _take(self, req: _Request, n: int, now: int) -> bool:
        """Hand the first ``n`` buffered body bytes to the reader; False when it failed the request."""
        buf = self.buf
        if n and req.reader.wants_body:
            failure = req.reader.feed(req.rec, bytes(buf[:n]), now)
            if failure is not None:
                self._fail(*failure)
                return False
        del buf[:n]
        return True

    def _dechunk(self, req: _Request, now: int) -> None:
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
        if not reusable:
            self._close()
        self.client._complete(req, self if reusable else None)

    def _fail(self, kind: ErrorKind, detail: str, *, close: bool = True) -> None:
        req = self.req
        self.req = None
        if close:
            self._close()
        if req is not None:
            req.rec.end_ns = perf_counter_ns()
            fail_record(req.rec, (kind, detail))
            self.client._complete(req, None)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class HttpSettings:
    """What an HTTP client is built from: one URL, method, body and headers, a timeout, a pool size."""

    def __init__(
        self,
        url: str,
        *,
        method: str = "GET",
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        timeout_s: float = 30.0,
        max_connections: int = 100,
    ) -> None:
        self.url = url
        self.method = method
        self.body = body
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self._configure()

    def _configure(self) -> None:
        """Derive what the client needs from the settings (and check them)."""

    @classmethod
    def from_plan(cls, plan: RunPlan, max_connections: int) -> Self:
        p = plan.payload
        return cls(
            plan.url,
            method=p.method,
            body=None if p.body is None else p.body.encode("utf-8"),
            headers=dict(p.headers),
            timeout_s=plan.request_timeout_s,
            max_connections=max_connections,
        )


class FastHttpClient(HttpSettings):
    """HTTP/1.1 over a keep-alive pool of at most ``max_connections`` connections.

    Plain HTTP as it is; other protocols on the same pool override :meth:`_prepare` (request
    bytes, and the :class:`BodyReader` of the answer) and :meth:`fingerprint`. With
    ``kernel_stamps`` (plain TCP on Linux) arrivals are the kernel's receive times, see
    :mod:`mcp_bench.protocols.rx_stamps`; plain HTTP leaves it off for the highest request rate.
    """

    kernel_stamps = False
    _stamp_keeper: socket.socket | None = None

    def _configure(self) -> None:
        url = self.url
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = parts.netloc.rsplit("@", 1)[-1]
        extra = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        self._head = f"{self.method} {target} HTTP/1.1\r\nHost: {host_header}\r\n{extra}".encode("latin-1")
        self._request = self._build(self.body)
        self._idle: list[_Conn] = []
        self._conns: set[_Conn] = set()
        self._connecting = 0
        self._waiting: deque[_Request] = deque()
        self._inflight: set[_Request] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.callback_errors: list[str] = []

    def _build(self, body: bytes | None) -> bytes:
        if body is None:
            return self._head + (b"Content-Length: 0\r\n\r\n" if self.method != "GET" else b"\r\n")
        return self._head + f"Content-Length: {len(body)}\r\n\r\n".encode() + body

    # -- ProtocolClient -------------------------------------------------------------------------
    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.kernel_stamps and self._stamp_keeper is None:
            self._stamp_keeper = rx_stamps.keep_enabled()

    async def close(self) -> None:
        if self._stamp_keeper is not None:
            self._stamp_keeper.close()
            self._stamp_keeper = None
        self.cut_inflight("client closed")
        for task in list(self._tasks):
            task.cancel()
        for conn in list(self._conns):
            conn._close()
        self._idle.clear()

    async def send(self, payload: RequestPayload) -> RequestRecord:
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future[RequestRecord] = loop.create_future()

        def done(rec: RequestRecord) -> None:
            if not fut.done():
                fut.set_result(rec)

        self.start(payload, None, done)
        return await fut

    async def fingerprint(self) -> dict[str, str]:
        from mcp_bench.protocols.http import HttpClient

        probe = HttpClient(self.url, timeout_s=min(self.timeout_s, 5.0), max_connections=1)
        await probe.open()
        try:
            return await probe.fingerprint()
        finally:
            await probe.close()

    # -- callback API (used by the open-loop driver) --------------------------------------------
    def start(self, payload: RequestPayload, scheduled_ns: int | None, on_done: OnDone) -> None:
        """Send now (or as soon as a connection is free); ``on_done`` gets the finished record."""
        rec = RequestRecord(sent_ns=0, end_ns=0, scheduled_ns=scheduled_ns)
        data, reader = self._prepare(payload, rec)
        req = _Request(data, rec, on_done, reader)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._inflight.add(req)
        idle = self._idle
        # Stamped right before the write on an idle connection; a request that has to wait for
        # one (or for a new connection) counts that wait, as with any pooled client.
        rec.sent_ns = perf_counter_ns()
        while idle:
            conn = idle.pop()
            if conn.transport is not None and not conn.transport.is_closing():
                conn.send(req)
                break
        else:
            self._waiting.append(req)
            self._maybe_connect()
        req.timer = loop.call_at(loop.time() + self.timeout_s, self._timeout, req)

    def _prepare(self, payload: RequestPayload, rec: RequestRecord) -> tuple[bytes, BodyReader]:
        """The request's bytes and the reader of its answer; protocols on this client override it."""
        data = self._request if payload.body is None else self._build(payload.body)
        return data, PLAIN_BODY

    def cut_inflight(self, detail: str = CUT_OFF) -> int:
        """Finish every outstanding request as a timeout (end of a level's drain time)."""
        reqs = list(self._inflight)
        for req in reqs:
            self._expire(req, detail)
        return len(reqs)

    @property
    def inflight(self) -> int:
        return len(self._inflight)

    # -- pool internals -------------------------------------------------------------------------
    def _maybe_connect(self) -> None:
        while self._waiting and len(self._conns) + self._connecting < self.max_connections:
            if self._connecting >= len(self._waiting):
                return
            self._connecting += 1
            assert self._loop is not None
            task = self._loop.create_task(self._connect())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _connect(self) -> None:
        loop = self._loop
        assert loop is not None
        try:
            if self.kernel_stamps and self.ssl is None and rx_stamps.AVAILABLE:
                conn = _Conn(self)
                await rx_stamps.open_stamped(loop, self.host, self.port, conn)
            else:
                _, conn = await loop.create_connection(
                    lambda: _Conn(self),
                    self.host,
                    self.port,
                    ssl=self.ssl,
                    server_hostname=self.host if self.ssl else None,
                )
        except asyncio.CancelledError:
            self._connecting -= 1
            raise
        except Exception as exc:
            self._connecting -= 1
            if self._waiting:
                req = self._waiting.popleft()
                kind = ErrorKind.TIMEOUT if isinstance(exc, TimeoutError) else ErrorKind.CONNECT
                self._error(
                    req, kind, f"cannot connect to {self.host}:{self.port}: {type(exc).__name__}: {exc}"
                )
            self._maybe_connect()
            return
        self._connecting -= 1
        self._conns.add(conn)
        self._release(conn)

    def _release(self, conn: _Conn) -> None:
        if self._waiting:
            conn.send(self._waiting.popleft())
        else:
            self._idle.append(conn)

    def _lost(self, conn: _Conn) -> None:
        self._conns.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        self._maybe_connect()

    def _complete(self, req: _Request, reusable: _Conn | None) -> None:
        if req.timer is not None:
            req.timer.cancel()
        self._inflight.discard(req)
        req.conn = None
        if reusable is not None:
            self._release(reusable)
        else:
            self._maybe_connect()
        try:
            req.on_done(req.rec)
        except Exception as exc:  # a broken sink must not break the connection pool
            if len(self.callback_errors) < _MAX_CALLBACK_ERRORS:
                self.callback_errors.append(f"{type(exc).__name__}: {exc}")

    def _error(self, req: _Request, kind: ErrorKind, detail: str) -> None:
        req.rec.end_ns = perf_counter_ns()
        fail_record(req.rec, (kind, detail))
        self._complete(req, None)

    def _timeout(self, req: _Request) -> None:
        self._expire(req, f"no complete answer within {self.timeout_s:g} s")

    def _expire(self, req: _Request, detail: str) -> None:
        if req not in self._inflight:
            return
        conn = req.conn
        if conn is not None:
            conn.req = None
            conn._close()  # a half-read response cannot be reused
        else:
            with contextlib.suppress(ValueError):
                self._waiting.remove(req)
        self._error(req, ErrorKind.TIMEOUT, detail)
