"""Has Argo CD finished deploying the expected revision, up to the gate's own sync wave?

Reads the Application's status the way Argo CD writes it: ``status.sync`` (status, revision),
``status.health.status``, ``status.operationState.phase`` and ``status.resources[]`` (sync
and health per resource, ``syncWave`` omitted when 0). When the gate runs inside the sync
(a resource of wave N), the operation is still Running and later waves are not applied yet;
that is expected once every resource at or before wave N is Synced and Healthy.

Argo CD 3 no longer writes each resource's health into the Application by default
(``status.resourceHealthSource: appTree``; it keeps it in its resource tree, which only its API
serves). A resource without ``health`` then proves nothing by itself: its health is what this
sync's result says, ``operationState.syncResult.resources[].hookPhase`` ``Succeeded``, which Argo
CD sets for a resource of a multi-step sync (waves or hooks) once it saw it Healthy, or at once
for a kind with no health. While the sync runs, any other resource is Unknown (pending). Once it
has ended, a single-step sync leaves every resource at ``Running``: the Application's own health,
which covers every resource, is then the evidence, and it is checked next.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..verdict import Finding, Verdict
from .assessment import Assessment, names
from .spec import FULL_SHA, ArgoApplicationRef

WAVE_ANNOTATION = "argocd.argoproj.io/sync-wave"
HEALTH_IN_TREE = "appTree"  # status.resourceHealthSource when resource health is not inline
STILL_RUNNING = ("Running", "Terminating")  # operation phases of a sync that has not ended
GROUP, VERSION, PLURAL = "argoproj.io", "v1alpha1", "applications"


def _get(obj: Mapping[str, Any], *path: str) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def resource_wave(resource: Mapping[str, Any]) -> int:
    """``syncWave`` (int64, omitted when 0), else the sync-wave annotation if reported."""
    raw = resource.get("syncWave")
    if raw is None:
        raw = (resource.get("annotations") or {}).get(WAVE_ANNOTATION)
    try:
        return int(raw) if raw is not None else 0
    except (TypeError, ValueError):
        return 0


def resource_id(resource: Mapping[str, Any]) -> str:
    return f"{resource.get('kind', '?')}/{resource.get('name', '?')}"


def expected_revision(app: Mapping[str, Any], ref: ArgoApplicationRef) -> tuple[str | None, str]:
    """The revision to require, and where it came from."""
    if ref.expected_revision:
        return ref.expected_revision, "spec"
    target = _get(app, "spec", "source", "targetRevision")
    if isinstance(target, str) and FULL_SHA.match(target.lower()):
        return target, "spec.source.targetRevision"
    synced = _get(app, "status", "operationState", "syncResult", "revision")
    if isinstance(synced, str) and synced:
        return synced, "status.operationState.syncResult.revision"
    return None, "none"


@dataclass(frozen=True)
class WaveState:
    """Resources at or before the gate's wave that are not yet Synced and Healthy."""

    pending: list[tuple[int, Mapping[str, Any]]]

    @property
    def first_wave(self) -> int | None:
        return min(w for w, _ in self.pending) if self.pending else None


def _resource_key(resource: Mapping[str, Any]) -> tuple[str, str, str, str]:
    return (
        str(resource.get("group") or ""),
        str(resource.get("kind") or ""),
        str(resource.get("namespace") or ""),
        str(resource.get("name") or ""),
    )


def synced_healthy(app: Mapping[str, Any]) -> set[tuple[str, str, str, str]]:
    """Resources this sync saw through: ``hookPhase`` Succeeded in its result (non-hook ones)."""
    return {
        _resource_key(r)
        for r in _get(app, "status", "operationState", "syncResult", "resources") or []
        if r.get("hookPhase") == "Succeeded" and not r.get("hookType")
    }


def resource_health(
    res: Mapping[str, Any], health_in_tree: bool, seen_healthy: set[Any], sync_running: bool
) -> str | None:
    """``health.status`` as written; absent, None (a kind with no health check), unless Argo CD
    keeps health in its resource tree: then Healthy if this sync saw it so, else Unknown while
    the sync runs and None (the Application's health decides) once it has ended."""
    health = _get(res, "health", "status")
    if health is not None or not health_in_tree:
        return str(health) if health is not None else None
    if _resource_key(res) in seen_healthy:
        return "Healthy"
    return "Unknown" if sync_running else None


