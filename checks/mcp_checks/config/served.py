"""What config each server behind a URL answers it runs (``GET /config``: ``{"server", "hash"}``,
as the reference server serves it), asked with a fresh connection each time so a Service spreads
the questions over its pods: an in-place hot update (a mounted ConfigMap the servers reload,
no rollout) is done when every ready pod answers with the new content's hash."""

from __future__ import annotations

import asyncio
import time

import aiohttp

from ..dialhooks import OPEN, DialHooks


async def wait_served(
    url: str,
    expected: str,
    servers: set[str],
    timeout_s: float,
    dial: DialHooks = OPEN,
    interval_s: float = 0.05,
) -> tuple[float | None, dict[str, str]]:
    """Seconds until every one of ``servers`` answered ``expected`` (None: not within
    ``timeout_s``), and the last hash each server answered (a server outside ``servers``, a
    pod that went, is kept but not waited for)."""
    seen: dict[str, str] = {}
    started = time.monotonic()
    timeout = aiohttp.ClientTimeout(total=2.0)
    async with aiohttp.ClientSession(timeout=timeout, connector=dial.connector(force_close=True)) as session:
        while time.monotonic() - started < timeout_s:
            try:
                async with session.get(url) as resp:
                    body = await resp.json(content_type=None)
                if isinstance(body, dict) and isinstance(body.get("server"), str):
                    seen[body["server"]] = str(body.get("hash", ""))
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
                pass
            if servers and all(seen.get(s) == expected for s in servers):
                return time.monotonic() - started, seen
            await asyncio.sleep(interval_s)
    return None, seen
