"""What earlier looks of one caller saw, so a later look can judge what a single answer cannot;
kept by the caller (the operator in the gate's status, ``--wait`` across its polls), never in
process memory alone: a restart, a failover or a one-shot gate would forget it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

MAX_REMEMBERED = 500  # proxies (and stale proxy/types) kept; the oldest sighting goes first
WIRE_BUDGET = 8 * 1024  # bytes of JSON the memory may take in a gate's status


@dataclass
class XdsMemory:
    """``stale_since``: proxy/type -> when this caller first saw it stale (sources that give no
    time). ``proxies_seen``: proxy -> the last time a source reported it (a proxy seen before and
    reported by none now has disappeared). ``expected_version`` and ``version_since``: the
    version the spec expects and when the caller first saw it expected; staleness against it
    counts from then, not from the proxy's old ACK."""

    stale_since: dict[str, float] = field(default_factory=dict)
    proxies_seen: dict[str, float] = field(default_factory=dict)
    expected_version: str | None = None
    version_since: float | None = None

    def expect(self, version: str | None, now: float) -> float | None:
        """When ``version`` became expected (``now`` if it is new to this memory); None
        without an expected version."""
        if version is None:
            return None
        if version != self.expected_version or self.version_since is None:
            self.expected_version, self.version_since = version, now
        return self.version_since

    def seen(self, proxies: set[str], now: float) -> None:
        self.proxies_seen.update(dict.fromkeys(proxies, now))
        _bound(self.proxies_seen)
        _bound(self.stale_since)

    def to_wire(self, budget_bytes: int = WIRE_BUDGET) -> dict[str, Any]:
        """camelCase, as the gate's ``status.xdsMemory`` holds it: lists, which a merge patch
        replaces whole (a map's dropped keys would stay behind), the newest sightings kept
        while they fit ``budget_bytes`` of JSON (status is bounded; a fleet larger than that is
        better named by a selector)."""
        wire: dict[str, Any] = {"proxiesSeen": [], "staleSince": []}
        if self.expected_version is not None and self.version_since is not None:
            wire["expectedVersion"] = self.expected_version
            wire["expectedVersionSince"] = self.version_since
        size = len(json.dumps(wire))
        for key, name, stamps in (
            ("staleSince", "subject", self.stale_since),
            ("proxiesSeen", "nodeId", self.proxies_seen),
        ):
            for subject, at in sorted(stamps.items(), key=lambda item: -item[1]):
                entry = {name: subject, "at": at}
                size += len(json.dumps(entry)) + 2
                if size > budget_bytes:
                    return wire
                wire[key].append(entry)
        return wire

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any] | None) -> XdsMemory:
        """The memory a status holds (an empty one for none, or for what is not a mapping)."""
        if not isinstance(wire, Mapping):
            return cls()
        since = wire.get("expectedVersionSince")
        return cls(
            stale_since=_stamps(wire.get("staleSince"), "subject"),
            proxies_seen=_stamps(wire.get("proxiesSeen"), "nodeId"),
            expected_version=str(wire["expectedVersion"]) if wire.get("expectedVersion") else None,
            version_since=float(since) if isinstance(since, int | float) else None,
        )


def _stamps(entries: Any, key: str) -> dict[str, float]:
    if not isinstance(entries, list):
        return {}
    return {
        str(e[key]): float(e["at"])
        for e in entries
        if isinstance(e, Mapping) and e.get(key) and isinstance(e.get("at"), int | float)
    }


def _bound(stamps: dict[str, float]) -> None:
    excess = len(stamps) - MAX_REMEMBERED
    if excess > 0:
        for key in sorted(stamps, key=stamps.__getitem__)[:excess]:
            del stamps[key]
