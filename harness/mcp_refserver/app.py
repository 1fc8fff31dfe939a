"""Assemble the reference server (HTTP app plus optional gRPC) and run it on loopback."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import grpc
from aiohttp import web

from mcp_refserver.config import RefServerConfig
from mcp_refserver.configdir import ConfigDir, serve_config_dir
from mcp_refserver.media import MediaCollector, counts_of
from mcp_refserver.metrics import ServerMetrics
from mcp_refserver.model import ServerModel
from mcp_refserver.openai_api import OpenAIHandlers
from mcp_refserver.traffic import Traffic
from mcp_refserver.v2_grpc import start_grpc
from mcp_refserver.v2_http import V2HttpHandlers

MAX_DELAY_MS = 60_000.0


def build_app(config: RefServerConfig) -> tuple[web.Application, ServerModel]:
    model = ServerModel(config)
    metrics = ServerMetrics(config, model.stats, model, model)
    metrics.registry.register(MediaCollector(counts_of(model)))
    traffic = Traffic(metrics.registry, config.max_inflight)
    server_header = f"{config.server_name}/{config.server_version}"

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": config.server_version, "name": config.server_name})

    async def health(request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def prom(request: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": "text/plain; version=0.0.4"})

    async def delay(request: web.Request) -> web.Response:
        """Plain HTTP: answer after ``ms`` milliseconds with ``bytes`` bytes of body (both optional)."""
        try:
            ms = float(request.query.get("ms", "0"))
            size = int(request.query.get("bytes", "0"))
        except ValueError:
            return web.json_response({"error": "ms and bytes must be numbers"}, status=400)
        if not (0 <= ms <= MAX_DELAY_MS and 0 <= size <= 1 << 24):
            return web.json_response(
                {"error": f"need 0 <= ms <= {MAX_DELAY_MS:g}, 0 <= bytes <= 16 MiB"}, status=400
            )
        if ms:
            await asyncio.sleep(ms / 1000)
        return web.Response(body=b"x" * size)

    async def timings(request: web.Request) -> web.Response:
        """Server-side truth per completed LLM request (ms); ``?reset=1`` clears it after reading.

        Per request also: ``arrival_unix_ns`` (wall clock, to pick the requests of a client's
        measured window), ``chunks_ms`` (each streamed chunk's write from arrival: the inter-token
        truth), ``done_ms`` (the write of ``data: [DONE]``, where a client's e2e ends; null when not
        streamed) and ``late_ms`` (each chunk's write past its model deadline: the server's lateness).
        """
        kept = list(model.timings)
        if request.query.get("reset") == "1":
            model.timings.clear()
        return web.json_response(
            {
                "queue_ms": [t.queue_ns / 1e6 for t in kept],
                "ttft_ms": [t.ttft_ns / 1e6 for t in kept],
                "e2e_ms": [t.e2e_ns / 1e6 for t in kept],
                "tpot_ms": [None if t.tpot_ns is None else t.tpot_ns / 1e6 for t in kept],
                "output_tokens": [t.output_tokens for t in kept],
                "arrival_unix_ns": [t.arrival_unix_ns for t in kept],
                "chunks_ms": [[ns / 1e6 for ns in t.chunk_ns] for t in kept],
                "late_ms": [[ns / 1e6 for ns in t.late_ns] for t in kept],
                "done_ms": [t.done_ns / 1e6 if t.done_ns else None for t in kept],
            }
        )

    async def media(request: web.Request) -> web.Response:
        """Images received so far, per front end (``openai``, ``v2``) and format."""
        return web.json_response(counts_of(model).as_json())

    async def on_prepare(request: web.Request, response: web.StreamResponse) -> None:
        response.headers["Server"] = server_header

    app = web.Application(client_max_size=64 * 2**20, middlewares=[traffic.middleware])
    app.on_response_prepare.append(on_prepare)
    app.add_routes(
        [
            web.get("/version", version),
            web.get("/health", health),
            web.get("/metrics", prom),
            web.get("/delay", delay),
            web.get("/debug/timings", timings),
            web.get("/debug/media", media),
            web.post("/delay", delay),
            *OpenAIHandlers(model, metrics).routes(),
            *V2HttpHandlers(model).routes(),
        ]
    )
    if config.config_dir is not None:
        serve_config_dir(app, ConfigDir(Path(config.config_dir), config.config_map, config.server_name))
    return app, model


@dataclass
class RunningServer:
    """A started reference server; ``url`` is ``http://host:port``, ``grpc_url`` is ``host:port``."""

    config: RefServerConfig
    model: ServerModel
    runner: web.AppRunner
    port: int
    grpc_server: grpc.aio.Server | None = None
    grpc_port: int | None = None

    @property
    def url(self) -> str:
        return f"http://{self.config.host}:{self.port}"

    @property
    def grpc_url(self) -> str | None:
        return None if self.grpc_port is None else f"{self.config.host}:{self.grpc_port}"

    async def stop(self) -> None:
        if self.grpc_server is not None:
            await self.grpc_server.stop(grace=None)
        await self.runner.cleanup()

    async def __aenter__(self) -> RunningServer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def start_refserver(config: RefServerConfig | None = None) -> RunningServer:
    """Start on the running loop (default: 127.0.0.1, any free port); use as ``async with``."""
    config = config or RefServerConfig()
    app, model = build_app(config)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, config.host, config.port, backlog=4096)
    await site.start()
    port = runner.addresses[0][1]
    server = RunningServer(config=config, model=model, runner=runner, port=port)
    if config.grpc_port is not None:
        try:
            server.grpc_server, server.grpc_port = await start_grpc(model, config.host, config.grpc_port)
        except BaseException:
            await runner.cleanup()
            raise
    return server
