"""Both OpenAI streaming clients (the lean one and aiohttp) against the reference server: measured
delays and every fault kind."""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from mcp_bench.plan import RunPlan
from mcp_bench.protocols import protocol_factory
from mcp_bench.protocols.openai_aiohttp import OpenAIClient
from mcp_bench.protocols.openai_fast import FastOpenAIClient
from mcp_bench.protocols.openai_stream import SseParser, endpoint_url, server_root
from mcp_bench.records import ErrorKind, RequestPayload, RequestRecord
from mcp_refserver import Faults, RefServerConfig, start_refserver
from mcp_refserver.model import ServedTiming

TTFT_MS, TPOT_MS, N = 25.0, 4.0, 8
Client = type[OpenAIClient] | type[FastOpenAIClient]


@pytest.fixture(params=[FastOpenAIClient, OpenAIClient], ids=["fast", "aiohttp"])
def cls(request: pytest.FixtureRequest) -> Client:
    return request.param  # type: ignore[no-any-return]


async def run_with_truth(
    cls: Client,
    cfg: RefServerConfig,
    *,
    chat: bool = False,
    count: int = 6,
    timeout_s: float = 10.0,
    max_tokens: int = N,
) -> tuple[list[RequestRecord], list[ServedTiming]]:
    """Sequential requests after one warm-up (which opens the keep-alive connection); returns the
    client's records and the server's own timings of the same requests."""
    async with await start_refserver(cfg) as srv:
        client = cls(srv.url, cfg.model, chat=chat, timeout_s=timeout_s)
        await client.open()
        try:
            payload = RequestPayload(prompt="one two three", input_tokens=3, max_output_tokens=max_tokens)
            await client.send(payload)
            srv.model.timings.clear()
            return [await client.send(payload) for _ in range(count)], list(srv.model.timings)
        finally:
            await client.close()


async def run(cls: Client, cfg: RefServerConfig, **kwargs: object) -> list[RequestRecord]:
    return (await run_with_truth(cls, cfg, **kwargs))[0]  # type: ignore[arg-type]


def med(values: list[float]) -> float:
    assert values, "no data is never a pass"
    return statistics.median(values)


@pytest.mark.parametrize("chat", [False, True])
async def test_streaming_metrics_match_the_model(cls: Client, chat: bool) -> None:
    cfg = RefServerConfig(ttft_ms=TTFT_MS, tpot_ms=TPOT_MS)
    recs, truth = await run_with_truth(cls, cfg, chat=chat, count=10)
    assert all(r.ok for r in recs), [r.error_detail for r in recs]
    assert len(truth) == len(recs)
    # Same clock, same process: the client cannot see a token before the server sent it ...
    pairs = list(zip(recs, truth, strict=True))
    assert all(r.ttft_ns >= t.ttft_ns and r.e2e_ns >= t.e2e_ns for r, t in pairs)  # type: ignore[operator]
    # ... and typically sees it soon after (loopback plus both sides' Python; medians, because a
    # shared CPU can stall any single request).
    assert med([(r.ttft_ns - t.ttft_ns) / 1e6 for r, t in pairs]) < 2.0  # type: ignore[operator]
    assert med([(r.e2e_ns - t.e2e_ns) / 1e6 for r, t in pairs]) < 2.0
    assert all(r.output_tokens == N and r.tokens_from_server for r in recs)
    assert all(r.input_tokens == 3 and len(r.token_times_ns) == N for r in recs)
    # TTFT is never below the model's (the chat role delta, sent at once, must not count: it would
    # be about 0 ms); how far above it is the server's own lateness on a busy host, which the
    # truth above already accounts for
    assert med([r.ttft_ns / 1e6 for r in recs]) >= TTFT_MS - 1.0  # type: ignore[operator]
    # TPOT and the gaps against the server's own writes of the same requests (a shared CPU delays
    # the server's timer as much as the client's reads)
    served_tpot = med([t.tpot_ns / 1e6 for t in truth])  # type: ignore[operator]
    assert served_tpot >= TPOT_MS - 0.5
    assert med([r.tpot_ns / 1e6 for r in recs]) == pytest.approx(served_tpot, abs=0.5)  # type: ignore[operator]
    gaps = [g / 1e6 for r in recs for g in r.inter_token_gaps_ns]
    served_gaps = [(b - a) / 1e6 for t in truth for a, b in zip(t.chunk_ns, t.chunk_ns[1:], strict=False)]
    assert len(gaps) == len(recs) * (N - 1) == len(served_gaps)
    assert med(gaps) == pytest.approx(med(served_gaps), abs=0.5)
    for r in recs:
        assert r.first_token_ns == r.token_times_ns[0] and r.end_ns >= r.token_times_ns[-1]
        # The server wakes early by at most its median timer overshoot (well under a millisecond).
        assert r.e2e_ns / 1e6 >= TTFT_MS + (N - 1) * TPOT_MS - 1.0


