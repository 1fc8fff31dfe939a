"""One evaluation per release: what a gate's ``spec.watch`` observes, when a rollout has settled,
and the record of what an evaluation judged.

A release is what the watched objects show: the hash of the workload's ``.spec.template`` and
the Argo CD Application's ``status.sync.revision``; their digest is the *fingerprint*. A timer
compares the fingerprint with the one the last evaluation recorded (``status.release``) and
starts a new evaluation when it differs. Every evaluation of a watching gate first waits until
the release has settled (the Deployment rolled its current template out to every replica; the
Application is ``Synced``), so the checks judge the pods of the release the verdict is recorded
for, never the previous release's pods during a rollout.

Kept free of kopf and of the client: the objects come in through small async readers that
answer a dict, ``None`` for "not found", or raise ``ReadError``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from mcp_checks.api import CheckOutcome, Verdict

from ..api.readiness import MCPReadinessSpec, MCPReadinessStatus, ReleaseWatch
from ..bounded import clip

ROW = "rollout"
POLL_S = 1.0
Obj = Mapping[str, Any]
Reader = Callable[[str, str], Awaitable[Obj | None]]  # (namespace, name) -> object, None if absent
Trigger = Literal["Spec", "Watch", "Recheck"]
MAX_REVISION = 512  # an Argo CD revision is read from its Application, whose size we do not bound


class ReadError(Exception):
    """A watched object could not be read (other than not found): RBAC, the API server."""


class Abandoned(Exception):
    """The gate was deleted or its spec changed while the evaluation waited for the rollout."""


@dataclass(frozen=True)
class Readers:
    deployment: Reader
    application: Reader


@dataclass(frozen=True)
class Rollout:
    state: Literal["Settled", "Progressing", "Failed", "Missing"]
    message: str
    replicas: str = ""


@dataclass(frozen=True)
class Observation:
    """What ``spec.watch`` shows now."""

    workload: str | None = None  # Kind/name
    template_hash: str | None = None
    rollout: Rollout | None = None
    application: str | None = None  # namespace/name
    application_found: bool = False
    application_revision: str | None = None
    application_synced: bool = False
    error: str | None = None

    @property
    def fingerprint(self) -> str | None:
        """Digest of the watched state; None when it could not be read (then nothing starts)."""
        if self.error is not None:
            return None
        parts = {
            "workload": self.workload,
            "template": self.template_hash,
            "application": self.application,
            "revision": self.application_revision,
        }
        return digest(parts)


def digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def template_hash(deployment: Obj) -> str:
    """sha256 of the pod template as the API server holds it (defaults filled in), 16 digits."""
    return digest((deployment.get("spec") or {}).get("template") or {})


def rollout_state(deployment: Obj | None) -> Rollout:
    """Whether the Deployment runs its current template on every replica and nothing older."""
    if deployment is None:
        return Rollout("Missing", "the Deployment does not exist")
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    generation = int((deployment.get("metadata") or {}).get("generation") or 0)
    wanted = int(spec["replicas"]) if spec.get("replicas") is not None else 1
    total = int(status.get("replicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    replicas = f"{updated}/{wanted} updated, {available} available, {total} total"
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return Rollout(
                "Failed", f"the rollout exceeded its progress deadline: {cond.get('message')}", replicas
            )
    if int(status.get("observedGeneration") or 0) < generation:
        return Rollout("Progressing", f"the controller has not yet seen generation {generation}", replicas)
    if updated < wanted:
        return Rollout("Progressing", f"{updated} of {wanted} replicas run the current template", replicas)
    if total > updated:
        return Rollout("Progressing", f"{total - updated} replicas of an older template still run", replicas)
    if available < updated:
        return Rollout("Progressing", f"{available} of {updated} updated replicas are available", replicas)
    return Rollout("Settled", f"{updated} of {wanted} replicas run the current template", replicas)


async def observe(watch: ReleaseWatch, namespace: str, readers: Readers) -> Observation:
    """Read what the watch names, once."""
    fields: dict[str, Any] = {}
    try:
        if watch.workload is not None:
            deployment = await readers.deployment(namespace, watch.workload.name)
            fields.update(
                workload=f"{watch.workload.kind}/{watch.workload.name}",
                template_hash=None if deployment is None else template_hash(deployment),
                rollout=rollout_state(deployment),
            )
        if watch.application is not None:
            ref = watch.application
            app = await readers.application(ref.namespace, ref.name)
            sync = ((app or {}).get("status") or {}).get("sync") or {}
            fields.update(
                application=f"{ref.namespace}/{ref.name}",
                application_found=app is not None,
                application_revision=sync.get("revision") or None,
                application_synced=sync.get("status") == "Synced",
            )
    except ReadError as exc:
        fields["error"] = str(exc)
    return Observation(**fields)


def _row(
    observation: Observation, verdict: Verdict, reason: str, message: str, waited_s: float
) -> CheckOutcome:
    observed = {"waited": f"{waited_s:.1f}s"}
    if observation.workload is not None:
        observed["workload"] = observation.workload
        observed["templateHash"] = observation.template_hash or "none"
        if observation.rollout is not None and observation.rollout.replicas:
            observed["replicas"] = observation.rollout.replicas
    if observation.application is not None:
        observed["application"] = observation.application
        observed["applicationRevision"] = observation.application_revision or "none"
    source = ", ".join(s for s in (observation.workload, observation.application) if s)
    return CheckOutcome(ROW, verdict, reason, message, observed, source=source, duration_s=waited_s)


def settled_row(observation: Observation, waited_s: float) -> CheckOutcome | None:
    """The rollout row once the answer is known; None while the release is still rolling out."""
    if observation.error is not None:
        return _row(observation, Verdict.INCONCLUSIVE, "WatchUnreadable", observation.error, waited_s)
    rollout = observation.rollout
    if rollout is not None:
        if rollout.state == "Missing":
            message = f"{observation.workload} does not exist, so no release of it can be judged"
            return _row(observation, Verdict.INCONCLUSIVE, "WorkloadNotFound", message, waited_s)
        if rollout.state == "Failed":
            return _row(observation, Verdict.FAIL, "RolloutFailed", rollout.message, waited_s)
    if observation.application is not None and not observation.application_found:
        message = f"Application {observation.application} does not exist"
        return _row(observation, Verdict.INCONCLUSIVE, "ApplicationNotFound", message, waited_s)
    if (rollout is not None and rollout.state != "Settled") or (
        observation.application is not None and not observation.application_synced
    ):
        return None
    parts = []
    if rollout is not None:
        parts.append(f"{observation.workload}: {rollout.message} ({observation.template_hash})")
    if observation.application is not None:
        parts.append(f"Application {observation.application} Synced at {observation.application_revision}")
    return _row(observation, Verdict.PASS, "RolloutSettled", "; ".join(parts), waited_s)


def _unsettled_row(observation: Observation, waited_s: float) -> CheckOutcome:
    rollout = observation.rollout
    if rollout is not None and rollout.state != "Settled":
        message = f"{observation.workload} had not settled after {waited_s:.0f}s: {rollout.message}"
        return _row(observation, Verdict.INCONCLUSIVE, "RolloutNotSettled", message, waited_s)
    message = f"Application {observation.application} was not Synced after {waited_s:.0f}s"
    return _row(observation, Verdict.INCONCLUSIVE, "ApplicationNotSynced", message, waited_s)


async def settle(
    watch: ReleaseWatch,
    namespace: str,
    readers: Readers,
    still_wanted: Callable[[], Awaitable[bool]],
    *,
    poll_s: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[Observation, CheckOutcome]:
    """Wait (at most ``watch.settleTimeoutSeconds``) until the release has settled or cannot;
    returns what was observed last and the rollout row. Raises ``Abandoned`` when
    ``still_wanted`` says the gate went away or changed meanwhile."""
    started = clock()
    while True:
        observation = await observe(watch, namespace, readers)
        waited = clock() - started
        row = settled_row(observation, waited)
        if row is not None:
            return observation, row
        if waited >= watch.settle_timeout_seconds:
            return observation, _unsettled_row(observation, waited)
        await asyncio.sleep(POLL_S if poll_s is None else poll_s)
        if not await still_wanted():
            raise Abandoned()


def precise_now() -> str:
    """RFC 3339 in UTC to the millisecond: when an evaluation started, which a gate command
    started a moment later must be able to tell apart."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def release_record(
    spec: MCPReadinessSpec,
    observation: Observation | None,
    trigger: Trigger,
    generation: int,
    started_at: str,
) -> dict[str, Any]:
    """``status.release``: what this evaluation judges. The revision is ``spec.release``, or else
    the watched Application's synced revision. Every key is present (None where there is no
    value), so that a merge patch removes what an earlier evaluation recorded."""
    record: dict[str, Any] = {
        "revision": spec.release,
        "workload": None,
        "workloadTemplateHash": None,
        "applicationRevision": None,
        "fingerprint": None,
        "trigger": trigger,
        "generation": generation,
        "startedAt": started_at,
        "completedAt": None,
    }
    if observation is not None:
        revision = observation.application_revision
        record["workload"] = observation.workload
        record["workloadTemplateHash"] = observation.template_hash
        record["applicationRevision"] = None if revision is None else clip(revision, MAX_REVISION)
        record["fingerprint"] = observation.fingerprint
        if record["revision"] is None:
            record["revision"] = record["applicationRevision"]
    return record


def recorded_fingerprint(status: MCPReadinessStatus) -> str | None:
    """The fingerprint of the evaluation that ran (or was claimed) last."""
    release = None if status.release is None else status.release.fingerprint
    return release or (None if status.evaluation is None else status.evaluation.fingerprint)
