"""Before the first fault: can the operator reach the target at all? A drill against a target
nobody here can reach would break things and measure nothing (every probe fails, with or
without the fault), so it is refused with a reason and nothing is injected."""

from __future__ import annotations

import asyncio

import aiohttp

from mcp_checks.api import CheckOutcome, Verdict

from ...targets import guarded

TRIES = 3
TIMEOUT_S = 5.0
PAUSE_S = 1.0


async def _once(session: aiohttp.ClientSession, url: str) -> tuple[bool, str]:
    try:
        async with session.get(url) as resp:
            await resp.read()
            if 200 <= resp.status < 300:
                return True, f"HTTP {resp.status}"
            return False, f"HTTP {resp.status}"
    except (TimeoutError, aiohttp.ClientError, OSError) as exc:
        return False, f"{type(exc).__name__}: {exc}"


async def preflight(url: str, tries: int = TRIES, timeout_s: float = TIMEOUT_S) -> CheckOutcome | None:
    """None when ``url`` answered 2xx within ``tries``; else the outcome that ends the drill:
    ``TargetUnreachable`` (no answer) or ``TargetNotHealthy`` (it answered, not 2xx)."""
    last = ""
    answered = False
    timeout = aiohttp.ClientTimeout(total=timeout_s)
    async with aiohttp.ClientSession(timeout=timeout, connector=guarded.connector()) as session:
        for attempt in range(tries):
            ok, last = await _once(session, url)
            if ok:
                return None
            answered = answered or last.startswith("HTTP ")
            if attempt + 1 < tries:
                await asyncio.sleep(PAUSE_S)
    reason = "TargetNotHealthy" if answered else "TargetUnreachable"
    message = f"preflight: {url} did not answer 2xx in {tries} tries ({last}); no fault was injected"
    return CheckOutcome("drill-preflight", Verdict.ERROR, reason, message, {"lastAnswer": last})
