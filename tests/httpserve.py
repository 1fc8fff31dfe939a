"""Serve an aiohttp app for a test: a real server on loopback, port chosen by the kernel; a
server that records the paths it was sent; and answer JSON from a standard-library request
handler."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from aiohttp import web


def send_json(handler: BaseHTTPRequestHandler, code: int, body: Any) -> None:
    """``body`` as a JSON answer with its length (keep-alive clients read exactly that much)."""
    data = json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextlib.asynccontextmanager
async def serving(app: web.Application) -> AsyncIterator[str]:
    """The app served until the block ends; yields its base URL (``http://127.0.0.1:PORT``)."""
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def recording(body: str) -> AsyncIterator[tuple[str, list[str]]]:
    """A real server answering ``body`` on every path; yields its base URL and the paths it was
    sent, in order (a test of a refused dial asserts the list stays empty)."""
    hits: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        hits.append(request.path)
        return web.Response(text=body)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    async with serving(app) as url:
        yield url, hits
