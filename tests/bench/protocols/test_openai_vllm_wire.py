"""The OpenAI clients on what vLLM really sends, and what they send it.

``vllm_streams/`` holds two streams recorded verbatim from vLLM 0.32.0 (the CPU build serving the
harness's tiny byte-level model, as e2e/test_vllm.py runs it). In both, chunks with EMPTY text
come first: vLLM's detokenizer holds back a token that ends inside a UTF-8 character and sends an
empty chunk in its place (chat also opens with a role-only delta). TTFT is the first NON-EMPTY
token (docs/design.md), so these chunks start nothing and are no tokens; the output count is the
server's ``usage``, not the number of content chunks.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mcp_bench.plan import RunPlan
from mcp_bench.protocols import protocol_factory
from mcp_bench.protocols.openai_aiohttp import OpenAIClient
from mcp_bench.protocols.openai_fast import FastOpenAIClient
from mcp_bench.protocols.openai_settings import OpenAISettings
from mcp_bench.protocols.openai_stream import OpenAIBody, OpenAIRequest, SseParser, text_of
from mcp_bench.records import RequestPayload, RequestRecord
from mcp_bench.workload import SyntheticWorkload, UniformDist, payloads

STREAMS = Path(__file__).parent / "vllm_streams"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
PAUSE_S = 0.03  # between the recorded events when served, far above scheduling noise


def recorded(kind: str) -> list[bytes]:
    """The data payloads of one recorded stream, in order (``[DONE]`` last)."""
    return SseParser().feed((STREAMS / f"{kind}.sse").read_bytes())


# (kind, index of the first non-empty event, content chunks, usage completion_tokens)
CASES = [("completions", 1, 4, 6), ("chat", 2, 4, 5)]


@pytest.mark.parametrize(("kind", "first", "chunks", "tokens"), CASES)
def test_recorded_streams_start_with_empty_chunks(kind: str, first: int, chunks: int, tokens: int) -> None:
    events = recorded(kind)
    texts = [text_of(json.loads(ev)) for ev in events[:-1]]
    assert all(t == "" for t in texts[:first]) and texts[first] != ""
    assert sum(1 for t in texts if t) == chunks
    assert json.loads(events[-2])["usage"]["completion_tokens"] == tokens
    assert events[-1] == b"[DONE]"


@pytest.mark.parametrize(("kind", "first", "chunks", "tokens"), CASES)
def test_first_token_is_the_first_non_empty_chunk(kind: str, first: int, chunks: int, tokens: int) -> None:
    events = recorded(kind)
    rec = RequestRecord(sent_ns=0, end_ns=0, status=200)
    body = OpenAIBody(stream=True)
    arrivals = [1_000 * (i + 1) for i in range(len(events))]
    for ev, at in zip(events, arrivals, strict=True):
        assert body.feed(rec, b"data: " + ev + b"\n\n", at) is None
    rec.end_ns = arrivals[-1] + 5
    assert body.end(rec) is None and rec.ok
    content = [at for ev, at in zip(events[:-1], arrivals, strict=False) if text_of(json.loads(ev))]
    assert rec.first_token_ns == arrivals[first] == content[0]
    assert rec.token_times_ns == content and len(content) == chunks
    assert len(rec.inter_token_gaps_ns) == chunks - 1  # gaps between content chunks only
    assert rec.output_tokens == tokens and rec.tokens_from_server  # usage, not the chunk count
    assert rec.end_ns == arrivals[-1]  # data: [DONE]
    assert rec.tpot_ns == (rec.end_ns - arrivals[first]) / (tokens - 1)


class RecordedServer:
    """Serves one recorded stream per request, each event in its own chunked write after a pause."""

    def __init__(self, events: list[bytes]) -> None:
        self.events = events
        self.bodies: list[dict[str, object]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length:", 1)[1].split(b"\r\n", 1)[0])
                self.bodies.append(json.loads(await reader.readexactly(length)))
                writer.write(HEAD)
                for ev in self.events:
                    await asyncio.sleep(PAUSE_S)
                    data = b"data: " + ev + b"\n\n"
                    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    await writer.drain()
                writer.write(b"0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture(params=CASES, ids=[c[0] for c in CASES])
async def served(
    request: pytest.FixtureRequest,
) -> AsyncIterator[tuple[str, int, int, int, str, RecordedServer]]:
    kind, first, chunks, tokens = request.param
    srv = RecordedServer(recorded(kind))
    server = await asyncio.start_server(srv.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield kind, first, chunks, tokens, f"http://127.0.0.1:{port}", srv
    finally:
        server.close()


@pytest.mark.parametrize("cls", [FastOpenAIClient, OpenAIClient], ids=["fast", "aiohttp"])
async def test_both_clients_time_the_first_non_empty_token(
    served: tuple[str, int, int, int, str, RecordedServer], cls: type[FastOpenAIClient] | type[OpenAIClient]
) -> None:
    kind, first, chunks, tokens, url, srv = served
    client = cls(url, "mcp-tiny-llama", chat=kind == "chat", timeout_s=10.0, fixed_output=True)
    await client.open()
    try:
        rec = await client.send(RequestPayload(prompt="the of and", input_tokens=3, max_output_tokens=tokens))
    finally:
        await client.close()
    assert rec.ok, rec.error_detail
    # the first content arrives after first + 1 pauses; the empty chunks before it start nothing
    ttft_s = (rec.ttft_ns or 0) / 1e9
    assert ttft_s >= (first + 1) * PAUSE_S * 0.9, (kind, ttft_s)
    assert len(rec.token_times_ns) == chunks and rec.output_tokens == tokens and rec.tokens_from_server
    assert rec.input_tokens == json.loads(srv.events[-2])["usage"]["prompt_tokens"]  # the server's count
    (body,) = srv.bodies
    assert body["max_tokens"] == body["min_tokens"] == tokens and body["ignore_eos"] is True


# --- fixed output lengths ----------------------------------------------------------------------


@pytest.mark.parametrize("chat", [False, True])
def test_fixed_output_sends_ignore_eos_and_min_tokens(chat: bool) -> None:
    request = OpenAIRequest("m", chat=chat, fixed_output=True)
    body = json.loads(request.encode(RequestPayload(prompt="a b", max_output_tokens=32))[0])
    assert body["max_tokens"] == 32 and body["min_tokens"] == 32 and body["ignore_eos"] is True
    assert ("messages" in body) == chat and ("prompt" in body) != chat


def test_without_fixed_output_the_server_may_stop_early() -> None:
    body = json.loads(OpenAIRequest("m").encode(RequestPayload(prompt="a", max_output_tokens=32))[0])
    assert body["max_tokens"] == 32 and "min_tokens" not in body and "ignore_eos" not in body


def test_fixed_output_without_max_tokens_asks_nothing_more() -> None:
    body = json.loads(OpenAIRequest("m", fixed_output=True).encode(RequestPayload(prompt="a"))[0])
    assert "max_tokens" not in body and "min_tokens" not in body and "ignore_eos" not in body


def test_options_given_in_the_plan_win() -> None:
    request = OpenAIRequest("m", options={"ignore_eos": False, "min_tokens": 4}, fixed_output=True)
    body = json.loads(request.encode(RequestPayload(prompt="a", max_output_tokens=32))[0])
    assert body["ignore_eos"] is False and body["min_tokens"] == 4 and body["max_tokens"] == 32


def _plan(fixed: bool | None, http_client: str = "fast") -> RunPlan:
    payload: dict[str, object] = {"max_output_tokens": 8}
    if fixed is not None:
        payload["fixed_output_tokens"] = fixed
    return RunPlan.from_dict(
        {
            "url": "http://127.0.0.1:8000",
            "backend": "openai-chat",
            "model": "m",
            "http_client": http_client,
            "levels": {"concurrency": [1]},
            "stage": {"requests": 1},
            "payload": payload,
        }
    )


@pytest.mark.parametrize("http_client", ["fast", "aiohttp"])
def test_the_plan_asks_for_fixed_output_lengths(http_client: str) -> None:
    assert _plan(None).payload.fixed_output_tokens is False
    client = protocol_factory("openai-chat")(_plan(True, http_client), 1)
    assert isinstance(client, OpenAISettings)
    assert client.request.fixed_output is True and client.request.chat
    client = protocol_factory("openai-chat")(_plan(False, http_client), 1)
    assert isinstance(client, OpenAISettings) and client.request.fixed_output is False


def test_each_request_of_a_workload_gets_its_own_min_tokens() -> None:
    request = OpenAIRequest("m", fixed_output=True)
    source = payloads(SyntheticWorkload(output_tokens=UniformDist(low=4, high=40), seed=3))
    bodies = [json.loads(request.encode(next(source))[0]) for _ in range(20)]
    assert all(b["min_tokens"] == b["max_tokens"] and b["ignore_eos"] for b in bodies)
    assert len({b["max_tokens"] for b in bodies}) > 5
