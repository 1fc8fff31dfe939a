"""Warm, cold and per-request connections against the reference server, which counts the
connections it was given; connect and TLS time per level, apart from TTFT."""

from __future__ import annotations

import csv
import io
import re
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from mcp_bench.engines import run_plan
from mcp_bench.plan import RunPlan
from mcp_bench.records import ErrorKind
from mcp_bench.report import csv_text
from mcp_bench.results.document import LevelResult
from mcp_devcluster.certs import self_signed_pair
from mcp_refserver import RefServerConfig, start_refserver
from mcp_refserver.app import build_app

CONCURRENCY = 64
REQUESTS = 192


def _plan(url: str, connections: str | None, **levels: Any) -> RunPlan:
    lv: dict[str, Any] = {"concurrency": [CONCURRENCY], **levels}
    if connections is not None:
        lv["connections"] = connections
    return RunPlan.from_dict(
        {
            "url": url,
            "backend": "openai",
            "model": "refmodel",
            "levels": lv,
            "stage": {"requests": REQUESTS},
            "payload": {"max_output_tokens": 4},
        }
    )


async def _server_connections(url: str) -> int:
    """The reference server's own count (this scrape's connection included)."""
    async with aiohttp.ClientSession() as session, session.get(url + "/metrics") as resp:
        text = await resp.text()
    match = re.search(r"^mcp_refserver_http_connections_total (\S+)$", text, re.MULTILINE)
    assert match is not None
    return int(float(match.group(1)))


async def _run(connections: str | None, http_client: str = "fast") -> tuple[LevelResult, int]:
    """One level at concurrency 64; the level and how many connections the server was given
    (the fingerprint probe's one included)."""
    async with await start_refserver(RefServerConfig(ttft_ms=5, tpot_ms=1)) as srv:
        before = await _server_connections(srv.url)
        plan = _plan(srv.url, connections).model_copy(update={"http_client": http_client})
        doc = await run_plan(plan)
        after = await _server_connections(srv.url)
    (lv,) = doc.levels
    assert lv.failed == 0 and lv.completed == REQUESTS
    return lv, after - before - 1


@pytest.mark.parametrize("http_client", ["fast", "aiohttp"])
async def test_warm_first_wave_carries_no_connect_time(http_client: str) -> None:
    warm, warm_conns = await _run(None, http_client)
    cold, cold_conns = await _run("cold", http_client)
    ttft, connect = (
        (warm.latency["ttft"], cold.latency["ttft"]),
        (warm.latency["connect"], cold.latency["connect"]),
    )
    print(
        f"\n{http_client}: TTFT P99 warm {ttft[0].p99_ms} ms, cold {ttft[1].p99_ms} ms;"
        f" connect P50 warm {connect[0].p50_ms} ms, cold {connect[1].p50_ms} ms"
    )
    # the default is warm, and the result says so; every worker's connection was opened before
    # the measured window, so no measured request waited for one
    assert warm.connections == "warm" and cold.connections == "cold"
    assert warm.new_connection_requests == 0
    # (aiohttp keeps the fingerprint probe's connection in the pool it warms)
    assert CONCURRENCY - 1 <= warm.latency["connect"].count <= CONCURRENCY
    # cold: the first wave (one request per worker) waited for its connection
    assert cold.new_connection_requests == CONCURRENCY
    assert cold.latency["connect"].count == CONCURRENCY
    assert cold.latency["connect"].p50_ms is not None and cold.latency["connect"].p50_ms > 0
    # the server saw one connection per worker (and the fingerprint probe's) either way
    assert CONCURRENCY <= warm_conns <= CONCURRENCY + 2
    assert CONCURRENCY + 1 <= cold_conns <= CONCURRENCY + 2
    # connect time is its own figure, per level, and TLS is not counted over plain TCP
    assert warm.latency["tls"].count == 0 and "connect" in warm.histograms


@pytest.mark.parametrize("http_client", ["fast", "aiohttp"])
async def test_per_request_opens_one_connection_per_request(http_client: str) -> None:
    lv, conns = await _run("per-request", http_client)
    assert lv.connections == "per-request"
    assert lv.new_connection_requests == REQUESTS
    assert lv.latency["connect"].count == REQUESTS
    assert lv.latency["connect"].p50_ms is not None and lv.latency["connect"].p50_ms > 0
    assert REQUESTS + 1 <= conns <= REQUESTS + 2  # the server counted them too


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    return self_signed_pair(tmp_path, "127.0.0.1", "127.0.0.1")


async def test_tls_handshake_timed_apart_from_connect(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cert, key = _self_signed(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the client trusts this server's certificate
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert, key)
    app, _ = build_app(RefServerConfig(ttft_ms=2, tpot_ms=1))
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ctx)
        await site.start()
        port = runner.addresses[0][1]
        plan = _plan(f"https://127.0.0.1:{port}", "cold", concurrency=[4])
        doc = await run_plan(plan)
    finally:
        await runner.cleanup()
    (lv,) = doc.levels
    assert lv.failed == 0 and lv.completed == REQUESTS
    assert lv.latency["connect"].count == 4 and lv.latency["tls"].count == 4
    assert lv.latency["tls"].min_ms is not None and lv.latency["tls"].min_ms > 0


async def test_warm_against_a_closed_port_leaves_the_failures_to_the_requests(closed_port: int) -> None:
    plan = RunPlan.from_dict(
        {
            "url": f"http://127.0.0.1:{closed_port}/ok",
            "levels": {"concurrency": [4]},
            "stage": {"requests": 8},
            "request_timeout_s": 2,
        }
    )
    doc = await run_plan(plan)
    (lv,) = doc.levels
    # nothing could be opened before the window; every measured request says why it failed
    assert lv.connections == "warm" and lv.latency["connect"].count == 0
    assert lv.completed == 0 and lv.errors == {ErrorKind.CONNECT: lv.failed} and lv.failed >= 8


async def test_csv_row_carries_the_connection_figures() -> None:
    async with await start_refserver(RefServerConfig(ttft_ms=2, tpot_ms=1)) as srv:
        before = await _server_connections(srv.url)
        doc = await run_plan(_plan(srv.url, "cold", concurrency=[4]))
        conns = await _server_connections(srv.url) - before - 1
    (row,) = csv.DictReader(io.StringIO(csv_text(doc)))
    # cold: opened on demand, at most one per stream; on a busy host a stream that starts late
    # takes a connection another already returned (3 of 4 was seen), which the server counts too
    opened = int(row["new_connection_requests"])
    assert row["connections"] == "cold" and 1 <= opened <= 4
    assert opened + 1 <= conns <= opened + 2  # the fingerprint probe's connection besides
    assert row["connect_count"] == str(opened) and float(row["connect_p50_ms"]) > 0
    assert row["tls_count"] == "0" and row["tls_p50_ms"] == ""  # plain TCP: no TLS, never 0 ms
