"""What every HTTP client here shares, whatever carries its bytes (aiohttp or the lean pool).

Why a module of its own: the clients on aiohttp and those on the lean keep-alive pool are built
from the same settings, judge an answer through the same :class:`BodyReader` contract, write a
failure into a record the same way and read a server's name from its ``Server`` header alike;
kept here, neither client module has to import the other, and nothing here needs aiohttp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Self

from mcp_bench.records import ErrorKind, RequestRecord

if TYPE_CHECKING:
    from mcp_bench.plan import RunPlan

# Why a request failed, as (kind, detail); what a body reader returns instead of raising.
Failure = tuple[ErrorKind, str]
_DETAIL_MAX = 300
# An idle keep-alive connection older than this is closed, not reused: servers close idle
# connections on timers of their own (uvicorn, and so vLLM and SGLang, after 5 s; Node after 5 s),
# and a request written as the server's FIN is on its way fails before any byte of an answer.
KEEPALIVE_EXPIRY_S = 4.0


def fail_record(rec: RequestRecord, failure: Failure | None) -> RequestRecord:
    """Mark ``rec`` failed (detail cut to a bounded length); ``None`` leaves it as it is."""
    if failure is not None:
        rec.error = failure[0]
        rec.error_detail = failure[1][:_DETAIL_MAX]
    return rec


def parse_server_header(value: str) -> tuple[str, str]:
    """``"Python/3.11 aiohttp/3.9.5"`` -> ("Python", "3.11"): the first product token."""
    token = value.strip().split(" ", 1)[0] if value.strip() else ""
    name, _, version = token.partition("/")
    return name, version


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
