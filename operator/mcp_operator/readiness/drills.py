"""What a reconcile does about drills (``spec.drill``) around the rounds of ``readiness.round``:
stop a drill of an older generation and replay a journal left open, hold a new drill while an
older fault is still in place, run a drill's round as a task of its own (so an abort, a spec
change or a deletion reaches it at once) whose failure becomes the verdict, end a drill that was
aborted or lost, and revert everything before a deleted gate is let go.

No kopf here: events go through the ``announce`` callable the handler hands in, and a handler
turns "not yet" answers into kopf's retries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Mapping
from typing import Any

from .. import kube, metrics
from ..api.readiness import PLURAL, MCPReadinessSpec, MCPReadinessStatus
from ..api.readinessstatus import glance, read_status, status_of
from ..conditions import set_condition, utc_now
from .claim import Marker, skip_reason
from .drill import journal
from .drill.run import Announce, Drill, DrillContext, DrillOutcome, StageLoader, replay_journal
from .drill.shardload import ShardedStageLoader
from .drill.summary import ended_stages
from .readers import fresh
from .runtime import Runtime

log = logging.getLogger(__name__)
REVERT_RETRY_INTERVAL_S = 15.0  # a fault whose revert failed is tried again this often


class Held(Exception):
    """A new drill waits: an earlier drill's fault is not reverted yet (retried later)."""


async def write_status(namespace: str, name: str, fields: dict[str, Any]) -> None:
    await kube.patch_status(PLURAL, namespace, name, fields)


def named(entries: list[dict[str, Any]]) -> str:
    """Journal entries as a person reads them: kind and target, the first eight."""
    shown = [journal.record(e) for e in entries[:8]]
    return ", ".join(f"{e.kind} {e.target or e.id}" for e in shown)


def judged_and_settled(rt: Runtime, uid: str, generation: int, status: Mapping[str, Any]) -> bool:
    """The status kopf handed a change handler already shows ``generation`` judged, with no fault
    open and no drill of another generation running here: what the fresh read would find as well
    (a newer generation comes with an event of its own), so it is not made. An operator that
    restarts over 1,000 decided gates reads none of them again."""
    found = read_status(status)
    running = rt.drills.get(uid)
    return (
        skip_reason(found, generation, set()) == "AlreadyEvaluated"
        and not journal.open_entries(found.fault_rows())
        and (running is None or running.generation == generation)
    )


async def settle(rt: Runtime, generation: int, obj: Mapping[str, Any], announce: Announce) -> dict[str, Any]:
    """Before anything else: a drill of an older generation is stopped (it reverts its faults),
    and a journal that shows faults still open with no drill running here (the operator died
    mid-drill) is replayed. Returns the status as it is afterwards."""
    meta = obj["metadata"]
    uid = str(meta["uid"])
    status: dict[str, Any] = dict(obj.get("status") or {})
    running = rt.drills.get(uid)
    if running is not None and running.generation != generation:
        await rt.drills.stop(uid)
        refreshed = await fresh(meta["namespace"], meta["name"])
        status = dict((refreshed or {}).get("status") or {})
    found = read_status(status)
    rows = found.fault_rows()
    if rt.drills.get(uid) is None and (left := journal.open_entries(rows)):
        before = {journal.record(e).id for e in left}
        faults = await replay_journal(rows, kube.api_client())
        conds = journal.revert_condition(found.condition_rows(), faults, int(meta["generation"]), utc_now())
        await write_status(meta["namespace"], meta["name"], {"faults": faults, "conditions": conds})
        status.update(faults=faults, conditions=conds)
        for entry in map(journal.record, faults):
            if entry.id in before and entry.phase == "Reverted":
                announce(False, "FaultReverted", f"{entry.kind} {entry.id}: {entry.message}")
    return status


async def retry_reverts(rt: Runtime, namespace: str, name: str, uid: str, announce: Announce) -> None:
    """A fault whose revert failed is tried again (``settle`` on the gate as it is now)."""
    async with rt.claims.lock(uid):
        obj = await fresh(namespace, name)
        if obj is not None:
            await settle(rt, int(obj["metadata"]["generation"]), obj, announce)


