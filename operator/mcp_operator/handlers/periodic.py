"""The MCPReadiness work that runs on a clock, scheduled by :class:`mcp_operator.ticks.Ticker`
rather than by kopf timers (which would make kopf hold every gate's whole body; see ``ticks``):

- ``recheck_readiness``: a standing gate (``spec.recheckIntervalSeconds``), once decided;
- ``retry_readiness``: a verdict that was the operator's own doing, once its backoff passed;
- ``watch_release``: a gate with ``spec.watch``, not suspended, decided or running;
- ``sync_pod_gate``: a gate with ``spec.podReadinessGate``, decided or refused;
- ``retry_failed_reverts``: a drill fault whose revert failed.

Which ticks an object wants is read from every watch event (:func:`track_readiness`); the loop
runs while kopf does (started and closed by ``handlers.lifecycle``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from ..api.common import GROUP, VERSION
from ..api.readiness import DECIDED_PHASES, PLURAL
from ..api.readinessstatus import glance
from ..readiness import drills as drill_rounds
from ..ticks import Tick, Ticker, as_handler
from . import drills, readiness

WATCH_INTERVAL_S = 2.0
RETRY_TICK_S = 2.5  # how often a scheduled retry is looked for (its backoff starts at 5 s)
POD_GATE_INTERVAL_S = 5.0
RECHECK_TICK_S = 5.0  # how often a standing gate is looked at (its interval is at least 10 s)


def _standing(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    return bool(spec.get("recheckIntervalSeconds")) and glance(status).phase in DECIDED_PHASES


def _retry_pending(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    return glance(status).retry_pending


def _watching(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    phase = glance(status).phase
    return bool(spec.get("watch")) and not spec.get("suspend") and phase in (*DECIDED_PHASES, "Running")


def _pod_gated(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    return bool(spec.get("podReadinessGate")) and glance(status).phase in (*DECIDED_PHASES, "Invalid")


def _revert_failed(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    return glance(status).revert_failed


TICKS = (
    Tick(
        "recheck_readiness",
        RECHECK_TICK_S,
        RECHECK_TICK_S,
        _standing,
        as_handler(readiness.recheck_readiness),
    ),
    Tick(
        "retry_readiness", RETRY_TICK_S, RETRY_TICK_S, _retry_pending, as_handler(readiness.retry_readiness)
    ),
    # a failed look is the next look's to repeat, as the daemon it replaces did
    Tick(
        "watch_release",
        WATCH_INTERVAL_S,
        WATCH_INTERVAL_S,
        _watching,
        as_handler(readiness.watch_release),
        backoff_s=WATCH_INTERVAL_S,
    ),
    Tick("sync_pod_gate", POD_GATE_INTERVAL_S, 2.0, _pod_gated, as_handler(readiness.sync_pod_gate)),
    Tick(
        "retry_failed_reverts",
        drill_rounds.REVERT_RETRY_INTERVAL_S,
        drill_rounds.REVERT_RETRY_INTERVAL_S,
        _revert_failed,
        as_handler(drills.retry_failed_reverts),
    ),
)
TICKER = Ticker(TICKS)


@kopf.on.event(GROUP, VERSION, PLURAL)
async def track_readiness(type: str | None, body: kopf.Body, **_: Any) -> None:
    """Every watch event of a gate: which ticks it wants now (kopf logs this handler's success
    at DEBUG: ``handlers.startup.ApiRetryFilter``). On the loop, as the ticker itself: a sync
    handler would hop to kopf's thread pool for every event, and the ticker's tables are not
    for threads."""
    TICKER.observe(type, body)
