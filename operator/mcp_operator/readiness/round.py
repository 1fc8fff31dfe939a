"""One round of a gate, the same for the three ways one starts (``status.release.trigger``): a
new spec generation (``Spec``), a due recheck of a standing gate (``Recheck``), and a new
release that ``spec.watch`` saw (``Watch``).

A round resolves the target, records the release it judges, claims the round in
``status.evaluation`` against the object as the API server has it now (``readiness.claim``), and
evaluates while the claim is held: wait for the watched rollout to settle, run the drill and the
checks, write the verdict, count it, and post an event when it is news. So one generation (or
one due recheck, or one release) is evaluated exactly once however often kopf replays an older
body or a timer ticks.

What differs by trigger is written here once: a recheck keeps ``Ready`` as it was while its
checks run (no progress written, an event only when the verdict changes); the change handler's
drill runs as a task of its own (``readiness.drills``).

No kopf here: the handler hands in the gate (with an ``announce`` callable for events) and turns
a lost claim into kopf's retry where that is its policy.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any, cast

from mcp_checks.api import CheckOutcome, RunVerdict, Verdict, XdsMemory

from .. import kube, logs, metrics
from ..api.readiness import KIND, PLURAL, MCPReadinessSpec, MCPReadinessStatus, ReleaseRecord, XdsMemoryStatus
from ..api.readinessstatus import read_status
from ..conditions import condition, utc_now
from ..targets import SpecProblem
from . import drills, podgate
from .claim import Marker, new_marker, write_claim
from .drill.run import Announce, DrillOutcome
from .evaluate import resolve_target, run_checks
from .readers import readers, still_wanted
from .release import (
    Abandoned,
    Observation,
    Trigger,
    precise_now,
    recorded_fingerprint,
    release_record,
    settle,
)
from .release import observe as observe_release
from .retry import retry_record
from .runtime import Runtime
from .status import STATUS_TOO_LARGE, drill_status, running_status, too_large_status, verdict_status
from .verdictevents import VerdictEvent, verdict_event

log = logging.getLogger(__name__)
QUIET: tuple[Trigger, ...] = ("Recheck",)  # Ready stays as it was while the checks run
INTERNAL_ERROR = "InternalError"  # a round that raised what the operator did not expect


@dataclass(frozen=True)
class Gate:
    """The MCPReadiness a handler was called for, and how to post an event on it."""

    namespace: str
    name: str
    uid: str
    generation: int
    announce: Announce

    @property
    def where(self) -> tuple[str, str]:
        return self.namespace, self.name


@dataclass(frozen=True)
class Claimed:
    """A claimed round: what it judges and what the status said before it."""

    parsed: MCPReadinessSpec
    target: str
    previous: Mapping[str, Any]  # the status as the round found it, with what the claim wrote
    marker: Marker
    release: dict[str, Any]
    announce: bool  # an event for every verdict, not only for a change of Ready
    previous_ready: str | None
    outcomes: list[CheckOutcome] | None = None  # already known: the checks cannot run

    @cached_property
    def before(self) -> MCPReadinessStatus:
        """``previous`` read through its model, once per round."""
        return read_status(self.previous)


async def observe(parsed: MCPReadinessSpec, namespace: str) -> Observation | None:
    """What ``spec.watch`` shows now (None without a watch)."""
    return None if parsed.watch is None else await observe_release(parsed.watch, namespace, readers())


def running_message(release: Mapping[str, Any]) -> str:
    what = [
        f"{label} {release[key]}"
        for key, label in (
            ("revision", "revision"),
            ("workloadTemplateHash", "template"),
            ("applicationRevision", "Application revision"),
        )
        if release.get(key)
    ]
    message = "checks are running" if not what else f"evaluating release {', '.join(what)}"
    if release.get("workload") or release.get("applicationRevision"):
        message += ": waiting for the release to settle, then the checks run"
    return message


def ready_status(status: MCPReadinessStatus) -> str | None:
    ready = condition(status.conditions, "Ready")
    return None if ready is None else ready.status


def checked_target(
    target: str | SpecProblem, status: MCPReadinessStatus
) -> tuple[str, list[CheckOutcome] | None]:
    """A standing gate whose Service went away is not ready, and keeps checking for its return:
    the round's one row says why, against the target it judged last."""
    if isinstance(target, SpecProblem):
        row = CheckOutcome("target", Verdict.ERROR, target.reason, target.message)
        return status.target_url or "", [row]
    return target, None


