"""Exactly one evaluation per spec generation (and per due recheck), even when kopf hands the
handler an older body again.

Before a round starts, a marker (generation, a fresh id, this operator instance, and for a gate
with ``spec.watch`` the fingerprint of the release it judges) is written into
``status.evaluation`` with the object's resourceVersion as a precondition; the decision whether to
run reads the object fresh from the API, never the body the event carried. A marker of this
instance whose round is still running means "in progress"; a marker of another instance, or of
this one whose round is no longer running, was left by a crash and may be taken over.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from .. import kube
from ..api.common import GROUP, VERSION
from ..api.readiness import DECIDED_PHASES, PLURAL, MCPReadinessStatus

INSTANCE = uuid.uuid4().hex[:12]  # this operator process
FINAL_PHASES = (*DECIDED_PHASES, "Invalid", "Suspended")


@dataclass(frozen=True)
class Marker:
    generation: int
    id: str
    instance: str
    started_at: str
    fingerprint: str | None = None  # what spec.watch showed when the round was claimed

    def to_wire(self) -> dict[str, Any]:
        return {
            "generation": self.generation,
            "id": self.id,
            "instance": self.instance,
            "startedAt": self.started_at,
            "fingerprint": self.fingerprint,  # null removes an earlier round's in a merge patch
        }


def new_marker(generation: int, now: str, fingerprint: str | None = None) -> Marker:
    return Marker(generation, uuid.uuid4().hex[:12], INSTANCE, now, fingerprint)


class Claims:
    """The rounds this process is running now, and one lock per object."""

    def __init__(self) -> None:
        self.running: set[str] = set()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def lock(self, uid: str) -> asyncio.Lock:
        lock = self._locks.get(uid)
        if lock is None:
            lock = asyncio.Lock()
            self._locks[uid] = lock
        return lock


def skip_reason(status: MCPReadinessStatus, generation: int, running: set[str]) -> str | None:
    """Why a change handler must not evaluate, judged on the fresh status; None: claim and run."""
    if status.evaluation is not None and status.evaluation.id in running:
        return "InProgress"
    if status.observed_generation == generation and status.phase in FINAL_PHASES:
        return "AlreadyEvaluated"
    return None


def orphaned_watch_round(status: MCPReadinessStatus, generation: int, running: set[str]) -> bool:
    """A watch round of this generation still marked Running that no task here runs: it failed
    before its verdict (a change handler's round is retried by kopf itself)."""
    marker = status.evaluation
    return (
        status.phase == "Running"
        and status.release is not None
        and status.release.trigger == "Watch"
        and marker is not None
        and marker.generation == generation
        and marker.id not in running
    )


async def write_claim(obj: Mapping[str, Any], fields: dict[str, Any]) -> bool:
    """Write the marker (and progress) only if nobody changed the object since we read it:
    False when the API server refused the write as a conflict (409)."""
    meta = obj["metadata"]
    body = {"metadata": {"resourceVersion": meta["resourceVersion"]}, "status": fields}
    try:
        await kube.call(
            kube.custom().patch_namespaced_custom_object_status,
            GROUP,
            VERSION,
            meta["namespace"],
            PLURAL,
            meta["name"],
            body,
        )
    except ApiException as exc:
        if exc.status == 409:
            return False
        raise
    return True
