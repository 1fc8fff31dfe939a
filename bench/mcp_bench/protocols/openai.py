"""OpenAI-compatible completions and chat completions, streamed over SSE (vLLM, TensorRT-LLM, SGLang, TGI).

What one record holds, per request:

* ``sent_ns``: just before the request is written;
* ``first_token_ns``: arrival of the first chunk whose text (completions ``choices[0].text``,
  chat ``choices[0].delta.content``) is NON-EMPTY; role-only and empty deltas do not count;
* ``token_times_ns``: the arrival of every non-empty content chunk. Arrival is the instant the
  bytes came off the socket (events read together share it). A chunk may carry several tokens
  (servers batch under load, or by design); the client cannot see inside a chunk, so it keeps
  one time per chunk and ITL is the gap between content chunks;
* ``output_tokens``: ``usage.completion_tokens`` when the server sends it (we ask with
  ``stream_options.include_usage``), and then ``tokens_from_server=True``; otherwise the
  number of non-empty content chunks (one chunk counted as one token), ``tokens_from_server=False``;
* ``end_ns``: arrival of ``data: [DONE]`` (or of the whole body when not streaming).

Failures are records, never exceptions: non-2xx -> HTTP_STATUS, a data event that is not a
JSON object -> MALFORMED, a body that ends cleanly without ``[DONE]`` -> TRUNCATED, the
connection dropped mid-body -> DISCONNECTED, refused/unreachable -> CONNECT, the request
timeout -> TIMEOUT, an ``error`` object inside the stream -> OTHER.
"""

from __future__ import annotations

import asyncio
import json
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import aiohttp

from mcp_bench.protocols import register_protocol
from mcp_bench.protocols.http import classify_error, parse_server_header
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord

if TYPE_CHECKING:
    from mcp_bench.plan import RunPlan

_DETAIL_MAX = 300


class SseParser:
    """Incremental Server-Sent Events parser: bytes in, complete ``data`` payloads out.

    Only ``data:`` fields matter here (multi-line data is joined with ``\\n`` as the spec says);
    ``event:``, ``id:``, ``retry:`` and comment lines are ignored.
    """

    __slots__ = ("_data", "_partial")

    def __init__(self) -> None:
        self._partial = b""
        self._data: list[bytes] = []

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        events: list[bytes] = []
        for line in lines:
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line:
                if self._data:
                    events.append(b"\n".join(self._data))
                    self._data = []
            elif line.startswith(b"data:"):
                value = line[5:]
                self._data.append(value[1:] if value.startswith(b" ") else value)
        return events

    def finish(self) -> list[bytes]:
        """At end of body: an event missing only its blank line still counts."""
        events = self.feed(b"\n\n") if (self._partial or self._data) else []
        return events


def endpoint_url(base: str, chat: bool) -> str:
    """``http://h:p`` or ``http://h:p/v1`` -> the endpoint; a full endpoint URL is kept as given."""
    base = base.rstrip("/")
    if base.endswith(("/completions", "/chat/completions")):
        return base
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return base + ("/v1/chat/completions" if chat else "/v1/completions")


