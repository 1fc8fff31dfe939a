"""A lean HTTP/1.1 keep-alive client on ``asyncio.Protocol``, for load generation at high rates.

Why not only aiohttp: per request it costs a task, a response object and header parsing into
multidicts, which caps one core at a few thousand requests/s. Here a request is a prebuilt byte
string written to an idle connection, and the response is parsed just enough to know its status
and where its body ends (:mod:`mcp_bench.protocols.http_connection`). Completion is a callback
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
from time import perf_counter_ns
from typing import Any
from urllib.parse import urlsplit

from mcp_bench import dialguard
from mcp_bench.load.common import CUT_OFF
from mcp_bench.protocols import rx_stamps, rx_stamps_tls
from mcp_bench.protocols.http_aiohttp import HttpClient
from mcp_bench.protocols.http_common import PLAIN_BODY, BodyReader, HttpSettings, fail_record
from mcp_bench.protocols.http_connection import Connection, OnDone, PendingRequest
from mcp_bench.records import ConnectionMode, ConnectTime, ErrorKind, RequestPayload, RequestRecord

_MAX_CALLBACK_ERRORS = 20


class FastHttpClient(HttpSettings):
    """HTTP/1.1 over a keep-alive pool of at most ``max_connections`` connections.

    Plain HTTP as it is; other protocols on the same pool override :meth:`_prepare` (request
    bytes, and the :class:`~mcp_bench.protocols.http_common.BodyReader` of the answer) and
    :meth:`fingerprint`. With ``kernel_stamps`` (Linux; TCP or TLS) arrivals are the kernel's
    receive times, see :mod:`mcp_bench.protocols.rx_stamps` and :mod:`~mcp_bench.protocols.rx_stamps_tls`;
    plain HTTP leaves it off for the highest request rate.
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
        self._rule = dialguard.active_rule()
        self.ssl: ssl.SSLContext | None = ssl.create_default_context() if parts.scheme == "https" else None
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        host_header = parts.netloc.rsplit("@", 1)[-1]
        extra = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        self._head = f"{self.method} {target} HTTP/1.1\r\nHost: {host_header}\r\n{extra}".encode("latin-1")
        self._request = self._build(self.body)
        self._idle: list[Connection] = []
        self._conns: set[Connection] = set()
        self._connecting = 0
        self._waiting: deque[PendingRequest] = deque()
        self._inflight: set[PendingRequest] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.callback_errors: list[str] = []
        self._per_request = False
        self._connect_times: list[ConnectTime] = []

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
            conn.abort()
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
        # the same request as the measured ones (method, body, headers: a secret Authorization
        # too), so the fingerprint is the server's answer to it and not to an anonymous probe
        probe = HttpClient(
            self.url,
            method=self.method,
            body=self.body,
            headers=self.headers,
            timeout_s=min(self.timeout_s, 5.0),
            max_connections=1,
        )
        await probe.open()
        try:
            return await probe.fingerprint()
        finally:
            await probe.close()

    # -- ConnectionControl ----------------------------------------------------------------------
    async def prepare_connections(self, mode: ConnectionMode, count: int) -> None:
        """Warm: open idle connections up to ``count`` now, so no measured request waits for a
        connect (those idle too long to reuse are replaced); cold and per-request: close the idle
        ones, so the level opens its own."""
        self._loop = asyncio.get_running_loop()
        self._per_request = mode == "per-request"
        if mode != "warm":
            for conn in list(self._idle):
                conn.abort()
            self._idle.clear()
            return
        now = perf_counter_ns()
        for conn in [c for c in self._idle if not c.fit_for(now)]:  # idle since an earlier level
            self._idle.remove(conn)
            self._conns.discard(conn)
        missing = count - len(self._conns) - self._connecting
        if missing > 0:
            self._connecting += missing
            opening = asyncio.gather(*(self._connect() for _ in range(missing)))
            with contextlib.suppress(TimeoutError):  # the level's requests then meet it themselves
                await asyncio.wait_for(opening, self.timeout_s)

    def take_connect_times(self) -> list[ConnectTime]:
        times, self._connect_times = self._connect_times, []
        return times

    # -- callback API (used by the open-loop driver) --------------------------------------------
    def start(self, payload: RequestPayload, scheduled_ns: int | None, on_done: OnDone) -> None:
        """Send now (or as soon as a connection is free); ``on_done`` gets the finished record."""
        rec = RequestRecord(sent_ns=0, end_ns=0, scheduled_ns=scheduled_ns)
        data, reader = self._prepare(payload, rec)
        req = PendingRequest(data, rec, on_done, reader)
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        self._inflight.add(req)
        idle = self._idle
        # Stamped right before the write on an idle connection; a request that has to wait for
        # one (or for a new connection) counts that wait, as with any pooled client.
        rec.sent_ns = now = perf_counter_ns()
        while idle:
            conn = idle.pop()
            if conn.fit_for(now):
                conn.send(req)
                break
            self._conns.discard(conn)  # closed: a new connection may take its place at once
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

    # -- what the connections report (ConnectionPool) -------------------------------------------
    def on_connection_lost(self, conn: Connection) -> None:
        self._conns.discard(conn)
        if conn in self._idle:
            self._idle.remove(conn)
        self._maybe_connect()

    def on_request_done(self, req: PendingRequest, reusable: Connection | None) -> None:
        if req.timer is not None:
            req.timer.cancel()
        self._inflight.discard(req)
        req.conn = None
        if reusable is not None and self._per_request:
            reusable.abort()  # its loss opens the next waiting request's connection
        elif reusable is not None:
            self._release(reusable)
        else:
            self._maybe_connect()
        try:
            req.on_done(req.rec)
        except Exception as exc:  # a broken sink must not break the connection pool
            if len(self.callback_errors) < _MAX_CALLBACK_ERRORS:
                self.callback_errors.append(f"{type(exc).__name__}: {exc}")

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
            conn = await self._open(loop)
        except asyncio.CancelledError:
            self._connecting -= 1
            raise
        except Exception as exc:
            self._connecting -= 1
            if self._waiting:
                req = self._waiting.popleft()
                kind = (
                    ErrorKind.NOT_ALLOWED
                    if dialguard.is_refusal(exc)
                    else ErrorKind.TIMEOUT
                    if isinstance(exc, TimeoutError)
                    else ErrorKind.CONNECT
                )
                self._error(
                    req, kind, f"cannot connect to {self.host}:{self.port}: {type(exc).__name__}: {exc}"
                )
            self._maybe_connect()
            return
        self._connecting -= 1
        self._conns.add(conn)
        if self._waiting:
            self._waiting[0].rec.new_connection = True
        self._release(conn)

    async def _open(self, loop: asyncio.AbstractEventLoop) -> Connection:
        """One new connection, its TCP connect and TLS handshake timed apart."""
        conn = Connection(self)
        t0 = perf_counter_ns()
        if self.kernel_stamps and rx_stamps.AVAILABLE:
            return await self._open_stamped(loop, conn, t0)
        transport, _ = await loop.create_connection(lambda: conn, self.host, self.port)
        t1 = perf_counter_ns()
        self._check_peer(transport.get_extra_info("peername"), conn)
        tls_ns = None
        if self.ssl is not None:
            assert conn.transport is not None
            try:
                tls = await loop.start_tls(
                    conn.transport,  # type: ignore[arg-type]
                    conn,
                    self.ssl,
                    server_hostname=self.host,
                )
            except BaseException:
                conn.abort()
                raise
            assert tls is not None
            conn.transport = tls
            tls_ns = perf_counter_ns() - t1
        self._connect_times.append(ConnectTime(t1 - t0, tls_ns))
        return conn

    def _check_peer(self, peername: Any, conn: Connection) -> None:
        """The target policy on the address this connection reached, once, before a byte is
        sent (a name may resolve to another address than the one admission checked)."""
        try:
            dialguard.check_peer(self._rule, peername, self.host)
        except dialguard.DialRefused:
            conn.abort()
            raise

    async def _open_stamped(self, loop: asyncio.AbstractEventLoop, conn: Connection, t0: int) -> Connection:
        """A connection whose reads carry the kernel's receive stamps, over TLS too."""
        sock = await rx_stamps.connect_stamped(loop, self.host, self.port)
        t1 = perf_counter_ns()
        try:
            dialguard.check_peer(self._rule, sock.getpeername(), self.host)
        except dialguard.DialRefused:
            sock.close()
            raise
        if self.ssl is None:
            rx_stamps.StampedTransport(loop, sock, conn)
            self._connect_times.append(ConnectTime(t1 - t0, None))
            return conn
        try:
            session = await rx_stamps_tls.handshake(loop, sock, self.ssl, self.host)
        except BaseException:
            sock.close()
            raise
        rx_stamps_tls.StampedTlsTransport(loop, sock, conn, session)
        self._connect_times.append(ConnectTime(t1 - t0, perf_counter_ns() - t1))
        return conn

    def _release(self, conn: Connection) -> None:
        if self._waiting:
            conn.send(self._waiting.popleft())
        else:
            self._idle.append(conn)

    def _error(self, req: PendingRequest, kind: ErrorKind, detail: str) -> None:
        req.rec.end_ns = perf_counter_ns()
        fail_record(req.rec, (kind, detail))
        self.on_request_done(req, None)

    def _timeout(self, req: PendingRequest) -> None:
        self._expire(req, f"no complete answer within {self.timeout_s:g} s")

    def _expire(self, req: PendingRequest, detail: str) -> None:
        if req not in self._inflight:
            return
        conn = req.conn
        if conn is not None:
            conn.req = None
            conn.abort()  # a half-read response cannot be reused
        else:
            with contextlib.suppress(ValueError):
                self._waiting.remove(req)
        self._error(req, ErrorKind.TIMEOUT, detail)
