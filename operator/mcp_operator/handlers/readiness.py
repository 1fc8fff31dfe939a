"""kopf handlers for MCPReadiness: parse, call the readiness package, write status.

A new spec generation's round waits for admission as a queued key (``readiness.backlog``), run
by :func:`run_queued_round`. Every round (a new spec generation, a due recheck, a new release
that ``spec.watch`` saw) is
``readiness.round.run_round``: claimed against the object as the API server has it now, its
verdict written before the claim is let go, so it runs exactly once however often kopf replays
an older body or a timer ticks. The drills' handlers are in ``handlers.drills``.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

import kopf
from pydantic import ValidationError

from .. import kube, metrics
from ..api.common import GROUP, VERSION
from ..api.readiness import (
    KIND,
    PLURAL,
    MCPReadinessSpec,
    MCPReadinessStatus,
    PodReadinessGate,
)
from ..api.readinessstatus import read_status, status_of
from ..conditions import condition, utc_now
from ..readiness import change, drills, due, podgate, readers, runtime
from ..readiness.backlog import Retry
from ..readiness.claim import skip_reason
from ..readiness.round import Gate, observe, run_round
from ..targets.unresolved import LOOKING_AGAIN, RETRY_S
from ..ticks import object_key
from .common import about_object, announcer, rejected, say_waiting

log = logging.getLogger(__name__)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@metrics.counted_errors("evaluate_readiness")
@about_object
async def evaluate_readiness(status: kopf.Status, meta: kopf.Meta, body: kopf.Body, **kw: Any) -> None:
    """Queue a round for this generation (``readiness.backlog``: nothing of kopf's is held while
    it waits for admission), unless the status kopf handed over shows it judged."""
    rt, gate = runtime.current(), _gate(meta, body)
    if not await _adopted(rt, gate, status, kw.get("reason")):
        rt.backlog.add(object_key(body))


@metrics.counted_errors("evaluate_readiness")
@about_object
async def run_queued_round(meta: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
    """The round :func:`evaluate_readiness` queued, once admitted: judged on the object as the
    API server has it now; what cannot go on yet raises ``backlog.Retry``."""
    rt, gate = runtime.current(), _gate(meta, body)
    async with rt.claims.lock(gate.uid):
        obj = await readers.fresh_generation(gate.namespace, gate.name, gate.generation)
        if obj is None:
            return  # deleted, or a newer spec whose own round is queued
        settled = await drills.settle(rt, gate.generation, obj, gate.announce)
        why = skip_reason(read_status(settled), gate.generation, rt.claims.running)
        if why is not None:
            log.debug("%s/%s generation %d not evaluated again: %s", *gate.where, gate.generation, why)
            return
        written: dict[str, Any] = {}
        try:
            accepted = await change.accept(obj["spec"], settled, gate, written)
        except drills.Held as held:
            raise Retry(str(held), drills.REVERT_RETRY_INTERVAL_S) from held
        if isinstance(accepted, change.Refused):
            if accepted.wait:  # not a refusal: the names may resolve later; looked at again
                message = await say_waiting(body, PLURAL, settled, gate.generation, accepted.problems)
                raise Retry(f"{message}{LOOKING_AGAIN}", RETRY_S)
            await kube.patch_status(PLURAL, gate.namespace, gate.name, accepted.status)
            rejected(body, KIND, accepted.problems)
        elif accepted is None:
            if written:  # suspended, or a drill ended
                await kube.patch_status(PLURAL, gate.namespace, gate.name, written)
        else:
            observation = await observe(accepted.parsed, gate.namespace)
            if not await run_round(
                rt, gate, obj, accepted.parsed, "Spec", observation, accepted.target, settled
            ):
                raise Retry("the object changed while claiming the evaluation", 1)


@metrics.counted_errors("recheck_readiness")
@about_object
async def recheck_readiness(meta: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
    """A standing gate: evaluate again once the interval has passed; Ready stays as it was while
    the checks run, so consumers see a change only when the verdict changes."""
    rt, gate = runtime.current(), _gate(meta, body)
    async with rt.admission.admitted(), rt.claims.lock(gate.uid):
        obj = await readers.fresh_generation(gate.namespace, gate.name, gate.generation)
        parsed = None if obj is None else _valid(obj["spec"])
        if obj is None or parsed is None:
            return  # deleted or changed (the change handler's), or rejected by it already
        now = dt.datetime.now(dt.UTC)
        recheck = await due.recheck(parsed, status_of(obj), gate.generation, gate.namespace, now)
        if recheck is not None:  # a lost claim: changed meanwhile, the next tick looks again
            await run_round(rt, gate, obj, parsed, "Recheck", recheck.observation)


@metrics.counted_errors("retry_readiness")
@about_object
async def retry_readiness(meta: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
    """A verdict that was the operator's own doing (``readiness.retry``) is evaluated again once
    its backoff has passed, as a recheck: Ready stays as it was until the new verdict."""
    rt, gate = runtime.current(), _gate(meta, body)
    async with rt.admission.admitted(), rt.claims.lock(gate.uid):
        obj = await readers.fresh_generation(gate.namespace, gate.name, gate.generation)
        parsed = None if obj is None else _valid(obj["spec"])
        if obj is None or parsed is None:
            return
        now = dt.datetime.now(dt.UTC)
        retry = await due.retry(parsed, status_of(obj), gate.generation, gate.namespace, now)
        if retry is not None:  # a lost claim: changed meanwhile, the next tick looks again
            await run_round(rt, gate, obj, parsed, "Recheck", retry.observation)


@metrics.counted_errors("watch_release")
@about_object
async def watch_release(meta: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> bool:
    """Level-triggered: when ``spec.watch`` shows other than the last evaluation recorded, a new
    release is out: claim a round for it (Ready Unknown) and evaluate it, once; a watch round left
    Running by a failure is taken over the same way. False once the gate is gone."""
    rt, gate = runtime.current(), _gate(meta, body)
    if (lock := rt.claims.lock(gate.uid)).locked():
        return True  # a round of this gate runs in this process now
    async with rt.admission.admitted(), lock:
        found = await readers.fresh(gate.namespace, gate.name)
        obj = readers.of_generation(found, gate.generation)
        parsed = None if obj is None else _valid(obj["spec"])
        if obj is None or parsed is None:
            return found is not None  # deleted: False ends the watch; changed: the next tick
        status, running = status_of(obj), rt.claims.running
        release = await due.new_release(parsed, status, gate.generation, gate.namespace, running)
        if release is not None:  # a lost claim: changed meanwhile, the next tick looks again
            await run_round(rt, gate, obj, parsed, "Watch", release.observation)
    return True


@metrics.counted_errors("sync_pod_gate")
@about_object
async def sync_pod_gate(meta: Mapping[str, Any], **_: Any) -> None:
    """Level-triggered: pods created after the verdict (a rollout) get the gate condition too."""
    namespace, name = str(meta["namespace"]), str(meta["name"])
    obj = await readers.fresh_generation(namespace, name, int(meta["generation"]))
    if obj is None:
        return  # deleted, or changed: the next tick looks at the new generation
    try:
        gate = PodReadinessGate.model_validate(obj["spec"]["podReadinessGate"])
    except (KeyError, ValidationError):
        return  # no gate any more, or a spec the change handler has already rejected
    now = status_of(obj)
    gated = await podgate.sync_pods(gate, namespace, condition(now.conditions, "Ready"), utc_now())
    if now.gated_pods != gated:
        await kube.patch_status(PLURAL, namespace, name, MCPReadinessStatus(gated_pods=gated).to_patch())


async def _adopted(rt: runtime.Runtime, gate: Gate, status: Mapping[str, Any], reason: Any) -> bool:
    """The status kopf handed over shows the generation judged (``drills.judged_and_settled``);
    on a resume (a restarted or new leader adopting the gate), the verdict's recorded event is
    posted if it was lost (``verdictevents``)."""
    if not drills.judged_and_settled(rt, gate.uid, gate.generation, status):
        return False
    if reason == kopf.Reason.RESUME:
        await rt.verdict_events.ensure(gate.namespace, gate.name, gate.uid, status)
    return True


def _gate(meta: Mapping[str, Any], body: Mapping[str, Any]) -> Gate:
    namespace, name, uid = str(meta["namespace"]), str(meta["name"]), str(meta["uid"])
    return Gate(namespace, name, uid, int(meta["generation"]), announcer(body))


def _valid(spec: Mapping[str, Any]) -> MCPReadinessSpec | None:
    """The spec, or None for one the change handler has rejected already."""
    try:
        return MCPReadinessSpec.model_validate(spec)
    except ValidationError:
        return None
