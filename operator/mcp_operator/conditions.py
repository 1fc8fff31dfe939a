"""Kubernetes-convention conditions, built as pure functions over status dictionaries; a
message or reason is clipped to its bound (``bounded``), whatever it quotes, and a message is
redacted (``redact``), whatever URL it quotes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from mcp_checks.api import utc_now
from mcp_common import rfc3339

from .api.common import Condition
from .bounded import MAX_MESSAGE, clip
from .redact import redact_text

MAX_REASON = 128

__all__ = ["condition", "parse_time", "set_condition", "utc_now"]


def parse_time(value: object) -> dt.datetime | None:
    """An RFC 3339 time as status and events write it (``utc_now``), or None when it is none."""
    try:
        return rfc3339.parse(str(value), zone_required=False)
    except ValueError:
        return None


def set_condition(
    conditions: list[dict[str, Any]],
    type_: str,
    status: bool | None,
    reason: str,
    message: str,
    generation: int | None,
    now: str | None = None,
) -> list[dict[str, Any]]:
    """Return a new list with one condition replaced; lastTransitionTime moves only when status does."""
    wire = "Unknown" if status is None else ("True" if status else "False")
    previous = next((c for c in conditions if c.get("type") == type_), None)
    stamp = now or utc_now()
    if previous is not None and previous.get("status") == wire:
        stamp = previous.get("lastTransitionTime", stamp)
    updated: dict[str, Any] = {
        "type": type_,
        "status": wire,
        "reason": clip(reason, MAX_REASON),
        "message": clip(redact_text(message), MAX_MESSAGE),
        "lastTransitionTime": stamp,
    }
    if generation is not None:
        updated["observedGeneration"] = generation
    return [c for c in conditions if c.get("type") != type_] + [updated]


C = TypeVar("C", Mapping[str, Any], dict[str, Any], Condition)


def condition(conditions: Iterable[C], type_: str) -> C | None:
    """The condition of this type, in either form a status holds it: the wire's dicts (what a
    handler patches) or the API model's ``Condition`` (what a status read through its model has)."""
    return next((c for c in conditions if _type_of(c) == type_), None)


def _type_of(cond: Mapping[str, Any] | Condition) -> object:
    return cond.type if isinstance(cond, Condition) else cond.get("type")