def holds_finalizer(spec: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether a deleted gate must go through ``revert_deleted`` first: while it has a drill, and
    while its journal shows a fault not known to be undone, whatever the spec says now (a drill
    removed from the spec after its revert failed would otherwise let the gate go, the fault in
    place and no FaultsAbandoned event). A filter of every event: it reads the glance only."""
    if spec.get("drill"):
        return True
    return bool(journal.open_entries([fault.to_patch() for fault in glance(status).faults]))


async def revert_deleted(
    rt: Runtime, meta: Mapping[str, Any], status: Mapping[str, Any], announce: Announce
) -> str | None:
    """A deleted gate's drill stops at once and every fault it injected is reverted. Returns
    what is still not reverted (the finalizer keeps the object and this is retried), or None:
    all reverted, or released by a person's annotation (announced with what is left)."""
    await rt.drills.stop(str(meta["uid"]))
    now = await fresh(meta["namespace"], meta["name"])
    faults = (status_of(now) if now is not None else read_status(status)).fault_rows()
    if not journal.open_entries(faults):
        return None
    faults = await replay_journal(faults, kube.api_client())
    await write_status(meta["namespace"], meta["name"], {"faults": faults})
    left = journal.not_reverted(faults)
    if not left:
        return None
    annotations = (now or {}).get("metadata", {}).get("annotations") or meta.get("annotations") or {}
    if str(annotations.get(journal.RELEASE_ANNOTATION, "")).lower() == "true":
        message = f"released by {journal.RELEASE_ANNOTATION}; not reverted: {named(left)}"
        announce(True, "FaultsAbandoned", message)
        return None
    announce(True, "RevertFailed", f"not reverted yet, retrying: {named(left)}")
    return named(left)


def interrupted(status: MCPReadinessStatus, generation: int) -> bool:
    """A drill of this generation claimed by a process that no longer runs it."""
    marker = status.evaluation
    return status.phase == "Running" and marker is not None and marker.generation == generation


def ended_status(
    status: MCPReadinessStatus, generation: int, release: Mapping[str, Any], now: str, *, aborted: bool
) -> tuple[dict[str, Any], str, str]:
    """An aborted drill, or one the operator lost mid-run: its faults are already reverted
    (``settle``); the run proved nothing, so it is Inconclusive and not Ready. Its
    FaultsReverted condition says what the journal shows, also when nothing was left to replay.
    Returns the status fields, and the reason and message of the warning to post."""
    reason = "DrillAborted" if aborted else "DrillInterrupted"
    message = (
        "spec.drill.abort is true: the drill stopped and its faults were reverted"
        if aborted
        else "the operator stopped during the drill; its faults were reverted; change the spec to run it "
        "again"
    )
    conds = set_condition(status.condition_rows(), "Ready", False, reason, message, generation, now)
    # Complete: the run is over (kubectl wait --for=condition=Complete returns); Ready says how
    conds = set_condition(conds, "Complete", True, reason, message, generation, now)
    conds = journal.revert_condition(conds, status.fault_rows(), generation, now)
    fields = {
        "observedGeneration": generation,
        "phase": "Aborted" if aborted else "Inconclusive",
        "verdict": "Inconclusive",
        "completedAt": now,
        "conditions": conds,
        "stages": ended_stages(status.stage_rows()),
        "release": {**release, "completedAt": now},
    }
    return fields, reason, message


async def hold(
    namespace: str,
    name: str,
    status: MCPReadinessStatus,
    generation: int,
    left: list[dict[str, Any]],
    announce: Announce,
) -> None:
    """No new fault while an old one is in place, and no new journal over an open entry: Ready
    says why the drill waits (the change handler retries later)."""
    message = f"not started: an earlier drill's faults are not reverted yet ({named(left)}); retrying"
    conds = set_condition(
        status.condition_rows(), "Ready", False, "FaultsNotReverted", message, generation, utc_now()
    )
    await write_status(namespace, name, {"conditions": conds})
    announce(True, "FaultsNotReverted", message)


async def run(
    rt: Runtime, parsed: MCPReadinessSpec, target: str, namespace: str, name: str, announce: Announce
) -> DrillOutcome:
    """The drill itself (``drill.run``): stages, load and faults, every fault reverted."""
    assert parsed.drill is not None
    probe = parsed.checks.health_probe
    context = DrillContext(
        namespace=namespace,
        base_url=target,
        health_path=probe.path if probe is not None else "/health",
        api=kube.api_client(),
        write_status=lambda fields: write_status(namespace, name, fields),
        announce=announce,
    )
    loads: StageLoader = rt.loads
    if parsed.drill.shards is not None:
        gate = await fresh(namespace, name)
        if gate is None:
            raise RuntimeError(f"MCPReadiness {namespace}/{name} is gone")
        loads = ShardedStageLoader(
            gate=name,
            gate_uid=str(gate["metadata"]["uid"]),
            namespace=namespace,
            shards=parsed.drill.shards,
            api=context.api,
        )
    return await Drill(parsed.drill, context, loads).run()


def start(
    rt: Runtime,
    uid: str,
    generation: int,
    marker: Marker,
    evaluation: Coroutine[Any, Any, None],
    where: tuple[str, str],
    announce: Announce,
) -> None:
    """Run a drill's round as a task of its own, registered as the gate's running drill."""
    rt.claims.running.add(marker.id)  # until the task's own bookkeeping takes over
    task = asyncio.create_task(_task(rt, evaluation, where, generation, marker, announce))
    rt.drills.start(uid, generation, task)


async def _task(
    rt: Runtime,
    evaluation: Coroutine[Any, Any, None],
    where: tuple[str, str],
    generation: int,
    marker: Marker,
    announce: Announce,
) -> None:
    """A drill's evaluation as a task: a failure is logged, counted and written as the verdict
    (the drill has already reverted its faults), never lost with the task."""
    namespace, name = where
    try:
        await evaluation
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        log.exception("drill of %s/%s failed", namespace, name)
        metrics.ERRORS.labels("drill").inc()
        message = f"the drill failed: {type(exc).__name__}: {exc}"[:1000]
        now_status = status_of((await fresh(namespace, name)) or {})
        announce(True, "DrillFailed", message)
        await write_status(namespace, name, failed_status(now_status, generation, message, utc_now()))
    finally:
        rt.claims.running.discard(marker.id)


def failed_status(status: MCPReadinessStatus, generation: int, message: str, now: str) -> dict[str, Any]:
    """A drill whose round raised: not Ready, over (Complete), Error, its stages ended."""
    conds = set_condition(status.condition_rows(), "Ready", False, "DrillFailed", message, generation, now)
    conds = set_condition(conds, "Complete", True, "DrillFailed", message, generation, now)
    conds = journal.revert_condition(conds, status.fault_rows(), generation, now)
    return {
        "stages": ended_stages(status.stage_rows()),
        "phase": "Failed",
        "verdict": "Error",
        "observedGeneration": generation,
        "completedAt": now,
        "release": {"completedAt": now},  # merged into the record the claim wrote
        "conditions": conds,
    }
