"""Bounds in bytes on what the operator copies into status.

Status lives in the object and the object in etcd (1.5 MiB, spec included, and the spec may be
large itself). Rows, findings and history are bounded in count, but one string can be kilobytes
(an address, a URL, a server's error text), so every string copied into status goes through
:func:`clip`, which says where it cut, and a status is built at ever tighter :class:`Bounds`
until it fits its budget (:func:`fit`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

STATUS_BUDGET = 32 * 1024  # bytes of JSON: half of 64 KiB, whatever the spec
MAX_MESSAGE = 1024  # a condition's message, at most
MAX_URL = 2048  # the longest URL a spec may give
MORE = "… ({} more characters)"
MORE_ENTRIES = "…"  # the key that says a map was cut


def clip(text: str, limit: int) -> str:
    """``text`` in at most ``limit`` bytes of UTF-8; a cut text ends saying how many characters
    were cut, so that nobody takes it for the whole."""
    data = text.encode()
    if len(data) <= limit:
        return text
    room = limit - len(MORE.format(len(text)).encode())
    if room < 8:  # too short to say so: a plain cut
        return data[:limit].decode(errors="ignore")
    kept = data[:room].decode(errors="ignore")
    return kept + MORE.format(len(text) - len(kept))


@dataclass(frozen=True)
class Bounds:
    """How much of each kind of string a status keeps: ``text`` for messages and summaries,
    ``field`` for subjects, figures, sources and reasons; ``items`` findings per row, ``entries``
    per map of figures."""

    text: int
    field: int
    items: int
    entries: int


# widest first: a status takes the first that fits its budget
TIERS = (
    Bounds(text=1024, field=256, items=20, entries=32),
    Bounds(text=512, field=128, items=10, entries=16),
    Bounds(text=256, field=96, items=5, entries=16),
    Bounds(text=128, field=64, items=2, entries=8),
    Bounds(text=64, field=40, items=1, entries=8),
)


def clip_map(values: Mapping[str, Any], bounds: Bounds) -> dict[str, str]:
    """A map of figures as strings, keys and values clipped, at most ``bounds.entries`` of them
    (then one more entry, ``…``, says how many were left out)."""
    items = list(values.items())
    out = {clip(str(k), bounds.field): clip(str(v), bounds.field) for k, v in items[: bounds.entries]}
    if len(items) > bounds.entries:
        out[MORE_ENTRIES] = f"{len(items) - bounds.entries} more"
    return out


def clip_strings(value: Any, limit: int) -> Any:
    """Every string in a JSON-like value clipped to ``limit`` bytes (keys too)."""
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, Mapping):
        return {clip(str(k), limit): clip_strings(v, limit) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clip_strings(v, limit) for v in value]
    return value


def json_size(value: Any) -> int:
    """Bytes of ``value`` as JSON, non-ASCII escaped (the most it can take on the wire)."""
    return len(json.dumps(value, separators=(",", ":")).encode())


def fit(build: Callable[[Bounds], T], size: Callable[[T], int], budget: int = STATUS_BUDGET) -> T:
    """The first of ``build(bounds)`` over :data:`TIERS` whose size is within ``budget``; the
    tightest one when none is."""
    built = build(TIERS[0])
    for bounds in TIERS[1:]:
        if size(built) <= budget:
            return built
        built = build(bounds)
    return built
