"""Plain HTTP on aiohttp: one request, one response, latency from send to the last body byte.

Why it stays beside the lean client: it is the reference the lean client is checked against, the
choice of ``http_client: aiohttp`` in a plan, the probe that reads a server's fingerprint, and it
holds what the other aiohttp-based clients share (:class:`AiohttpSession`, :func:`classify_error`).
One shared aiohttp session with a keep-alive pool sized to the run's concurrency; every failure
comes back as a record with an :class:`ErrorKind`, never as an exception.
"""

from __future__ import annotations

import asyncio
from time import perf_counter_ns

import aiohttp

from mcp_bench.protocols.http_common import PLAIN_BODY, HttpSettings, fail_record, parse_server_header
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord


def classify_error(exc: BaseException) -> ErrorKind:
    """Map a client-side exception to the kind a result counts it under."""
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
    """One shared aiohttp session with a keep-alive pool, for the clients built on aiohttp."""

    timeout_s: float
    max_connections: int
    headers: dict[str, str]
    _session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        connector = aiohttp.TCPConnector(limit=self.max_connections, limit_per_host=0, ttl_dns_cache=300)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.timeout_s),
            headers=self.headers,
            auto_decompress=False,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

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
            async with session.request(self.method, self.url, data=body) as resp:
                await resp.read()
                rec.end_ns = perf_counter_ns()
                rec.status = resp.status
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            rec.end_ns = perf_counter_ns()
            return fail_record(rec, (classify_error(exc), f"{type(exc).__name__}: {exc}"))
        return fail_record(rec, PLAIN_BODY.end(rec))

    async def fingerprint(self) -> dict[str, str]:
        try:
            async with self.session.request("GET", self.url) as resp:
                await resp.read()
                server = resp.headers.get("Server", "")
        except Exception:
            return {"server_name": "", "server_version": ""}
        name, version = parse_server_header(server)
        return {"server_name": name, "server_version": version}
