"""The OpenAI streaming client on the lean keep-alive pool of :mod:`mcp_bench.protocols.http_fast`.

Why: on aiohttp the request leaves about 0.4 ms after ``sent_ns`` (aiohttp builds it first) and
a token is stamped when the reading task resumes, a loop turn after its bytes were read; both
add to TTFT and e2e. Here the request bytes are built once per payload (before ``sent_ns``) and
written at once, every token gets the arrival of the read that carried it, before any decoding,
and that arrival is the kernel's receive stamp (:mod:`mcp_bench.protocols.rx_stamps`), so the
client's own wake-up and loop delays stay out of the figures. The open-loop driver needs no
task per request (completion is a callback). The wire format and the record's meaning are those of
:mod:`mcp_bench.protocols.openai_stream`, shared with the aiohttp client.
"""

from __future__ import annotations

from mcp_bench.protocols.http_common import BodyReader, HttpSettings
from mcp_bench.protocols.http_fast import FastHttpClient
from mcp_bench.protocols.openai_aiohttp import OpenAIClient
from mcp_bench.protocols.openai_settings import OpenAISettings
from mcp_bench.protocols.openai_stream import OpenAIBody
from mcp_bench.records import RequestPayload, RequestRecord


class FastOpenAIClient(OpenAISettings, FastHttpClient):
    """A :class:`~mcp_bench.records.ProtocolClient` (with the callback fast path) for
    ``/v1/completions`` or ``/v1/chat/completions``."""

    kernel_stamps = True  # token times are the point here: stamp arrivals in the kernel
    _last: tuple[RequestPayload, bytes, bool] | None = None

    def _setup(self, url: str, headers: dict[str, str], timeout_s: float, max_connections: int) -> None:
        HttpSettings.__init__(
            self, url, method="POST", headers=headers, timeout_s=timeout_s, max_connections=max_connections
        )

    def _prepare(self, payload: RequestPayload, rec: RequestRecord) -> tuple[bytes, BodyReader]:
        # Payloads are not changed once made, and a run's fixed payload is one shared object:
        # its request bytes are built once.
        last = self._last
        if last is not None and last[0] is payload:
            data, stream = last[1], last[2]
        else:
            body, stream = self.request.encode(payload)
            data = self._build(body)
            self._last = (payload, data, stream)
        rec.input_tokens = payload.input_tokens
        return data, OpenAIBody(stream, payload.capture)

    async def fingerprint(self) -> dict[str, str]:
        probe = OpenAIClient(self.root, self.model, timeout_s=min(self.timeout_s, 5.0), max_connections=1)
        await probe.open()
        try:
            return await probe.fingerprint()
        finally:
            await probe.close()
