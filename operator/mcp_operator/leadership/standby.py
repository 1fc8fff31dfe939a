"""The liveness endpoint of a process on standby.

kopf serves liveness only while it runs, and a standby does not run kopf (so it cannot handle
anything); without an answer of its own the kubelet would restart every standby pod. This one
answers 200 with who leads, on the same address, until the process leads and kopf takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.parse
from collections.abc import Callable

MAX_REQUEST_BYTES = 8192


async def serve(endpoint: str, status: Callable[[], dict[str, str]]) -> asyncio.Server:
    """Answer every request on ``endpoint``'s host and port with ``status()`` as JSON."""
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme != "http":
        raise ValueError(f"unsupported liveness endpoint: {endpoint}")

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
            body = json.dumps(status()).encode()
            head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            writer.write(head.encode() + b"Connection: close\r\n\r\n" + body)
            await writer.drain()
        writer.close()

    return await asyncio.start_server(
        answer, parts.hostname or "0.0.0.0", parts.port or 80, limit=MAX_REQUEST_BYTES
    )
