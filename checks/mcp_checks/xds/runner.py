"""Ask every source at once (one slow source does not serialise the others), each within the
spec's timeout, then judge; and measure how long a config change takes to converge."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace

import aiohttp

from mcp_checks.dialhooks import OPEN, DialHooks
from mcp_checks.verdict import CheckOutcome, Verdict
from mcp_checks.xds.csds import fetch_csds
from mcp_checks.xds.envoy_admin import fetch_envoy_admin
from mcp_checks.xds.evaluate import judge
from mcp_checks.xds.memory import XdsMemory
from mcp_checks.xds.model import SourceAnswer, XdsSource, XdsSyncSpec
from mcp_checks.xds.syncz import fetch_syncz


async def fetch_source(
    source: XdsSource, session: aiohttp.ClientSession, timeout_s: float, dial: DialHooks = OPEN
) -> SourceAnswer:
    """One source's answer, its errors scrubbed of the address's credentials (an error quotes
    the URL it failed on, query and all)."""
    answer = await _fetch_source(source, session, timeout_s, dial)
    return replace(
        answer, unreachable=source.scrub(answer.unreachable), malformed=source.scrub(answer.malformed)
    )


async def _fetch_source(
    source: XdsSource, session: aiohttp.ClientSession, timeout_s: float, dial: DialHooks
) -> SourceAnswer:
    """One source's answer; a time-out is 'unreachable', an unexpected failure 'malformed'."""
    try:
        if source.kind == "csds":
            call = fetch_csds(source, timeout_s, dial)
        elif source.kind == "syncz":
            call = fetch_syncz(source, session, timeout_s)
        else:
            call = fetch_envoy_admin(source, session, timeout_s)
        return await asyncio.wait_for(call, timeout_s)
    except TimeoutError:
        return SourceAnswer(source.label, unreachable=f"no answer within {timeout_s:g}s")
    except Exception as exc:  # a source must never crash the check: its answer is the problem
        return SourceAnswer(source.label, malformed=f"{type(exc).__name__}: {exc}")


async def collect(spec: XdsSyncSpec) -> list[SourceAnswer]:
    async with aiohttp.ClientSession(connector=spec.dial.connector()) as session:
        answers = (fetch_source(s, session, spec.timeout_s, spec.dial) for s in spec.sources)
        return list(await asyncio.gather(*answers))


async def run_xds_sync(spec: XdsSyncSpec, memory: XdsMemory | None = None) -> CheckOutcome:
    """The xDS sync check: read every source in ``spec`` and return its outcome. ``memory`` (see
    ``judge``) is what the caller's earlier looks saw, updated in place; without it this look is
    the first (the operator keeps a gate's in its status, so a restart does not forget it)."""
    return judge(spec, await collect(spec), time.time(), memory)


@dataclass(frozen=True)
class Convergence:
    """``seconds`` from ``started`` to the first all-synced answer; None when it did not converge
    (a NACK, or ``timeout_s`` passed: then ``outcome`` says which)."""

    seconds: float | None
    polls: int
    outcome: CheckOutcome


FIRST_POLL_S = 0.01  # --wait's first pause; each unchanged look waits longer, up to MAX_POLL_S
MAX_POLL_S = 0.04  # so convergence is seen within about 50 ms of happening


async def measure_convergence(
    spec: XdsSyncSpec,
    *,
    started: float | None = None,
    timeout_s: float = 30.0,
    interval_s: float = MAX_POLL_S,
    memory: XdsMemory | None = None,
) -> Convergence:
    """Poll until every expected proxy is synced (on ``spec.expected_version`` when set), or
    any look Fails (a NACK, a proxy gone, one stale past its grace: waiting cannot make those
    pass), or ``timeout_s`` passes. Polls start ``FIRST_POLL_S`` apart and back off to
    ``interval_s``. ``started`` is a ``time.monotonic()`` reading taken at the config change."""
    begin = time.monotonic() if started is None else started
    polls = 0
    memory = XdsMemory() if memory is None else memory
    pause = min(FIRST_POLL_S, interval_s)
    while True:
        outcome = await run_xds_sync(spec, memory)
        polls += 1
        elapsed = time.monotonic() - begin
        if outcome.outcome == Verdict.PASS:
            return Convergence(elapsed, polls, outcome)
        if outcome.outcome in (Verdict.FAIL, Verdict.ERROR):
            return Convergence(None, polls, outcome)
        if elapsed >= timeout_s:
            timed_out = CheckOutcome(
                spec.name,
                Verdict.INCONCLUSIVE,
                "ConvergenceTimeout",
                f"not converged after {elapsed:.1f}s ({polls} polls): {outcome.message}",
                outcome.observed,
                {**outcome.thresholds, "convergenceTimeoutSeconds": f"{timeout_s:g}"},
                source=outcome.source,
                findings=outcome.findings,
            )
            return Convergence(None, polls, timed_out)
        await asyncio.sleep(min(pause, max(0.0, timeout_s - elapsed)))
        pause = min(pause * 1.5, interval_s)
