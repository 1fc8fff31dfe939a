"""The OpenAI completions wire format, shared by both OpenAI clients (aiohttp and the lean one).

:class:`OpenAIBody` reads one answer as its bytes arrive and fills the record, so the two
clients differ only in how bytes reach it. What one record holds, per request:

* ``first_token_ns``: arrival of the first chunk whose text (completions ``choices[0].text``,
  chat ``choices[0].delta.content``) is NON-EMPTY; role-only and empty deltas do not count;
* ``token_times_ns``: the arrival of every non-empty content chunk. Arrival is the instant the
  bytes came off the socket, stamped before any decoding (events read together share it). A
  chunk may carry several tokens (servers batch under load, or by design); the client cannot see
  inside a chunk, so it keeps one time per chunk and ITL is the gap between content chunks;
* ``output_tokens``: ``usage.completion_tokens`` when the server sends it (the request asks with
  ``stream_options.include_usage``), and then ``tokens_from_server=True``; otherwise the
  number of non-empty content chunks (one chunk counted as one token), ``tokens_from_server=False``;
* ``end_ns``: arrival of ``data: [DONE]`` (or of the whole body when not streaming).

Failures: non-2xx -> HTTP_STATUS (with the start of the body), a data event that is not a JSON
object -> MALFORMED, a body that ends cleanly without ``[DONE]`` -> TRUNCATED, the connection
dropped inside the body -> DISCONNECTED, an ``error`` object inside the stream -> OTHER.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mcp_bench.protocols.http_common import Failure
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord

_ERROR_BODY_MAX = 2048  # bytes of a non-2xx body kept for the error detail


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
        return self.feed(b"\n\n") if (self._partial or self._data) else []


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


def text_of(obj: dict[str, Any]) -> str:
    """The content of a completions chunk, chat delta or chat message ("" when there is none)."""
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


def take_usage(rec: RequestRecord, obj: dict[str, Any]) -> bool:
    """Copy the server's token counts into ``rec``; False when ``obj`` carries none."""
    usage = obj.get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("completion_tokens"), int):
        return False
    rec.output_tokens = usage["completion_tokens"]
    rec.tokens_from_server = True
    if isinstance(usage.get("prompt_tokens"), int):
        rec.input_tokens = usage["prompt_tokens"]
    return True


@dataclass(frozen=True)
class OpenAIRequest:
    """How a payload becomes a request body: model, endpoint kind, stream flag and extra fields."""

    model: str
    chat: bool = False
    stream: bool = True
    options: dict[str, Any] = field(default_factory=dict)  # extra JSON fields for every request
    fixed_output: bool = False  # every answer exactly max_tokens long (the plan's fixed_output_tokens)

    def encode(self, payload: RequestPayload) -> tuple[bytes, bool]:
        """The JSON request body and whether it asks for a stream.

        With ``fixed_output`` the body also carries ``ignore_eos: true`` and ``min_tokens`` equal to
        ``max_tokens``: a model that samples its end-of-sequence token early would otherwise answer
        fewer tokens than asked (vLLM's OpenAI server takes both fields, on completions and chat).
        Fields in the plan's options or the payload's extra are sent as given, over these.
        """
        extra = {**self.options, **payload.extra}
        stream = bool(extra.pop("stream", self.stream))
        body: dict[str, Any] = {"model": self.model}
        if self.chat and payload.parts:
            text: list[dict[str, Any]] = [{"type": "text", "text": payload.prompt}] if payload.prompt else []
            body["messages"] = [{"role": "user", "content": text + payload.parts}]
        elif self.chat:
            body["messages"] = [{"role": "user", "content": payload.prompt}]
        else:
            body["prompt"] = payload.prompt
        if payload.max_output_tokens:
            body["max_tokens"] = payload.max_output_tokens
            if self.fixed_output:
                body["ignore_eos"] = True
                body["min_tokens"] = payload.max_output_tokens
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True}
        body.update(extra)
        return json.dumps(body, separators=(",", ":")).encode(), stream


def status_failure(status: int, body: bytes) -> Failure:
    return ErrorKind.HTTP_STATUS, f"HTTP {status}: {body[:_ERROR_BODY_MAX].decode('utf-8', 'replace')}"


