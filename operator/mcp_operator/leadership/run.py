"""One operator process's life under the Lease: standby, then leading, then gone.

- Standby: look at the Lease every retry period, answer liveness, handle nothing. SIGTERM or
  SIGINT ends the process at once (it holds nothing).
- Leading: run the operator (kopf, with its own SIGTERM handling: handlers stopped, drills
  reverted) while a thread of its own renews the Lease, so no backlog on the event loop (a cold
  start with a thousand objects pending) can starve a renewal; once the operator has stopped, give
  the Lease back, so a standby takes over at its next look instead of after a lease duration. A
  loop that hangs for good is the liveness probe's to catch: kopf answers it from that loop.
- Leadership lost (another holds the Lease, or no renewal within the renew deadline): ``on_lost``
  ends the process at once, as a crash would; the successor replays what was left open.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Awaitable, Callable
from typing import NoReturn

from .. import metrics
from . import standby
from .elector import Elector
from .lease import LeaseConfig

log = logging.getLogger(__name__)
_leader: str | None = None  # this process's identity while it leads
_elector: Elector | None = None  # while it leads


def leader_identity() -> str | None:
    """Who this process is while it leads (the liveness probe says so); None on standby."""
    return _leader


async def _standby(elector: Elector, liveness: str | None) -> bool:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def status() -> dict[str, str]:
        holder = elector.holder.identity if elector.holder else ""
        return {"standby": elector.config.identity, "leader": holder}

    server = await standby.serve(liveness, status) if liveness else None
    try:
        return await elector.acquire(stop)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if server is not None:
            server.close()
            await server.wait_closed()


def lapsed() -> str | None:
    """Why this process, leading, must stop before it acts: no renewal within the renew
    deadline (see ``Elector.lapsed``); None while it leads on a fresh Lease, or does not lead.
    Handlers ask before they act: after a freeze (SIGSTOP, a starved process) the renewing thread
    may not have run yet when the loop hands out the events that queued meanwhile."""
    return None if _elector is None else _elector.lapsed()


async def _guard(elector: Elector, on_lost: Callable[[str], NoReturn]) -> None:
    """The same question on the loop every retry period: after a freeze this timer is among
    the first things the loop runs."""
    while True:
        await asyncio.sleep(elector.config.retry_period_s)
        if (why := elector.lapsed()) is not None:
            metrics.LEADER.set(0)
            on_lost(why)


def _hold(elector: Elector, stop: threading.Event, on_lost: Callable[[str], NoReturn]) -> None:
    why = elector.hold(stop)
    if why is None:  # the operator stopped: the Lease is given back by the caller
        return
    metrics.LEADER.set(0)
    on_lost(why)


async def run(
    config: LeaseConfig,
    operate: Callable[[], Awaitable[None]],
    *,
    liveness: str | None,
    on_lost: Callable[[str], NoReturn],
) -> None:
    """Wait for the Lease, then ``operate`` while holding it; return when the operator stopped
    (or the process was stopped on standby)."""
    global _leader, _elector
    elector = Elector(config)
    metrics.LEADER.set(0)
    if not await _standby(elector, liveness):
        log.info("stopped on standby")
        return
    metrics.LEADER.set(1)
    _leader, _elector = config.identity, elector
    # the Lease is renewed until the operator's shutdown (drills reverted) is over; the guard is
    # started before the operator, so kopf's end-of-run sweep of its own tasks leaves it alone
    stop = threading.Event()
    holding = threading.Thread(target=_hold, args=(elector, stop, on_lost), name="lease holder", daemon=True)
    holding.start()
    guard = asyncio.create_task(_guard(elector, on_lost), name="lease guard")
    try:
        await operate()
    finally:
        guard.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await guard
        stop.set()
        await asyncio.to_thread(holding.join)
        metrics.LEADER.set(0)
        _leader, _elector = None, None
        await asyncio.to_thread(elector.release)