def server_root(base: str) -> str:
    """The server's root URL (for /version and /v1/models), whatever form the plan's URL has."""
    base = base.rstrip("/")
    for suffix in ("/chat/completions", "/completions", "/v1"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base


def _text_of(obj: dict[str, Any]) -> str:
    choices = obj.get("choices")
    if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
        return ""
    c = choices[0]
    text = c.get("text")
    if text is None:
        delta = c.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else None
    if text is None:
        message = c.get("message")
        text = message.get("content") if isinstance(message, dict) else None
    return text if isinstance(text, str) else ""


def _classify(exc: BaseException) -> ErrorKind:
    # A chunked body cut off by the peer is the server closing mid-stream, not a clean truncation.
    if isinstance(exc, aiohttp.ClientPayloadError):
        return ErrorKind.DISCONNECTED
    return classify_error(exc)


class OpenAIClient:
    """A :class:`~mcp_bench.records.ProtocolClient` for ``/v1/completions`` or ``/v1/chat/completions``."""

    def __init__(
        self,
        url: str,
        model: str,
        *,
        chat: bool = False,
        stream: bool = True,
        timeout_s: float = 30.0,
        max_connections: int = 100,
        options: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        self.url = endpoint_url(url, chat)
        self.root = server_root(url)
        self.model = model
        self.chat = chat
        self.stream = stream
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.options = dict(options or {})  # extra JSON fields for every request body
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_plan(cls, plan: RunPlan, max_connections: int) -> OpenAIClient:
        p = plan.payload
        return cls(
            plan.url,
            plan.model,
            chat=plan.backend == "openai-chat",
            stream=p.stream,
            timeout_s=plan.request_timeout_s,
            max_connections=max_connections,
            options=dict(p.options),
            headers=dict(p.headers),
        )

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
            raise RuntimeError("OpenAIClient.open() was not called")
        return self._session

    def body(self, payload: RequestPayload) -> tuple[bytes, bool]:
        """The JSON request body and whether it asks for a stream."""
        extra = {**self.options, **payload.extra}
        stream = bool(extra.pop("stream", self.stream))
        body: dict[str, Any] = {"model": self.model}
        if self.chat:
            body["messages"] = [{"role": "user", "content": payload.prompt}]
        else:
            body["prompt"] = payload.prompt
        if payload.max_output_tokens:
            body["max_tokens"] = payload.max_output_tokens
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}
        body.update(extra)
        return json.dumps(body, separators=(",", ":")).encode(), stream

    async def send(self, payload: RequestPayload) -> RequestRecord:
        data, stream = self.body(payload)
        session = self.session
        rec = RequestRecord(sent_ns=0, end_ns=0, input_tokens=payload.input_tokens)
        rec.sent_ns = perf_counter_ns()
        try:
            async with session.post(self.url, data=data) as resp:
                rec.status = resp.status
                if not 200 <= resp.status < 300:
                    text = (await resp.content.read(2048)).decode("utf-8", "replace")
                    return self._fail(rec, ErrorKind.HTTP_STATUS, f"HTTP {resp.status}: {text}")
                if stream:
                    await self._read_stream(resp, rec)
                else:
                    await self._read_whole(resp, rec)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return self._fail(rec, _classify(exc), f"{type(exc).__name__}: {exc}")
        return rec

    @staticmethod
    def _fail(rec: RequestRecord, kind: ErrorKind, detail: str) -> RequestRecord:
        rec.end_ns = perf_counter_ns()
        rec.error = kind
        rec.error_detail = detail[:_DETAIL_MAX]
        return rec

    async def _read_stream(self, resp: aiohttp.ClientResponse, rec: RequestRecord) -> None:
        parser = SseParser()
        content = resp.content
        chunks = 0
        done = False
        while not done:
            raw = await content.readany()
            now = perf_counter_ns()
            events = parser.feed(raw) if raw else parser.finish()
            for ev in events:
                if ev == b"[DONE]":
                    done = True
                    break
                try:
                    obj = json.loads(ev)
                except ValueError:
                    self._fail(rec, ErrorKind.MALFORMED, f"data is not JSON: {ev[:120]!r}")
                    return
                if not isinstance(obj, dict):
                    self._fail(rec, ErrorKind.MALFORMED, f"data is not a JSON object: {ev[:120]!r}")
                    return
                if obj.get("error"):
                    self._fail(rec, ErrorKind.OTHER, f"error in stream: {json.dumps(obj['error'])}")
                    return
                if _text_of(obj):
                    if rec.first_token_ns is None:
                        rec.first_token_ns = now
                    rec.token_times_ns.append(now)
                    chunks += 1
                usage = obj.get("usage")
                if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                    rec.output_tokens = usage["completion_tokens"]
                    rec.tokens_from_server = True
                    if isinstance(usage.get("prompt_tokens"), int):
                        rec.input_tokens = usage["prompt_tokens"]
            if done:
                rec.end_ns = now
                break
            if not raw:
                self._fail(
                    rec, ErrorKind.TRUNCATED, f"stream ended without [DONE] after {chunks} content chunks"
                )
                return
        if not rec.tokens_from_server:
            rec.output_tokens = chunks
        # Read to the end of the body so the connection goes back to the pool.
        while await content.readany():
            pass

    async def _read_whole(self, resp: aiohttp.ClientResponse, rec: RequestRecord) -> None:
        raw = await resp.read()
        rec.end_ns = perf_counter_ns()
        try:
            obj = json.loads(raw)
        except ValueError:
            self._fail(rec, ErrorKind.MALFORMED, f"body is not JSON: {raw[:120]!r}")
            return
        if not isinstance(obj, dict):
            self._fail(rec, ErrorKind.MALFORMED, "body is not a JSON object")
            return
        usage = obj.get("usage")
        if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
            rec.output_tokens = usage["completion_tokens"]
            rec.tokens_from_server = True
            if isinstance(usage.get("prompt_tokens"), int):
                rec.input_tokens = usage["prompt_tokens"]
        else:
            rec.output_tokens = len(_text_of(obj).split())  # whitespace words, as the workload counts

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


register_protocol("openai", OpenAIClient.from_plan)
register_protocol("openai-chat", OpenAIClient.from_plan)