class OpenAIBody:
    """Reads one completions answer (an SSE stream, or one JSON body) into its record.

    A :class:`~mcp_bench.protocols.http_common.BodyReader`; ``now_ns`` is the instant the bytes
    arrived, so token times do not include the JSON decoding of earlier events.
    """

    __slots__ = ("chunks", "content", "done_ns", "parser", "raw", "stream")
    wants_body = True

    def __init__(self, stream: bool, capture: bool = False) -> None:
        self.stream = stream
        self.parser = SseParser()
        self.chunks = 0  # non-empty content chunks
        self.done_ns: int | None = None  # arrival of data: [DONE]
        self.raw = bytearray()  # the body, when it is not a stream read event by event
        # the answer's text and logprobs, kept only when the payload asks (consistency probes)
        self.content: AnswerContent | None = AnswerContent() if capture else None

    @property
    def complete(self) -> bool:
        """The stream's end marker arrived; what may follow only closes the body."""
        return self.done_ns is not None

    def feed(self, rec: RequestRecord, data: bytes, now_ns: int) -> Failure | None:
        status = rec.status or 0
        if not 200 <= status < 300:
            if len(self.raw) < _ERROR_BODY_MAX:
                self.raw += data
            return None
        if not self.stream:
            self.raw += data
            return None
        if self.done_ns is not None:
            return None
        for ev in self.parser.feed(data):
            failure = self._event(rec, ev, now_ns)
            if failure is not None or self.done_ns is not None:
                return failure
        return None

    def _event(self, rec: RequestRecord, ev: bytes, now_ns: int) -> Failure | None:
        if ev == b"[DONE]":
            self.done_ns = now_ns
            return None
        try:
            obj = json.loads(ev)
        except ValueError:
            return ErrorKind.MALFORMED, f"data is not JSON: {ev[:120]!r}"
        if not isinstance(obj, dict):
            return ErrorKind.MALFORMED, f"data is not a JSON object: {ev[:120]!r}"
        if obj.get("error"):
            return ErrorKind.OTHER, f"error in stream: {json.dumps(obj['error'])}"
        if text_of(obj):
            if rec.first_token_ns is None:
                rec.first_token_ns = now_ns
            rec.token_times_ns.append(now_ns)
            self.chunks += 1
        if self.content is not None:
            self.content.add(obj)
        take_usage(rec, obj)
        return None

    def end(self, rec: RequestRecord) -> Failure | None:
        status = rec.status or 0
        if not 200 <= status < 300:
            return status_failure(status, bytes(self.raw))
        if not self.stream:
            return self._whole(rec)
        if self.done_ns is None:
            for ev in self.parser.finish():  # an event missing only its blank line still counts
                failure = self._event(rec, ev, rec.end_ns)
                if failure is not None:
                    return failure
                if self.done_ns is not None:
                    break
            if self.done_ns is None:
                return ErrorKind.TRUNCATED, f"stream ended without [DONE] after {self.chunks} content chunks"
        rec.end_ns = self.done_ns
        if not rec.tokens_from_server:
            rec.output_tokens = self.chunks
        if self.content is not None:
            rec.output = self.content.output()
        return None

    def lost(self, rec: RequestRecord) -> Failure | None:
        if self.done_ns is not None and 200 <= (rec.status or 0) < 300:
            return None  # the answer was complete; only the end of the framing is missing
        return ErrorKind.DISCONNECTED, "connection closed inside the response body"

    def _whole(self, rec: RequestRecord) -> Failure | None:
        raw = bytes(self.raw)
        try:
            obj = json.loads(raw)
        except ValueError:
            return ErrorKind.MALFORMED, f"body is not JSON: {raw[:120]!r}"
        if not isinstance(obj, dict):
            return ErrorKind.MALFORMED, "body is not a JSON object"
        if not take_usage(rec, obj):
            rec.output_tokens = len(text_of(obj).split())  # whitespace words, as the workload counts
        if self.content is not None:
            self.content.add(obj)
            rec.output = self.content.output()
        return None


class AnswerContent:
    """What an answer said, gathered chunk by chunk: its text, and the tokens and their logprobs
    where the server returned them (completions ``logprobs.tokens``/``token_logprobs``, chat
    ``logprobs.content[].token``/``logprob``)."""

    __slots__ = ("logprobs", "text", "tokens")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.tokens: list[str] = []
        self.logprobs: list[float] = []

    def add(self, obj: dict[str, Any]) -> None:
        self.text.append(text_of(obj))
        choices = obj.get("choices")
        if not choices or not isinstance(choices, list) or not isinstance(choices[0], dict):
            return
        lp = choices[0].get("logprobs")
        if not isinstance(lp, dict):
            return
        if isinstance(lp.get("content"), list):  # chat
            pairs = [(c.get("token"), c.get("logprob")) for c in lp["content"] if isinstance(c, dict)]
        else:  # completions
            pairs = list(zip(lp.get("tokens") or [], lp.get("token_logprobs") or [], strict=False))
        for token, logprob in pairs:
            if isinstance(token, str) and isinstance(logprob, int | float):
                self.tokens.append(token)
                self.logprobs.append(float(logprob))

    def output(self) -> dict[str, Any]:
        out: dict[str, Any] = {"text": "".join(self.text)}
        if self.tokens:
            out["tokens"] = self.tokens
            out["logprobs"] = self.logprobs
        return out
