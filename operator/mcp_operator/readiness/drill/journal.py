"""The fault journal in ``status.faults``: pure functions over its entries (wire dicts), so the
orchestrator, the delete handler and the start-up replay read and write it the same way.

An entry is written ``Planned`` with its undo data before anything is touched; only then is the
fault applied (``Injected``), and every path ends it ``Reverted``, ``RevertFailed`` or, when it
was never applied, ``Skipped``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

OPEN_PHASES = ("Planned", "Injected")
Journal = list[dict[str, Any]]


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
        "message": message,
    }
    return [*journal, entry]


def updated(journal: Journal, fault_id: str, **fields: Any) -> Journal:
    return [{**e, **fields} if e["id"] == fault_id else e for e in journal]


def open_entries(journal: Journal) -> Journal:
    """Entries that may have touched the cluster and are not known to be undone."""
    return [e for e in journal if e.get("phase") in OPEN_PHASES]


def undo_of(entry: Mapping[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(entry.get("undo") or "{}")
    return data


def all_reverted(journal: Journal) -> bool:
    return all(e.get("phase") in ("Reverted", "Skipped") for e in journal)
