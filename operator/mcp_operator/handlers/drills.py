"""Handlers for what MCPReadiness drills leave behind: a fault whose revert failed is tried
again until it is reverted (a tick of ``handlers.periodic``), and a deleted gate with a drill,
or with a fault its journal shows open, is let go only once every fault it injected is reverted
(``readiness.drills``). The rounds themselves are ``handlers.readiness``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import kopf

from .. import metrics
from ..api.common import GROUP, VERSION
from ..api.readiness import PLURAL
from ..readiness import drills, runtime
from .common import about_object, announcer


@metrics.counted_errors("retry_reverts")
@about_object
async def retry_failed_reverts(meta: Mapping[str, Any], body: Mapping[str, Any], **_: Any) -> None:
    """A fault whose revert failed is tried again until it is reverted, also when nothing else
    happens to the object (a drill that ended with one, a replay that failed)."""
    where = (str(meta["namespace"]), str(meta["name"]), str(meta["uid"]))
    await drills.retry_reverts(runtime.current(), *where, announcer(body))


@kopf.on.delete(GROUP, VERSION, PLURAL, when=lambda spec, status, **_: drills.holds_finalizer(spec, status))
@metrics.counted_errors("revert_on_delete")
@about_object
async def revert_on_delete(meta: kopf.Meta, status: kopf.Status, body: kopf.Body, **_: Any) -> None:
    """A deleted drill stops at once and every fault it injected is reverted before the
    finalizer lets the object go (also once ``spec.drill`` is gone, while a fault is open); a
    fault that cannot be reverted keeps it (retried) until it is, or until a person sets the
    release annotation, which is announced with what is left."""
    left = await drills.revert_deleted(runtime.current(), meta, status, announcer(body))
    if left is not None:
        raise kopf.TemporaryError(f"not reverted yet: {left}; retrying", delay=10)
