"""Plain HTTP on aiohttp: one request, one response, latency from send to the last body byte.

Why it stays beside the lean client: it is the reference the lean client is checked against, the
choice of ``http_client: aiohttp`` in a plan, the probe that reads a server's fingerprint, and it
holds what the other aiohttp-based clients share (:class:`AiohttpSession`, :func:`classify_error`).
One shared aiohttp session with a keep-alive pool sized to the run's concurrency; every failure
comes back as a record with an :class:`ErrorKind`, never as an exception.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
from time import perf_counter_ns
from types import SimpleNamespace
from typing import Any

import aiohttp

from mcp_bench import dialguard
from mcp_bench.protocols import rx_stamps
from mcp_bench.protocols.http_common import (
    KEEPALIVE_EXPIRY_S,
    PLAIN_BODY,
    HttpSettings,
    fail_record,
    parse_server_header,
)
from mcp_bench.protocols.rx_stamps_socket import StampingSocket, socket_factory
from mcp_bench.records import ConnectionMode, ConnectTime, ErrorKind, RequestPayload, RequestRecord

_TAKES_SOCKET_FACTORY = "socket_factory" in inspect.signature(aiohttp.TCPConnector).parameters


def classify_error(exc: BaseException) -> ErrorKind:
    """Map a client-side exception to the kind a result counts it under."""
    if dialguard.is_refusal(exc):
        return ErrorKind.NOT_ALLOWED
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return ErrorKind.TIMEOUT
    if isinstance(exc, aiohttp.ClientConnectorError):
        return ErrorKind.CONNECT
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return ErrorKind.DISCONNECTED
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ErrorKind.TRUNCATED
    if isinstance(exc, aiohttp.ClientResponseError):
        return ErrorKind.MALFORMED
    if isinstance(exc, aiohttp.ClientOSError | ConnectionError):
        return ErrorKind.DISCONNECTED
    if isinstance(exc, OSError):
        return ErrorKind.CONNECT
    return ErrorKind.OTHER


class AiohttpSession:
    """One shared aiohttp session with a keep-alive pool, for the clients built on aiohttp.

    aiohttp opens connections inside a request and has no call that only connects, so a warm
    pool is filled with ``count`` concurrent unmeasured requests (:meth:`_warm_request`); its
    connect time is DNS, TCP and TLS together (aiohttp's trace does not tell them apart).
    """

    timeout_s: float
    max_connections: int
    headers: dict[str, str]
    _session: aiohttp.ClientSession | None = None
    _force_close = False
    _connect_times: list[ConnectTime] | None = None
    # stamp reads in the kernel (rx_stamps_socket) where aiohttp takes a socket factory (3.12+)
    kernel_stamps = False
    _stamping: dict[int, StampingSocket] | None = None

    async def open(self) -> None:
        self._connect_times = []
        trace = aiohttp.TraceConfig()
        trace.on_connection_create_start.append(self._connect_started)
        trace.on_connection_create_end.append(self._connect_ended)
        extra: dict[str, Any] = {}
        stamping = None
        if self.kernel_stamps and rx_stamps.AVAILABLE and _TAKES_SOCKET_FACTORY:
            self._stamping = {}
            stamping = self._new_socket
        # the operator's target policy, on each address a connection is opened to
        factory = dialguard.socket_factory(dialguard.active_rule(), stamping)
        if factory is not None:
            extra["socket_factory"] = factory
        if not self._force_close:  # aiohttp's own 15 s outlives the 5 s of many servers
            extra["keepalive_timeout"] = KEEPALIVE_EXPIRY_S
        connector = aiohttp.TCPConnector(
            limit=self.max_connections,
            limit_per_host=0,
            ttl_dns_cache=300,
            force_close=self._force_close,
            **extra,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            headers=self.headers,
            auto_decompress=False,
            trace_configs=[trace],
        )

    async def _connect_started(
        self, session: aiohttp.ClientSession, ctx: SimpleNamespace, params: object
    ) -> None:
        ctx.connect_start = perf_counter_ns()

    async def _connect_ended(
        self, session: aiohttp.ClientSession, ctx: SimpleNamespace, params: object
    ) -> None:
        start = getattr(ctx, "connect_start", None)
        if start is not None and self._connect_times is not None:
            self._connect_times.append(ConnectTime(perf_counter_ns() - start))
        holder = getattr(ctx, "trace_request_ctx", None)
        if isinstance(holder, dict) and isinstance(holder.get("rec"), RequestRecord):
            holder["rec"].new_connection = True

    def _new_socket(self, addr_info: tuple[Any, ...]) -> socket.socket:
        sock = socket_factory(addr_info)
        if isinstance(sock, StampingSocket) and self._stamping is not None:
            self._stamping[sock.fileno()] = sock  # a reused descriptor is taken by its new socket
        return sock

    def stamping_socket(self, resp: aiohttp.ClientResponse) -> StampingSocket | None:
        """The stamping socket under a response being read; None where reads are not stamped."""
        conn = resp.connection
        transport = None if conn is None else conn.transport
        info = None if transport is None or self._stamping is None else transport.get_extra_info("socket")
        sock = None if info is None or self._stamping is None else self._stamping.get(info.fileno())
        return sock if sock is not None and sock.last_arrival_ns else None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def prepare_connections(self, mode: ConnectionMode, count: int) -> None:
        """Cold and per-request start the level on a fresh pool (per-request: closed after each
        answer); warm fills the pool with ``count`` concurrent unmeasured requests."""
        force_close = mode == "per-request"
        if mode != "warm" or force_close != self._force_close or self._session is None:
            times = self._connect_times
            await self.close()
            self._force_close = force_close
            await self.open()
            self._connect_times = times
        if mode == "warm" and count > 0:
            await asyncio.gather(*(self._warm_one() for _ in range(count)))

    async def _warm_one(self) -> None:
        method, url, body = self._warm_request()
        with contextlib.suppress(Exception):  # a failed warm-up request leaves its slot cold
            async with self.session.request(method, url, data=body) as resp:
                await resp.read()

    def _warm_request(self) -> tuple[str, str, bytes | None]:
        """The unmeasured request that opens a connection: method, URL and body."""
        raise NotImplementedError

    def take_connect_times(self) -> list[ConnectTime]:
        times = self._connect_times or []
        self._connect_times = []
        return times

    @property
    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError(f"{type(self).__name__}.open() was not called")
        return self._session


class HttpClient(HttpSettings, AiohttpSession):
    """A :class:`~mcp_bench.records.ProtocolClient` for plain HTTP requests to one URL, on aiohttp."""

    async def send(self, payload: RequestPayload) -> RequestRecord:
        body = payload.body if payload.body is not None else self.body
        session = self.session
        rec = RequestRecord(sent_ns=perf_counter_ns(), end_ns=0)
        try:
            async with session.request(
                self.method, self.url, data=body, trace_request_ctx={"rec": rec}
            ) as resp:
                await resp.read()
                rec.end_ns = perf_counter_ns()
                rec.status = resp.status
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            rec.end_ns = perf_counter_ns()
            return fail_record(rec, (classify_error(exc), f"{type(exc).__name__}: {exc}"))
        return fail_record(rec, PLAIN_BODY.end(rec))

    def _warm_request(self) -> tuple[str, str, bytes | None]:
        return self.method, self.url, self.body

    async def fingerprint(self) -> dict[str, str]:
        try:
            async with self.session.request("GET", self.url) as resp:
                await resp.read()
                server = resp.headers.get("Server", "")
        except Exception:
            return {"server_name": "", "server_version": ""}
        name, version = parse_server_header(server)
        return {"server_name": name, "server_version": version}
