"""kopf handlers for MCPReadiness: parse, call the readiness package, write status.

Every round (a new spec generation, a due recheck, a new release that ``spec.watch`` saw) is
``readiness.round.run_round``: claimed against the object as the API server has it now, its
verdict written before the claim is let go, so it runs exactly once however often kopf replays
an older body or a timer ticks. The drills' handlers are in ``handlers.drills``.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import kopf
from pydantic import ValidationError

from .. import metrics
from ..api.common import GROUP, VERSION
from ..api.readiness import (
    DECIDED_PHASES,
    KIND,
    PLURAL,
    MCPReadinessSpec,
    MCPReadinessStatus,
    PodReadinessGate,
)
from ..api.readinessstatus import glance, read_status, status_of
from ..conditions import condition, utc_now
from ..readiness import change, drills, due, podgate, readers, runtime
from ..readiness.claim import skip_reason
from ..readiness.round import Gate, observe, run_round
from .common import about_object, announcer, every, reject, wait_for_names

log = logging.getLogger(__name__)
WATCH_INTERVAL_S = 2.0
RETRY_TICK_S = 2.5  # how often a scheduled retry is looked for (its backoff starts at 5 s)
DECIDED = DECIDED_PHASES


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@metrics.counted_errors("evaluate_readiness")
@about_object
async def evaluate_readiness(
    spec: kopf.Spec, meta: kopf.Meta, body: kopf.Body, patch: kopf.Patch, **_: Any
) -> None:
    rt, gate = runtime.current(), _gate(meta, body)
    async with rt.admission.admitted(), rt.claims.lock(gate.uid):
        obj = await readers.fresh_generation(gate.namespace, gate.name, gate.generation)
        if obj is None:
            return  # deleted, or a newer spec whose own event follows
        status = await drills.settle(rt, gate.generation, obj, gate.announce)
        why = skip_reason(read_status(status), gate.generation, rt.claims.running)
        if why is not None:
            log.debug("%s/%s generation %d not evaluated again: %s", *gate.where, gate.generation, why)
            return
        try:
            accepted = await change.accept(spec, status, gate, patch.status)
        except drills.Held as held:
            raise kopf.TemporaryError(str(held), delay=drills.REVERT_RETRY_INTERVAL_S) from held
        if isinstance(accepted, change.Refused):
            if accepted.wait:  # not a refusal: the names may resolve later; looked at again
                await wait_for_names(body, PLURAL, status, gate.generation, accepted.problems)
            reject(body, patch, KIND, accepted.status, accepted.problems)
        elif accepted is not None:
            observation = await observe(accepted.parsed, gate.namespace)
            if not await run_round(
                rt, gate, obj, accepted.parsed, "Spec", observation, accepted.target, status
            ):
                raise kopf.TemporaryError("the object changed while claiming the evaluation", delay=1)


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=5.0,
    initial_delay=5.0,
    when=lambda spec, status, **_: (
        bool(spec.get("recheckIntervalSeconds")) and glance(status).phase in DECIDED
    ),
)
@metrics.counted_errors("recheck_readiness")
@about_object
async def recheck_readiness(spec: kopf.Spec, meta: kopf.Meta, body: kopf.Body, **_: Any) -> None:
    """A standing gate: evaluate again once the interval has passed; Ready stays as it was while
    the checks run, so consumers see a change only when the verdict changes."""
    rt, gate = runtime.current(), _gate(meta, body)
    async with rt.admission.admitted(), rt.claims.lock(gate.uid):
        obj = await readers.fresh_generation(gate.namespace, gate.name, gate.generation)
        parsed = _valid(spec)
        if obj is None or parsed is None:
            return  # deleted or changed (the change handler's), or rejected by it already
        now = dt.datetime.now(dt.UTC)
        recheck = await due.recheck(parsed, status_of(obj), gate.generation, gate.namespace, now)
        if recheck is not None:  # a lost claim: changed meanwhile, the next tick looks again
            await run_round(rt, gate, obj, parsed, "Recheck", recheck.observation)


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=RETRY_TICK_S,
    initial_delay=RETRY_TICK_S,
    when=lambda status, **_: glance(status).retry_pending,
)
@metrics.counted_errors("retry_readiness")
@about_object
async def retry_readiness(spec: kopf.Spec, meta: kopf.Meta, body: kopf.Body, **_: Any) -> None:
    """A verdict that was the operator's own doing (``readiness.retry``) is evaluated again once
    its backoff has passed, as a recheck: Ready stays as it was until the new verdict."""
    rt, gate = runtime.current(), _gate(meta, body)
    async with rt.admission.admitted(), rt.claims.lock(gate.uid):
        obj = await readers.fresh_generation(gate.namespace, gate.name, gate.generation)
        parsed = _valid(spec)
        if obj is None or parsed is None:
            return
        now = dt.datetime.now(dt.UTC)
        retry = await due.retry(parsed, status_of(obj), gate.generation, gate.namespace, now)
        if retry is not None:  # a lost claim: changed meanwhile, the next tick looks again
            await run_round(rt, gate, obj, parsed, "Recheck", retry.observation)


@kopf.daemon(
    GROUP,
    VERSION,
    PLURAL,
    id="watch_release",
    initial_delay=WATCH_INTERVAL_S,
    when=lambda spec, status, **_: (
        bool(spec.get("watch")) and not spec.get("suspend") and glance(status).phase in (*DECIDED, "Running")
    ),
)
async def watch_releases(stopped: kopf.DaemonStopped, **kwargs: Any) -> None:
    """``watch_release`` every ``WATCH_INTERVAL_S`` while the gate exists (``common.every``)."""
    await every(stopped, WATCH_INTERVAL_S, lambda: watch_release(**kwargs))


@metrics.counted_errors("watch_release")
@about_object
async def watch_release(spec: kopf.Spec, meta: kopf.Meta, body: kopf.Body, **_: Any) -> bool:
    """Level-triggered: when ``spec.watch`` shows other than the last evaluation recorded, a new
    release is out: claim a round for it (Ready Unknown) and evaluate it, once; a watch round left
    Running by a failure is taken over the same way. False once the gate is gone."""
    rt, gate = runtime.current(), _gate(meta, body)
    if (lock := rt.claims.lock(gate.uid)).locked():
        return True  # a round of this gate runs in this process now
    async with rt.admission.admitted(), lock:
        found = await readers.fresh(gate.namespace, gate.name)
        obj, parsed = readers.of_generation(found, gate.generation), _valid(spec)
        if obj is None or parsed is None:
            return found is not None  # deleted: False ends the watch; changed: the next tick
        status, running = status_of(obj), rt.claims.running
        release = await due.new_release(parsed, status, gate.generation, gate.namespace, running)
        if release is not None:  # a lost claim: changed meanwhile, the next tick looks again
            await run_round(rt, gate, obj, parsed, "Watch", release.observation)
    return True


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=5.0,
    initial_delay=2.0,
    when=lambda spec, status, **_: (
        bool(spec.get("podReadinessGate")) and glance(status).phase in (*DECIDED, "Invalid")
    ),
)
@metrics.counted_errors("sync_pod_gate")
@about_object
async def sync_pod_gate(
    spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta, patch: kopf.Patch, **_: Any
) -> None:
    """Level-triggered: pods created after the verdict (a rollout) get the gate condition too."""
    try:
        gate = PodReadinessGate.model_validate(spec["podReadinessGate"])
    except ValidationError:
        return  # the change handler has already rejected the spec
    now = read_status(status)
    gated = await podgate.sync_pods(gate, meta["namespace"], condition(now.conditions, "Ready"), utc_now())
    if now.gated_pods != gated:
        patch.status.update(MCPReadinessStatus(gated_pods=gated).to_patch())


def _gate(meta: kopf.Meta, body: kopf.Body) -> Gate:
    namespace, name, uid = str(meta["namespace"]), str(meta["name"]), str(meta["uid"])
    return Gate(namespace, name, uid, int(meta["generation"]), announcer(body))


def _valid(spec: kopf.Spec) -> MCPReadinessSpec | None:
    """The spec, or None for one the change handler has rejected already."""
    try:
        return MCPReadinessSpec.model_validate(spec)
    except ValidationError:
        return None
