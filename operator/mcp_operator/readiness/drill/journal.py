"""The fault journal in ``status.faults``: pure functions over its entries (wire dicts), so the
orchestrator, the delete handler and the start-up replay read and write it the same way. An entry
is written and read through its API model (``FaultRecord``: ``record``).

An entry is written ``Planned`` with its undo data before anything is touched; only then is the
fault applied (``Injected``), and every path ends it ``Reverted`` or, when it was never applied,
``Skipped``. ``RevertFailed`` is no end: it stays open and is retried until it is reverted, or
until a person releases it explicitly (``RELEASE_ANNOTATION``, on deletion, with an event).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from mcp_common.tolerant import tolerant

from ...api.drill import FaultPhase, FaultRecord
from ...conditions import set_condition
from ...redact import redact_text

# entries that may still be breaking something: a failed revert is open too, and is retried on
# every path (the drill's own end, a restart's replay, the periodic retry, deletion)
OPEN_PHASES = ("Planned", "Injected", "RevertFailed")
ENDED_PHASES = ("Reverted", "Skipped")
Journal = list[dict[str, Any]]
# set to "true" on an MCPReadiness being deleted: let it go although a fault could not be
# reverted (the person takes the cluster's repair over; a Warning event names what is left)
RELEASE_ANNOTATION = "mcp2026.io/release-unreverted-faults"


def record(entry: Mapping[str, Any]) -> FaultRecord:
    """An entry through its model (tolerant of what an older operator wrote)."""
    return tolerant(FaultRecord, entry)


def _readable(entry: Mapping[str, Any]) -> FaultRecord | None:
    """``record``, or None for an entry without a phase the model knows (nothing to act on)."""
    try:
        return record(entry)
    except ValidationError:
        return None


def _wire(entry: FaultRecord) -> dict[str, Any]:
    """An entry as status holds it: the fields it was given, nothing else."""
    return entry.model_dump(by_alias=True, exclude_unset=True, exclude_none=True, mode="json")


def planned(
    journal: Journal, *, fault_id: str, stage: str, kind: str, target: str, undo: Mapping[str, Any], now: str
) -> Journal:
    entry = FaultRecord(
        id=fault_id,
        stage=stage,
        kind=kind,
        target=target,
        phase="Planned",
        undo=json.dumps(undo, sort_keys=True),
        planned_at=now,
    )
    return [*journal, _wire(entry)]


def skipped(journal: Journal, *, fault_id: str, stage: str, kind: str, message: str, now: str) -> Journal:
    entry = FaultRecord(
        id=fault_id,
        stage=stage,
        kind=kind,
        target="",
        phase="Skipped",
        planned_at=now,
        message=redact_text(message),
    )
    return [*journal, _wire(entry)]


def updated(
    journal: Journal,
    fault_id: str,
    *,
    phase: FaultPhase,
    message: str | None = None,
    injected_at: str | None = None,
    reverted_at: str | None = None,
    revert_tries: int | None = None,
) -> Journal:
    """The entry in this phase, with what is given; its message redacted (an error may quote a
    URL or a header), as the journal is kept in status, read by whoever may read the object."""

    def update(wire: dict[str, Any], entry: FaultRecord) -> dict[str, Any]:
        entry = entry.model_copy()
        entry.phase = phase
        if message is not None:
            entry.message = redact_text(message)
        if injected_at is not None:
            entry.injected_at = injected_at
        if reverted_at is not None:
            entry.reverted_at = reverted_at
        if revert_tries is not None:
            entry.revert_tries = revert_tries
        return {**wire, **_wire(entry)}

    read = [(e, _readable(e)) for e in journal]
    return [update(e, entry) if entry is not None and entry.id == fault_id else e for e, entry in read]


def _phase(entry: Mapping[str, Any]) -> str | None:
    read = _readable(entry)
    return None if read is None else read.phase


def open_entries(journal: Journal) -> Journal:
    """Entries that may have touched the cluster and are not known to be undone."""
    return [e for e in journal if _phase(e) in OPEN_PHASES]


def undo_of(entry: FaultRecord) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(entry.undo or "{}")
    return data


def all_reverted(journal: Journal) -> bool:
    return all(_phase(e) in ENDED_PHASES for e in journal)


def not_reverted(journal: Journal) -> Journal:
    """Entries not known to be undone: still open, or their revert failed."""
    return [e for e in journal if _phase(e) not in ENDED_PHASES]


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
    named = ", ".join(_named(e) for e in left[:8])
    more = f" and {len(left) - 8} more" if len(left) > 8 else ""
    message = f"not reverted: {named}{more}; see status.faults"
    return set_condition(conditions, "FaultsReverted", False, "RevertFailed", message, generation, now)


def _named(entry: Mapping[str, Any]) -> str:
    read = _readable(entry)
    if read is None:
        return "an entry without a phase"
    return f"{read.kind} {read.target or read.id} ({read.phase})"