async def test_chunks_with_several_tokens(cls: Client) -> None:
    k = 3
    cfg = RefServerConfig(ttft_ms=TTFT_MS, tpot_ms=TPOT_MS, tokens_per_chunk=k)
    recs, truth = await run_with_truth(cls, cfg, max_tokens=7)
    assert all(r.ok and r.output_tokens == 7 and r.tokens_from_server for r in recs)
    assert {len(r.token_times_ns) for r in recs} == {3}  # chunks of 3, 3, 1 tokens
    # The first chunk leaves when its third token is generated: never before that, and the client
    # sees it when the server wrote it (its own write times, whatever a busy host made of them)
    first = TTFT_MS + (k - 1) * TPOT_MS
    assert med([t.ttft_ns / 1e6 for t in truth]) >= first - 1.0
    pairs = list(zip(recs, truth, strict=True))
    assert all(r.ttft_ns >= t.ttft_ns for r, t in pairs)  # type: ignore[operator]
    assert med([(r.ttft_ns - t.ttft_ns) / 1e6 for r, t in pairs]) < 2.0  # type: ignore[operator]


async def test_without_usage_chunks_are_counted(cls: Client) -> None:
    recs = await run(
        cls, RefServerConfig(ttft_ms=2, tpot_ms=1, tokens_per_chunk=2, send_usage=False), max_tokens=6
    )
    assert all(r.ok for r in recs)
    assert {(r.output_tokens, r.tokens_from_server) for r in recs} == {(3, False)}  # 3 chunks, 6 tokens


async def test_non_streaming_mode(cls: Client) -> None:
    async with await start_refserver(RefServerConfig(ttft_ms=5, tpot_ms=1)) as srv:
        client = cls(srv.url, "refmodel", stream=False)
        await client.open()
        try:
            rec = await client.send(RequestPayload(prompt="a", max_output_tokens=4))
        finally:
            await client.close()
    assert rec.ok and rec.output_tokens == 4 and rec.tokens_from_server
    assert rec.first_token_ns is None and rec.e2e_ns / 1e6 >= 5 + 3 * 1 - 0.5


@pytest.mark.parametrize(
    ("faults", "kind"),
    [
        (Faults(error_rate=1, error_status=503), ErrorKind.HTTP_STATUS),
        (Faults(close_rate=1, fault_after_tokens=2), ErrorKind.DISCONNECTED),
        (Faults(malformed_rate=1, fault_after_tokens=2), ErrorKind.MALFORMED),
        (Faults(truncate_rate=1, fault_after_tokens=2), ErrorKind.TRUNCATED),
    ],
)
@pytest.mark.parametrize("chat", [False, True])
async def test_each_fault_is_counted_under_its_kind(
    cls: Client, faults: Faults, kind: ErrorKind, chat: bool
) -> None:
    recs = await run(cls, RefServerConfig(ttft_ms=2, tpot_ms=1, faults=faults), chat=chat, count=3)
    assert [r.error for r in recs] == [kind] * 3, [r.error_detail for r in recs]
    for r in recs:
        assert r.error_detail and r.end_ns >= r.sent_ns
        if kind is ErrorKind.HTTP_STATUS:
            assert r.status == 503 and "injected error" in r.error_detail
        if kind in (ErrorKind.DISCONNECTED, ErrorKind.MALFORMED, ErrorKind.TRUNCATED):
            assert len(r.token_times_ns) == 2  # what arrived before the fault is kept


