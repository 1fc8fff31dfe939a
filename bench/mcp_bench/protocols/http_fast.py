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
import ssl
from collections import deque
from collections.abc import Callable
from time import perf_counter_ns
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord

if TYPE_CHECKING:
    from mcp_bench.plan import RunPlan

OnDone = Callable[[RequestRecord], None]
CUT_OFF = "still in flight when the level's drain time ran out"
_MAX_CALLBACK_ERRORS = 20


class _Request:
    __slots__ = ("conn", "data", "on_done", "rec", "timer")

    def __init__(self, data: bytes, rec: RequestRecord, on_done: OnDone) -> None:
        self.data = data
        self.rec = rec
        self.on_done = on_done
        self.conn: _Conn | None = None
        self.timer: asyncio.TimerHandle | None = None


class _Conn(asyncio.Protocol):
    """One keep-alive connection carrying at most one request at a time."""

    __slots__ = (
        "body_left",
        "buf",
        "chunk_pos",
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
        self.transport: asyncio.Transport | None = None
        self.req: _Request | None = None
        self.buf = bytearray()
        self.head_done = False
        self.body_left = 0
        self.chunked = False
        self.chunk_pos = 0
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
        if self.req is None:
            # Bytes with no request outstanding: the connection is out of step; drop it.
            self._close()
            return
        self.got_bytes = True
        buf = self.buf
        buf += data
        if not self.head_done:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                if len(buf) > 65536:
                    self._fail(ErrorKind.MALFORMED, "response head over 64 KiB")
                return
            if not self._parse_head(bytes(buf[: end + 2])):
                return
            del buf[: end + 4]
            if not self.head_done:  # a 1xx interim response: parse the next head
                self.data_received(b"")
                return
        if self.chunked:
            self._scan_chunks()
        elif not self.until_close and len(buf) >= self.body_left:
            self._finish()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.client._lost(self)
        req = self.req
        if req is None:
            return
        if self.head_done and self.until_close:
            self._finish()
        elif not self.got_bytes:
            self._fail(ErrorKind.DISCONNECTED, "server closed the connection before answering", close=False)
        elif self.head_done:
            self._fail(ErrorKind.TRUNCATED, "connection closed before the end of the body", close=False)
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
            self.chunk_pos = 0
        elif status in (204, 304):
            self.body_left = 0
        else:
            self.until_close = True
            self.keep_alive = False
        return True

    def _scan_chunks(self) -> None:
        buf, pos = self.buf, self.chunk_pos
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                self._fail(ErrorKind.MALFORMED, "bad chunk size")
                return
            if size == 0:
                # The last chunk, then optional trailers, then an empty line.
                if buf.find(b"\r\n\r\n", eol) >= 0:
                    self._finish()
                break
            if len(buf) < eol + 2 + size + 2:
                break
            pos = eol + 2 + size + 2
        self.chunk_pos = pos

    # -- completion -----------------------------------------------------------------------------
    def _finish(self) -> None:
        req = self.req
        assert req is not None
        self.req = None
        rec = req.rec
        rec.end_ns = perf_counter_ns()
        status = rec.status or 0
        if status >= 400 or status < 200:
            rec.error = ErrorKind.HTTP_STATUS
            rec.error_detail = f"HTTP {status}"
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
            req.rec.error = kind
            req.rec.error_detail = detail
            self.client._complete(req, None)

    def _close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class FastHttpClient:
    """Plain HTTP over a keep-alive pool of at most ``max_connections`` connections."""

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
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {url!r}")
        self.url = url
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = parts.netloc.rsplit("@", 1)[-1]
        self.method = method
        self.body = body
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._head = f"{method} {target} HTTP/1.1\r\nHost: {host_header}\r\n{extra}".encode("latin-1")
        self._request = self._build(body)
        self._idle: list[_Conn] = []
        self._conns: set[_Conn] = set()
        self._connecting = 0
        self._waiting: deque[_Request] = deque()
        self._inflight: set[_Request] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.callback_errors: list[str] = []

    @classmethod
    def from_plan(cls, plan: RunPlan, max_connections: int) -> FastHttpClient:
        p = plan.payload
        return cls(
            plan.url,
            method=p.method,
            body=None if p.body is None else p.body.encode("utf-8"),
            headers=dict(p.headers),
            timeout_s=plan.request_timeout_s,
            max_connections=max_connections,
        )

    def _build(self, body: bytes | None) -> bytes:
        if body is None:
            return self._head + (b"Content-Length: 0\r\n\r\n" if self.method != "GET" else b"\r\n")
        return self._head + f"Content-Length: {len(body)}\r\n\r\n".encode() + body

    # -- ProtocolClient -------------------------------------------------------------------------
    async def open(self) -> None:
        self._loop = asyncio.get_running_loop()

    async def close(self) -> None:
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
        data = self._request if payload.body is None else self._build(payload.body)
        rec = RequestRecord(sent_ns=perf_counter_ns(), end_ns=0, scheduled_ns=scheduled_ns)
        req = _Request(data, rec, on_done)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        req.timer = loop.call_at(loop.time() + self.timeout_s, self._timeout, req)
        self._inflight.add(req)
        idle = self._idle
        while idle:
            conn = idle.pop()
            if conn.transport is not None and not conn.transport.is_closing():
                conn.send(req)
                return
        self._waiting.append(req)
        self._maybe_connect()

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
        assert self._loop is not None
        try:
            _, conn = await self._loop.create_connection(
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
                self._error(req, kind, f"{type(exc).__name__}: {exc}"[:300])
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
        req.rec.error = kind
        req.rec.error_detail = detail
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
