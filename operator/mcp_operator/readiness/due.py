"""When a timer's round is due, judged on the gate as the API server has it now: a standing
gate's recheck (``spec.recheckIntervalSeconds``), an operator-caused verdict's retry
(``readiness.retry``) and a new release that ``spec.watch`` shows.
Each answers the observation the round records, or None: nothing to do at this tick."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from ..api.readiness import DECIDED_PHASES, MCPReadinessSpec, MCPReadinessStatus
from .claim import orphaned_watch_round
from .evaluate import recheck_due
from .readers import readers
from .release import Observation, recorded_fingerprint
from .release import observe as observe_release
from .retry import retry_due
from .round import observe

DECIDED = DECIDED_PHASES


@dataclass(frozen=True)
class Due:
    """A round to run, with what ``spec.watch`` showed (None without a watch)."""

    observation: Observation | None


async def recheck(
    parsed: MCPReadinessSpec, status: MCPReadinessStatus, generation: int, namespace: str, now: dt.datetime
) -> Due | None:
    """The interval has passed since the last verdict of this generation, and the release is
    the one it judged (a new release is ``new_release``'s, with Ready Unknown meanwhile)."""
    if status.observed_generation != generation:
        return None  # the spec changed; the change handler evaluates it
    if not recheck_due(parsed, status, now):
        return None
    observation = await observe(parsed, namespace)
    fingerprint = None if observation is None else observation.fingerprint
    if fingerprint is not None and fingerprint != recorded_fingerprint(status):
        return None
    return Due(observation)


async def retry(
    parsed: MCPReadinessSpec, status: MCPReadinessStatus, generation: int, namespace: str, now: dt.datetime
) -> Due | None:
    """An operator-caused verdict of this generation is due to be evaluated again
    (``readiness.retry``), against the release it judged; never a drill, never a suspended gate."""
    if status.observed_generation != generation or status.phase not in DECIDED:
        return None
    if parsed.suspend or parsed.drill is not None or not retry_due(status, now):
        return None
    observation = await observe(parsed, namespace)
    fingerprint = None if observation is None else observation.fingerprint
    if fingerprint is not None and fingerprint != recorded_fingerprint(status):
        return None  # a new release: new_release's round, with Ready Unknown meanwhile
    return Due(observation)


async def new_release(
    parsed: MCPReadinessSpec, status: MCPReadinessStatus, generation: int, namespace: str, running: set[str]
) -> Due | None:
    """What ``spec.watch`` shows (the workload's pod template, the Application's synced revision)
    differs from what the last evaluation recorded; or a watch round of this generation was left
    Running by a failure (nothing here runs it any more) and is taken over."""
    orphaned = orphaned_watch_round(status, generation, running)
    decided = status.phase in DECIDED
    if not orphaned and (status.observed_generation != generation or not decided):
        return None  # the change handler's business, or a round in progress
    if parsed.watch is None or parsed.suspend or parsed.drill is not None:
        return None
    observation = await observe_release(parsed.watch, namespace, readers())
    fingerprint = observation.fingerprint
    if fingerprint is None or (fingerprint == recorded_fingerprint(status) and not orphaned):
        return None
    return Due(observation)