async def test_stalled_server_is_a_timeout(cls: Client) -> None:
    cfg = RefServerConfig(ttft_ms=2, tpot_ms=1, faults=Faults(stall_rate=1, stall_s=5))
    (rec,) = await run(cls, cfg, count=1, timeout_s=0.25)
    assert rec.error is ErrorKind.TIMEOUT and rec.error_detail
    assert 0.24e9 <= rec.e2e_ns < 2e9 and not rec.token_times_ns


async def test_mixed_faults_are_all_accounted_for(cls: Client) -> None:
    faults = Faults(error_rate=0.2, close_rate=0.2, malformed_rate=0.2, truncate_rate=0.2)
    recs = await run(
        cls, RefServerConfig(ttft_ms=1, tpot_ms=0.5, faults=faults, seed=3), count=40, max_tokens=3
    )
    kinds = {k: sum(r.error is k for r in recs) for k in ErrorKind}
    ok = sum(r.ok for r in recs)
    assert ok + sum(kinds.values()) == 40
    for k in (ErrorKind.HTTP_STATUS, ErrorKind.DISCONNECTED, ErrorKind.MALFORMED, ErrorKind.TRUNCATED):
        assert kinds[k] > 0, kinds
    assert ok > 0


async def test_refused_connection_is_a_connect_error(cls: Client, closed_port: int) -> None:
    client = cls(f"http://127.0.0.1:{closed_port}", "m")
    await client.open()
    try:
        rec = await client.send(RequestPayload(prompt="x", max_output_tokens=2))
        assert rec.error is ErrorKind.CONNECT and "cannot connect" in rec.error_detail.lower()
        assert await client.fingerprint() == {"server_name": "", "server_version": "", "server_header": ""}
    finally:
        await client.close()


async def test_fingerprint_reports_server_name_and_version(cls: Client, fingerprint_of: Any) -> None:
    cfg = RefServerConfig(server_name="vllm-lookalike", server_version="0.9.1")
    async with await start_refserver(cfg) as srv:
        fp = await fingerprint_of(cls(srv.url + "/v1", "refmodel"))
    assert fp == {
        "server_name": "vllm-lookalike",
        "server_version": "0.9.1",
        "server_header": "vllm-lookalike/0.9.1",
    }


@pytest.mark.parametrize(("backend", "chat"), [("openai", False), ("openai-chat", True)])
@pytest.mark.parametrize(("http_client", "expected"), [("fast", FastOpenAIClient), ("aiohttp", OpenAIClient)])
def test_registered_backends_build_from_a_plan(
    backend: str, chat: bool, http_client: str, expected: Client
) -> None:
    plan = RunPlan.model_validate(
        {
            "url": "http://127.0.0.1:9/v1",
            "backend": backend,
            "model": "m",
            "levels": {"concurrency": [2]},
            "stage": {"requests": 1},
            "payload": {"options": {"temperature": 0}},
            "http_client": http_client,
        }
    )
    client = protocol_factory(backend)(plan, 7)
    assert type(client) is expected
    assert client.chat is chat and client.max_connections == 7 and client.timeout_s == 30
    body, stream = client.request.encode(RequestPayload(prompt="hi", max_output_tokens=3))
    assert stream and b'"temperature":0' in body and b'"include_usage":true' in body
    assert client.url.endswith("/v1/chat/completions" if chat else "/v1/completions")


def test_sse_parser_handles_split_crlf_multiline_and_comments() -> None:
    p = SseParser()
    assert p.feed(b'data: {"a"') == []
    assert p.feed(b": 1}\r\n\r\n: keep-alive\n\nevent: x\ndata: l1\ndata: l2\n\ndata:[DONE]") == [
        b'{"a": 1}',
        b"l1\nl2",
    ]
    assert p.finish() == [b"[DONE]"]


def test_url_forms() -> None:
    assert endpoint_url("http://h:1", chat=False) == "http://h:1/v1/completions"
    assert endpoint_url("http://h:1/v1/", chat=True) == "http://h:1/v1/chat/completions"
    assert endpoint_url("http://h:1/x/v1/completions", chat=True) == "http://h:1/x/v1/completions"
    assert server_root("http://h:1/v1/chat/completions") == "http://h:1"
