"""What every fault kind shares: the refusal, the planned fault, the API objects it talks to,
and reading the undo data back.

Faults take the caller's ApiClient (not ``kube.core()``), so the orchestrator decides which
credentials break things; the blocking client runs through ``kube.call`` in a thread.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

T = TypeVar("T")
MAX_NAMES_SHOWN = 10


class FaultRefused(Exception):
    """The fault was not applied: ``reason`` is CamelCase, ``str(exc)`` says why.

    From ``plan_fault`` nothing was touched. From ``inject_fault`` the part done before the
    refusal is named in the message; ``revert_fault`` undoes it (it is safe on a half injection).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class PlannedFault:
    """A fault with its targets chosen. ``undo`` is JSON-able and holds everything inject and
    revert need, so ``PlannedFault(record.kind, record.target, json.loads(record.undo))`` is the
    same fault again after a restart."""

    kind: str
    target: str
    undo: dict[str, Any]


@dataclass(frozen=True)
class Apis:
    """The API groups faults use, bound to one ApiClient."""

    core: client.CoreV1Api
    apps: client.AppsV1Api
    policy: client.PolicyV1Api
    authz: client.AuthorizationV1Api


def apis(api: client.ApiClient) -> Apis:
    return Apis(
        client.CoreV1Api(api), client.AppsV1Api(api), client.PolicyV1Api(api), client.AuthorizationV1Api(api)
    )


def undo_field(undo: dict[str, Any], key: str, kind: type[T]) -> T:
    """A field of the undo data, checked: a journal entry written by another version, or
    edited by hand, fails with its name rather than somewhere inside a patch."""
    value = undo.get(key)
    if not isinstance(value, kind):
        raise ValueError(f"undo data: {key!r} should be {kind.__name__}, is {value!r}")
    return value


def names_shown(names: list[str]) -> str:
    """A list of names for people, bounded: the journal row stays short."""
    shown = ",".join(names[:MAX_NAMES_SHOWN])
    rest = len(names) - MAX_NAMES_SHOWN
    return f"{shown},… (+{rest} more)" if rest > 0 else shown


def api_message(exc: ApiException) -> str:
    """The API server's own message from a Status body, else the HTTP reason."""
    try:
        body = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or exc.reason or exc.status)


def undo_optional(undo: dict[str, Any], key: str) -> str | None:
    """A string field of the undo data that may be absent (None: there was no value before)."""
    value = undo.get(key)
    if value is not None and not isinstance(value, str):
        raise ValueError(f"undo data: {key!r} should be a string or null, is {value!r}")
    return value