def waves_up_to(app: Mapping[str, Any], ref: ArgoApplicationRef) -> WaveState:
    pending: list[tuple[int, Mapping[str, Any]]] = []
    health_in_tree = _get(app, "status", "resourceHealthSource") == HEALTH_IN_TREE
    seen_healthy = synced_healthy(app)
    sync_running = _get(app, "status", "operationState", "phase") in STILL_RUNNING
    for res in _get(app, "status", "resources") or []:
        if res.get("hook") or resource_id(res) == ref.gate_resource:
            continue
        wave = resource_wave(res)
        if ref.gate_wave is not None and wave > ref.gate_wave:
            continue
        health = resource_health(res, health_in_tree, seen_healthy, sync_running)
        if res.get("status") != "Synced" or health not in (None, "Healthy"):
            pending.append((wave, {**res, "health": {"status": health}}))
    pending.sort(key=lambda item: item[0])
    return WaveState(pending)


def assess_application(app: Mapping[str, Any], ref: ArgoApplicationRef, source: str) -> Assessment:
    sync = _get(app, "status", "sync", "status")
    revision = _get(app, "status", "sync", "revision")
    health = _get(app, "status", "health", "status")
    phase = _get(app, "status", "operationState", "phase")
    want, want_from = expected_revision(app, ref)
    observed = {
        "syncStatus": str(sync),
        "syncRevision": str(revision),
        "healthStatus": str(health),
        "operationPhase": str(phase),
    }
    if ref.gate_wave is not None:
        observed["gateWave"] = str(ref.gate_wave)
    if _get(app, "status", "resourceHealthSource") == HEALTH_IN_TREE:
        observed["resourceHealth"] = "from the sync result (Argo CD keeps it in its resource tree)"

    def part(
        outcome: Verdict, reason: str, message: str, findings: list[Finding] | None = None
    ) -> Assessment:
        return Assessment(outcome, reason, f"Application {ref.name}: {message}", findings or [], observed)

    if sync is None or phase is None:
        missing = "status.sync" if sync is None else "status.operationState"
        return part(Verdict.INCONCLUSIVE, "ApplicationStatusMissing", f"no {missing} reported yet")
    waves = waves_up_to(app, ref)
    findings = [
        Finding(
            resource_id(res),
            Verdict.INCONCLUSIVE if phase in STILL_RUNNING else Verdict.FAIL,
            "ResourceNotSynced" if res.get("status") != "Synced" else "ResourceNotHealthy",
            f"wave {wave}: {res.get('status')}/{_get(res, 'health', 'status')}",
            "Synced/Healthy",
            source,
        )
        for wave, res in waves.pending
    ]
    if phase in ("Failed", "Error"):
        message = _get(app, "status", "operationState", "message") or ""
        return part(Verdict.FAIL, "SyncOperationFailed", f"sync {phase}: {message}".rstrip(": "), findings)
    if waves.pending:
        pending_ids = names([resource_id(r) for _, r in waves.pending])
        if phase in STILL_RUNNING:
            return part(
                Verdict.INCONCLUSIVE,
                "SyncWaveRunning",
                f"sync wave {waves.first_wave} is still running ({pending_ids})",
                findings,
            )
        scope = "resources" if ref.gate_wave is None else f"resources at or before wave {ref.gate_wave}"
        return part(
            Verdict.FAIL, "SyncWaveIncomplete", f"{scope} are not Synced and Healthy: {pending_ids}", findings
        )
    # every resource up to the gate's wave is done; the rest must hold for the whole app,
    # except what a sync still running for later waves (and the gate itself) explains
    in_sync = phase == "Running" and ref.gate_wave is not None
    if phase not in ("Succeeded", "Running") or (phase == "Running" and not in_sync):
        return part(
            Verdict.INCONCLUSIVE,
            "SyncWaveRunning" if phase == "Running" else "SyncNotFinished",
            f"sync operation is {phase}",
        )
    if sync != "Synced" and not in_sync:
        return part(Verdict.FAIL, "ApplicationOutOfSync", f"sync status is {sync}")
    if health != "Healthy" and not (in_sync and health == "Progressing"):
        outcome = Verdict.FAIL if health in ("Degraded", "Missing") else Verdict.INCONCLUSIVE
        return part(outcome, "ApplicationNotHealthy", f"health is {health}")
    if want is None:
        return part(
            Verdict.INCONCLUSIVE,
            "ExpectedRevisionUnknown",
            "no expected revision given and none can be resolved from the Application",
        )
    observed["expectedRevision"] = f"{want} ({want_from})"
    if revision != want:
        return part(Verdict.FAIL, "RevisionMismatch", f"synced revision {revision}, expected {want}")
    done = "waves up to the gate's are done" if in_sync else f"sync {phase}"
    return part(Verdict.PASS, "ApplicationSynced", f"Synced to {revision}, {health}, {done}")
