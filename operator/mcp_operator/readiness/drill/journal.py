"""The fault journal in ``status.faults``: pure functions over its entries (wire dicts), so the
orchestrator, the delete handler and the start-up replay read and write it the same way.

An entry is written ``Planned`` with its undo data before anything is touched; only then is the
fault applied (``Injected``), and every path ends it ``Reverted`` or, when it was never applied,
``Skipped``. ``RevertFailed`` is no end: it stays open and is retried until it is reverted, or
until a person releases it explicitly (``RELEASE_ANNOTATION``, on deletion, with an event).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ...conditions import set_condition
from ...redact import redact_text

# entries that may still be breaking something: a failed revert is open too, and is retried on
# every path (the drill's own end, a restart's replay, the periodic retry, deletion)
OPEN_PHASES = ("Planned", "Injected", "RevertFailed")
Journal = list[dict[str, Any]]
# set to "true" on an MCPReadiness being deleted: let it go although a fault could not be
# reverted (the person takes the cluster's repair over; a Warning event names what is left)
RELEASE_ANNOTATION = "mcp2026.io/release-unreverted-faults"


def planned(
    journal: Journal, *, fault_id: str, stage: str, kind: str, target: str, undo: Mapping[str, Any], now: str
) -> Journal:
    entry = {
        "id": fault_id,
        "stage": stage,
        "kind": kind,
        "target": target,
        "phase": "Planned",
        "undo": json.dumps(undo, sort_keys=True),
        "plannedAt": now,
    }
    return [*journal, entry]


def skipped(journal: Journal, *, fault_id: str, stage: str, kind: str, message: str, now: str) -> Journal:
    entry = {
        "id": fault_id,
        "stage": stage,
        "kind": kind,
        "target": "",
        "phase": "Skipped",
        "plannedAt": now,
        "message": redact_text(message),
    }
    return [*journal, entry]


def updated(journal: Journal, fault_id: str, **fields: Any) -> Journal:
    """The entry with these fields; its message redacted (an error may quote a URL or a header),
    as the journal is kept in status, read by whoever may read the object."""
    if isinstance(fields.get("message"), str):
        fields["message"] = redact_text(fields["message"])
    return [{**e, **fields} if e["id"] == fault_id else e for e in journal]


def open_entries(journal: Journal) -> Journal:
    """Entries that may have touched the cluster and are not known to be undone."""
    return [e for e in journal if e.get("phase") in OPEN_PHASES]


def undo_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(entry.get("undo") or "{}")
    return data


def all_reverted(journal: Journal) -> bool:
    return all(e.get("phase") in ("Reverted", "Skipped") for e in journal)


def not_reverted(journal: Journal) -> Journal:
    """Entries not known to be undone: still open, or their revert failed."""
    return [e for e in journal if e.get("phase") not in ("Reverted", "Skipped")]


def revert_condition(
    conditions: list[dict[str, Any]], journal: Journal, generation: int, now: str
) -> list[dict[str, Any]]:
    """FaultsReverted as the journal shows it, for a drill that ended outside its own run (aborted,
    interrupted, failed): True when every entry is Reverted or Skipped, else False naming the
    faults left, so a reader need not search ``status.faults``."""
    left = not_reverted(journal)
    if not left:
        message = "every injected fault is reverted" if journal else "no fault was injected"
        return set_condition(conditions, "FaultsReverted", True, "Reverted", message, generation, now)
    named = ", ".join(
        f"{e.get('kind')} {e.get('target') or e.get('id')} ({e.get('phase')})" for e in left[:8]
    )
    more = f" and {len(left) - 8} more" if len(left) > 8 else ""
    message = f"not reverted: {named}{more}; see status.faults"
    return set_condition(conditions, "FaultsReverted", False, "RevertFailed", message, generation, now)
