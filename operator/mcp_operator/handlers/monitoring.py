"""What the metrics say about objects that are gone: a deleted MCPReadiness takes its
``mcp_operator_readiness_ready`` series with it, so the gate-failing alert never pages for a
gate nobody has any more. (An event handler: no finalizer, nothing written to the object.)"""

from __future__ import annotations

import contextlib
from typing import Any

import kopf

from .. import metrics
from ..api.common import GROUP, VERSION
from ..api.readiness import PLURAL
from .common import about_object


def _deleted(type: str | None, **_: Any) -> bool:
    return type == "DELETED"


# only for deletions: kopf would otherwise call (and log) it on every status write
@kopf.on.event(GROUP, VERSION, PLURAL, when=_deleted)
@about_object
async def forget_deleted_gate(type: str | None, meta: kopf.Meta, **_: Any) -> None:
    if type == "DELETED":
        with contextlib.suppress(KeyError):  # never evaluated by this process
            metrics.READY.remove(meta.get("namespace"), meta.get("name"))
