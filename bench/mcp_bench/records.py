"""Per-request measurements: the contract between load generation and protocol clients.

A protocol client sends one request and fills a :class:`RequestRecord`; the load generator
stamps the scheduled send time (open loop) and hands records to the result aggregator.
All instants are ``time.perf_counter_ns()`` values of the same process, so they subtract
exactly; wall-clock ISO 8601 stamps are taken once per run, not per request.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol, runtime_checkable


class ErrorKind(StrEnum):
    """Why a request failed; counted by kind in every result, never dropped."""

    CONNECT = "connect"  # refused, unreachable, DNS
    TIMEOUT = "timeout"
    HTTP_STATUS = "http_status"  # non-2xx answer
    MALFORMED = "malformed"  # body or stream that does not parse
    TRUNCATED = "truncated"  # stream closed before its end marker
    DISCONNECTED = "disconnected"  # server closed the connection mid-request
    DROPPED = "dropped"  # open loop: arrival never sent (cap reached, run ended)
    NOT_ALLOWED = "not_allowed"  # the connection's address is one the target policy refuses
    OTHER = "other"


@dataclass(slots=True)
class RequestPayload:
    """What to send: one prompt (LLM), one tensor set (V2), or one plain HTTP body."""

    prompt: str = ""
    input_tokens: int = 0
    max_output_tokens: int = 0
    body: bytes | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # what the result is broken down by (e.g. {"class": "low", "shape": "512"}); None for most runs
    tags: dict[str, str] | None = None
    # OpenAI chat content parts sent after the prompt's text (images); None: text only
    parts: list[dict[str, Any]] | None = None
    # V2 inputs sent instead of the client's own of the same name (mcp_bench.multimodal.Tensor)
    tensors: list[Any] | None = None
    # keep the answer's content in the record (``RequestRecord.output``): the consistency probes
    # compare it; load requests never set it, so they keep no text or tensors
    capture: bool = False


@dataclass(slots=True)
class RequestRecord:
    """One request as measured by the client."""

    sent_ns: int
    end_ns: int
    scheduled_ns: int | None = None  # open loop only; None for closed loop
    first_token_ns: int | None = None  # first non-empty token (streaming) else None
    token_times_ns: list[int] = field(default_factory=list)  # arrival of each streamed token
    input_tokens: int = 0
    output_tokens: int = 0
    tokens_from_server: bool = False  # True when the server's usage field gave the counts
    status: int | None = None
    error: ErrorKind | None = None
    error_detail: str = ""
    tags: dict[str, str] | None = None  # the payload's tags, copied by the load loop
    new_connection: bool = False  # it waited for a connection opened for it (connect time inside)
    # the answer's content when the payload asked for it (``capture``): OpenAI ``text``, ``tokens``
    # and ``logprobs`` (when the server returned them); V2 ``tensors`` (name -> flat values, shape)
    output: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def e2e_ns(self) -> int:
        return self.end_ns - self.sent_ns

    @property
    def ttft_ns(self) -> int | None:
        return None if self.first_token_ns is None else self.first_token_ns - self.sent_ns

    @property
    def schedule_lag_ns(self) -> int | None:
        return None if self.scheduled_ns is None else self.sent_ns - self.scheduled_ns

    @property
    def e2e_from_schedule_ns(self) -> int | None:
        """Latency measured from the intended send time (corrects coordinated omission)."""
        return None if self.scheduled_ns is None else self.end_ns - self.scheduled_ns

    @property
    def tpot_ns(self) -> float | None:
        """(e2e - TTFT) / (output tokens - 1), as DESIGN.md defines it."""
        ttft = self.ttft_ns
        if ttft is None or self.output_tokens < 2:
            return None
        return (self.e2e_ns - ttft) / (self.output_tokens - 1)

    @property
    def inter_token_gaps_ns(self) -> list[int]:
        times = self.token_times_ns
        return [b - a for a, b in itertools.pairwise(times)]


class ProtocolClient(Protocol):
    """A client for one wire protocol; one instance is shared by all workers of a run."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def send(self, payload: RequestPayload) -> RequestRecord:
        """Send one request and measure it; failures come back as records with ``error`` set."""
        ...

    async def fingerprint(self) -> dict[str, str]:
        """Server name and version as the server reports them (empty strings when unknown)."""
        ...


ConnectionMode = Literal["warm", "cold", "per-request"]


@dataclass(slots=True)
class ConnectTime:
    """One connection the client opened: TCP connect, and the TLS handshake (None over plain TCP,
    or where the client cannot tell the two apart and counts both as connect)."""

    connect_ns: int
    tls_ns: int | None = None


@runtime_checkable
class ConnectionControl(Protocol):
    """What a client that owns its connection pool offers, so that connection set-up is kept out
    of the measured window (warm), put in on purpose (cold, per request), and timed on its own."""

    async def prepare_connections(self, mode: ConnectionMode, count: int) -> None:
        """Before a level: ``warm`` opens up to ``count`` idle connections now; ``cold`` and
        ``per-request`` close the idle ones (and ``per-request`` closes each after its answer)."""
        ...

    def take_connect_times(self) -> list[ConnectTime]:
        """The connections opened since the last call (then forgotten)."""
        ...
