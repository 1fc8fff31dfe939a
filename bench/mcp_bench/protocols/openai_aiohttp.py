"""The OpenAI streaming client on aiohttp (``http_client: aiohttp`` in the plan).

Why it stays beside the lean client: it is the reference the lean client is checked against and
the probe that reads a server's fingerprint. Its connections are stamping sockets
(:mod:`mcp_bench.protocols.rx_stamps_socket`, aiohttp 3.12+ on Linux): a token's time is the
kernel's receive stamp of the read that brought it, however late the task reads it; elsewhere it
is the time aiohttp hands the bytes over, a loop turn or so after they came off the socket.
Failures are records, never exceptions: see :mod:`~mcp_bench.protocols.openai_stream`; here also
refused/unreachable -> CONNECT and the request timeout -> TIMEOUT.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from time import perf_counter_ns
from typing import Any

import aiohttp

from mcp_bench.protocols.http_aiohttp import AiohttpSession, classify_error
from mcp_bench.protocols.http_common import Failure, fail_record, parse_server_header
from mcp_bench.protocols.openai_settings import OpenAISettings
from mcp_bench.protocols.openai_stream import OpenAIBody, status_failure
from mcp_bench.protocols.rx_stamps_socket import StampingSocket
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord


def _classify(exc: BaseException) -> ErrorKind:
    # A chunked body cut off by the peer is the server closing mid-stream, not a clean truncation.
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ErrorKind.DISCONNECTED
    return classify_error(exc)


class OpenAIClient(OpenAISettings, AiohttpSession):
    """A :class:`~mcp_bench.records.ProtocolClient` for ``/v1/completions`` or ``/v1/chat/completions``
    on aiohttp."""

    kernel_stamps = True  # token times are the point here: stamp reads in the kernel

    async def send(self, payload: RequestPayload) -> RequestRecord:
        data, stream = self.request.encode(payload)
        session = self.session
        body = OpenAIBody(stream, payload.capture)
        rec = RequestRecord(sent_ns=0, end_ns=0, input_tokens=payload.input_tokens)
        rec.sent_ns = perf_counter_ns()
        try:
            async with session.post(self.url, data=data, trace_request_ctx={"rec": rec}) as resp:
                rec.status = resp.status
                sock = self.stamping_socket(resp)
                if sock is None:
                    failure = await self._read(resp, rec, body)
                else:
                    sock.attach(resp.content)
                    try:
                        failure = await self._read(resp, rec, body, sock)
                    finally:
                        sock.attach(None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            rec.end_ns = perf_counter_ns()
            failure = _classify(exc), f"{type(exc).__name__}: {exc}"
        return fail_record(rec, failure)

    @staticmethod
    async def _read(
        resp: aiohttp.ClientResponse, rec: RequestRecord, body: OpenAIBody, sock: StampingSocket | None = None
    ) -> Failure | None:
        """Read the answer into ``rec``; with ``sock``, bytes carry the kernel stamps of the reads
        that brought them, else the time the task got them."""
        content = resp.content
        if not 200 <= resp.status < 300:
            raw = await content.read(2048)
            rec.end_ns = perf_counter_ns()
            return status_failure(resp.status, raw)
        while True:
            raw = await content.readany()
            now = perf_counter_ns()
            rec.end_ns = now
            if not raw:
                return body.end(rec)
            for piece, arrival in [(raw, now)] if sock is None else sock.split(raw):
                rec.end_ns = arrival
                failure = body.feed(rec, piece, arrival)
                if failure is not None:
                    return failure
            if body.complete:
                # Read to the end of the body so the connection goes back to the pool; the answer
                # is complete, so a connection lost now costs only the connection (as on the lean client).
                with contextlib.suppress(aiohttp.ClientError):
                    while await content.readany():
                        pass
                return body.end(rec)

    def _warm_request(self) -> tuple[str, str, bytes | None]:
        return "GET", self.root + "/v1/models", None  # cheap on every OpenAI server

    async def _get_json(self, path: str) -> tuple[Any, str]:
        """GET a JSON document; (None, "") when it is absent or not JSON."""
        try:
            async with self.session.get(self.root + path) as resp:
                server = resp.headers.get("Server", "")
                if resp.status != 200:
                    return None, server
                return json.loads(await resp.read()), server
        except asyncio.CancelledError:
            raise
        except Exception:
            return None, ""

    async def fingerprint(self) -> dict[str, str]:
        """Name and version as the server reports them: ``/version`` (vLLM, refserver), then the
        ``owned_by`` of ``/v1/models``, then the ``Server`` header; empty strings when unknown."""
        name = version = ""
        doc, header = await self._get_json("/version")
        if isinstance(doc, dict):
            version = str(doc.get("version") or "")
            name = str(doc.get("name") or "")
        models, header2 = await self._get_json("/v1/models")
        header = header or header2
        if not name and isinstance(models, dict) and isinstance(models.get("data"), list) and models["data"]:
            first = models["data"][0]
            if isinstance(first, dict):
                name = str(first.get("owned_by") or "")
        if header and (not name or not version):
            h_name, h_version = parse_server_header(header)
            if not name:
                name, version = h_name, version or h_version
        return {"server_name": name, "server_version": version, "server_header": header}
