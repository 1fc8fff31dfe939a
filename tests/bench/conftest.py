"""Shared fixtures for mcp_bench tests: real servers on 127.0.0.1 only.

``loopback_http`` runs a small aiohttp server in a background thread with its own event loop,
so both async tests and blocking ones (``run_plan_sync``, the CLI) can talk to it. Add fixtures
for other servers beside it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

import pytest
from aiohttp import web

from mcp_bench.results.document import LevelResult
from mcp_refserver import RefServerConfig, RunningServer, start_refserver

SERVER_HEADER = "loopback-test/1.2.3"


class LoopbackHttpServer:
    """Paths: /sleep/{ms}, /status/{code}, /close (drops the connection), /truncate (short body),
    /ok, /chunked (chunked body), /echo (echoes the body, then closes).

    Every answer carries ``Server: loopback-test/1.2.3``; ``hits`` counts requests per path kind.
    """

    def __init__(self) -> None:
        self.hits: Counter[str] = Counter()
        # How long each /sleep handler really took (asyncio oversleeps a little): the ground truth.
        self.sleep_handler_ns: list[int] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="loopback-http", daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _app(self) -> web.Application:
        async def sleep(request: web.Request) -> web.StreamResponse:
            self.hits["sleep"] += 1
            t0 = time.perf_counter_ns()
            await asyncio.sleep(float(request.match_info["ms"]) / 1000)
            self.sleep_handler_ns.append(time.perf_counter_ns() - t0)
            return web.Response(text="ok", headers={"Server": SERVER_HEADER})

        async def status(request: web.Request) -> web.StreamResponse:
            self.hits["status"] += 1
            return web.Response(status=int(request.match_info["code"]), headers={"Server": SERVER_HEADER})

        async def ok(request: web.Request) -> web.StreamResponse:
            self.hits["ok"] += 1
            return web.Response(text="ok", headers={"Server": SERVER_HEADER})

        async def close(request: web.Request) -> web.StreamResponse:
            self.hits["close"] += 1
            assert request.transport is not None
            request.transport.close()
            return web.Response(text="never sent")

        async def truncate(request: web.Request) -> web.StreamResponse:
            self.hits["truncate"] += 1
            resp = web.StreamResponse(headers={"Content-Length": "1000", "Server": SERVER_HEADER})
            await resp.prepare(request)
            await resp.write(b"x" * 10)
            assert request.transport is not None
            request.transport.close()
            return resp

        async def chunked(request: web.Request) -> web.StreamResponse:
            self.hits["chunked"] += 1
            resp = web.StreamResponse(headers={"Server": SERVER_HEADER})
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            for part in (b"alpha", b"beta", b"gamma"):
                await resp.write(part)
            await resp.write_eof()
            return resp

        async def echo(request: web.Request) -> web.StreamResponse:
            self.hits["echo"] += 1
            body = await request.read()
            return web.Response(body=body, headers={"Server": SERVER_HEADER, "Connection": "close"})

        app = web.Application()
        app.router.add_route("*", "/sleep/{ms}", sleep)
        app.router.add_route("*", "/status/{code}", status)
        app.router.add_route("*", "/ok", ok)
        app.router.add_route("*", "/", ok)
        app.router.add_route("*", "/close", close)
        app.router.add_route("*", "/truncate", truncate)
        app.router.add_route("*", "/chunked", chunked)
        app.router.add_route("*", "/echo", echo)
        return app

    async def _start(self) -> None:
        self._runner = web.AppRunner(self._app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def start(self) -> None:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


@pytest.fixture(scope="session")
def loopback_http() -> Iterator[LoopbackHttpServer]:
    server = LoopbackHttpServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def closed_port() -> int:
    """A loopback port with nothing listening (bound then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def assert_server_counted_level() -> Callable[[LevelResult, str, str], int]:
    """``check(level, model, model_version)``: the reference server's Triton metrics, vLLM metrics and
    Triton statistics each counted exactly the requests the engine sent in ``level`` (a per-level
    delta, not a running total). Returns that number of requests."""

    def check(level: LevelResult, model: str, model_version: str) -> int:
        metrics = level.server_metrics
        assert metrics is not None
        sent = level.completed + level.failed
        success = metrics["triton-metrics"]["metrics"]["nv_inference_request_success"]["total_delta"]
        assert success == sent
        ttft = metrics["vllm-metrics"]["metrics"]["vllm:time_to_first_token_seconds"]["series"][0]
        assert ttft["count"] == sent
        stages = metrics[f"triton-stats:{model}"]["stages"][f"{model}/{model_version}"]
        assert stages["success"]["count"] == sent
        return sent

    return check


@contextmanager
def _refserver_in_thread(config: RefServerConfig | None = None) -> Iterator[RunningServer]:
    """The reference server on an event loop of its own thread, for runs that block the test's."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="refserver", daemon=True)
    thread.start()
    srv = asyncio.run_coroutine_threadsafe(start_refserver(config), loop).result(timeout=10)
    try:
        yield srv
    finally:
        asyncio.run_coroutine_threadsafe(srv.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)


@pytest.fixture(scope="session")
def refserver_in_thread() -> Callable[..., AbstractContextManager[RunningServer]]:
    """Starts a reference server (a config, or the default model) in a thread of its own."""
    return _refserver_in_thread


@pytest.fixture(scope="module")
def refserver() -> Iterator[RunningServer]:
    """The reference server with its default model, in a thread of its own."""
    with _refserver_in_thread() as srv:
        yield srv