async def run_round(
    rt: Runtime,
    gate: Gate,
    obj: Mapping[str, Any],
    parsed: MCPReadinessSpec,
    trigger: Trigger,
    observation: Observation | None,
    target: str | None = None,
    status: Mapping[str, Any] | None = None,
) -> bool:
    """Claim a round of ``trigger`` and evaluate it; False when the object changed since
    ``obj`` was read (nothing written: the caller retries or looks again at its next tick).
    ``target`` is resolved here unless the caller has (and has refused what does not resolve);
    ``status`` is ``obj``'s unless the caller has brought it up to date (drills settled)."""
    status = status if status is not None else obj.get("status") or {}
    found = read_status(status)
    if target is None:
        url, outcomes = checked_target(
            await resolve_target(parsed, gate.namespace, kube.service_exists), found
        )
    else:
        url, outcomes = target, None
    release = release_record(parsed, observation, trigger, gate.generation, precise_now())
    now = utc_now()
    marker = new_marker(gate.generation, now, None if observation is None else observation.fingerprint)
    if trigger in QUIET:
        progress: dict[str, Any] = {}
        previous = {**status, "startedAt": now}
    else:
        progress = running_status(
            [c.to_wire() for c in found.conditions], gate.generation, url, now, running_message(release)
        )
        previous = {**status, **progress}
    if not await write_claim(obj, {**progress, "evaluation": marker.to_wire(), "release": release}):
        return False
    if trigger == "Watch":
        log.info(
            "%s/%s: release changed (%s -> %s); evaluating",
            gate.namespace,
            gate.name,
            recorded_fingerprint(found),
            marker.fingerprint,
        )
    claimed = Claimed(
        parsed, url, previous, marker, release, trigger not in QUIET, ready_status(found), outcomes
    )
    if drill_task(trigger, parsed):
        drills.start(
            rt, gate.uid, gate.generation, marker, evaluate(rt, gate, claimed), gate.where, gate.announce
        )
    else:
        await evaluate(rt, gate, claimed)
    return True


def drill_task(trigger: Trigger, parsed: MCPReadinessSpec) -> bool:
    """A new generation's drill runs as a task of its own (``drills.start``)."""
    return trigger == "Spec" and parsed.drill is not None


def failed_row(exc: Exception) -> CheckOutcome:
    """What a round that raised unexpectedly leaves as its one row: Error, never a Pass."""
    return CheckOutcome(
        "round",
        Verdict.ERROR,
        INTERNAL_ERROR,
        f"the operator failed while evaluating: {type(exc).__name__}: {exc} (its log has the "
        "traceback); evaluated again when the spec changes or a recheck is due",
    )


async def evaluate(rt: Runtime, gate: Gate, claimed: Claimed) -> None:
    """One claimed round, its log lines (and those of the tasks it starts) tagged with its id.
    Whatever it raises that is not a transient API failure is its verdict (Error, InternalError,
    a Warning event), never kopf's retry every 60 s with the gate left Evaluating; a drill's task
    has its own ending for that (``drills``: DrillFailed)."""
    with logs.evaluation(claimed.marker.id):
        try:
            await _evaluate(rt, gate, claimed)
        except Exception as exc:
            if drill_task(claimed.release["trigger"], claimed.parsed) or kube.transient(exc):
                raise
            if await went_away(gate):
                log.info(
                    "%s/%s was deleted or changed while evaluated (%s); nothing written", *gate.where, exc
                )
                return
            log.exception("%s/%s: the round failed; written as its verdict", *gate.where)
            metrics.ERRORS.labels("round").inc()
            new_status, verdict, event = await _verdict(gate, claimed, [failed_row(exc)], None)
            await kube.patch_status(PLURAL, gate.namespace, gate.name, new_status)
            _count_and_announce(gate, verdict, event)


async def went_away(gate: Gate) -> bool:
    """The gate was deleted (or has a newer spec, whose own round follows) while its round ran:
    what then failed (the verdict's write answers 404) is no failure of the round, and there is
    nothing to write it on."""
    try:
        return not await still_wanted(gate.namespace, gate.name, gate.generation)
    except Exception:  # the API server cannot say now: the failure is written as it would be
        return False


async def _evaluate(rt: Runtime, gate: Gate, claimed: Claimed) -> None:
    """Wait for the watched release to settle (``spec.watch``), run the checks (unless the round
    already knows why they cannot run), write the verdict and what it judged while the claim is
    held, count it, and post an event when it is news."""
    rt.claims.running.add(claimed.marker.id)
    try:
        settled = await _settled(gate, claimed)
        if settled is None:
            log.info("%s/%s changed or went away while its release settled", gate.namespace, gate.name)
            return
        claimed, rollout = settled
        drill = None
        if claimed.outcomes is None and claimed.parsed.drill is not None:
            drill = await drills.run(rt, claimed.parsed, claimed.target, *gate.where, gate.announce)
        memory = xds_memory(claimed.parsed, claimed.before)
        if claimed.outcomes is not None:
            outcomes = claimed.outcomes
        else:
            outcomes = await _run_checks(rt, gate, claimed, memory)
        if drill is not None:
            outcomes = drill.outcomes + outcomes
        new_status, verdict, event = await _verdict(gate, claimed, rollout + outcomes, drill)
        if memory is not None:
            remembered = XdsMemoryStatus.model_validate(memory.to_wire())
            new_status.update(MCPReadinessStatus(xds_memory=remembered).to_patch())
        too_large = await kube.patch_status_or(
            PLURAL,
            gate.namespace,
            gate.name,
            new_status,
            lambda why: too_large_status(new_status, gate.generation, utc_now(), why),
        )
    finally:
        rt.claims.running.discard(claimed.marker.id)
    if too_large is not None:  # written without its rows, once: the spec leaves them no room
        gate.announce(True, STATUS_TOO_LARGE, f"the verdict's check rows did not fit: {too_large}")
    _count_and_announce(gate, verdict, event)


async def _settled(gate: Gate, claimed: Claimed) -> tuple[Claimed, list[CheckOutcome]] | None:
    """A watching gate's round waits until its rollout settled: the rollout row, and the release
    record of what settled; None when the gate changed or went away meanwhile."""
    watch = claimed.parsed.watch
    if claimed.outcomes is not None or watch is None:
        return claimed, []
    try:
        observation, row = await settle(
            watch,
            gate.namespace,
            readers(),
            lambda: still_wanted(gate.namespace, gate.name, gate.generation),
        )
    except Abandoned:
        return None
    claim = ReleaseRecord.model_validate(claimed.release)
    trigger = cast(Trigger, claim.trigger)  # the claim wrote one of the three
    release = release_record(claimed.parsed, observation, trigger, gate.generation, claim.started_at)
    return replace(claimed, release=release), [row]


def xds_memory(parsed: MCPReadinessSpec, status: MCPReadinessStatus) -> XdsMemory | None:
    """What the gate's xDS check saw in earlier rounds, as its status keeps it (a restarted or
    new leader judges as the last one did); None when the gate has no xDS check."""
    if parsed.checks.xds_sync is None:
        return None
    return XdsMemory.from_wire(None if status.xds_memory is None else status.xds_memory.to_wire())


async def _run_checks(
    rt: Runtime, gate: Gate, claimed: Claimed, memory: XdsMemory | None
) -> list[CheckOutcome]:
    started = time.monotonic()
    outcomes = await run_checks(
        claimed.parsed,
        claimed.target,
        gate.namespace,
        health_probe=rt.prober.run_round,
        probe_slot=rt.prober.slot,
        api_client=kube.api_client(),
        xds_memory=memory,
    )
    for outcome in outcomes:
        took = outcome.duration_s if outcome.duration_s is not None else time.monotonic() - started
        metrics.CHECK_SECONDS.labels(outcome.name).observe(took)
    return outcomes


async def _verdict(
    gate: Gate, claimed: Claimed, outcomes: list[CheckOutcome], drill: DrillOutcome | None
) -> tuple[dict[str, Any], RunVerdict, VerdictEvent | None]:
    """The verdict's status (with the drill's part, the gated pods at once rather than at the
    next gate sync, and the event it announces when it is news: ``status.verdictEvent``, written
    with the verdict, so a new leader can post it if this process dies before it does), the
    verdict and that event. A verdict that is no news leaves the record of the last one as it is."""
    previous, generation, now = claimed.before, gate.generation, utc_now()
    new_status, verdict = verdict_status(
        claimed.previous,
        generation,
        claimed.target,
        str(previous.started_at),
        outcomes,
        now,
        claimed.release,
    )
    event = verdict_event(verdict, claimed.announce, claimed.previous_ready)
    if event is not None:
        new_status.update(MCPReadinessStatus(verdict_event=event.record(now)).to_patch())
    if drill is not None:
        conditions = read_status(new_status).condition_rows()
        new_status.update(drill_status(drill, conditions, generation, utc_now()))
    if claimed.parsed.drill is None:  # a drill is never run again for the operator's load
        retry = retry_record(previous.retry, retried(claimed), outcomes, dt.datetime.now(dt.UTC))
        new_status.update(MCPReadinessStatus.model_validate({"retry": retry}).to_patch())
    pod_gate = claimed.parsed.pod_readiness_gate
    if pod_gate is not None:
        ready = condition(read_status(new_status).conditions, "Ready")
        gated = await podgate.sync_pods(pod_gate, gate.namespace, ready, utc_now())
        new_status.update(MCPReadinessStatus(gated_pods=gated).to_patch())
    return new_status, verdict, event


def retried(claimed: Claimed) -> bool:
    """The round is the one an operator-caused verdict scheduled (``readiness.retry``)."""
    retry = claimed.before.retry
    scheduled = None if retry is None else retry.next_at
    return ReleaseRecord.model_validate(claimed.release).trigger == "Recheck" and bool(scheduled)


def _count_and_announce(gate: Gate, verdict: RunVerdict, event: VerdictEvent | None) -> None:
    """Count the verdict and post the event its status recorded (kopf posts it from its queue)."""
    metrics.VERDICTS.labels(KIND, verdict.outcome.value).inc()
    metrics.RECONCILIATIONS.labels(KIND, "evaluated").inc()
    metrics.READY.labels(gate.namespace, gate.name).set(1 if verdict.ready else 0)
    if event is not None:
        gate.announce(event.warning, event.reason, event.message)
