"""GPU-memory forensics: peak per level, return to baseline, growth across repeats, fragmentation.

The input is one memory source's readings per level (:class:`LevelMemory`): before the level, its
peak during the level, and after the settle wait that follows it (``observe.settle_s``: no load, so
memory that the level only borrowed is given back). Three findings, each with its figures:

* **Leak**: memory did not return within the tolerance of the level's baseline after the settle;
* **Growth**: across three or more identical levels (the same concurrency or rate) the settled
  memory rose by more than the tolerance, never falling back: the usual shape of a slow leak
  or a cache without a bound;
* **Fragmentation**: from the PyTorch caching allocator's snapshot, memory reserved far beyond
  what is allocated, or free space split into many small blocks (:func:`allocator_fragmentation`).

Pure functions: the sources (NVML through the telemetry observer, a server's memory gauge through
the server-metrics observer) are read in :mod:`mcp_bench.forensics.sources`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import linear_regression
from typing import Any, Literal

MIB = float(2**20)

FindingKind = Literal["Leak", "Growth", "Fragmentation", "Cached"]


@dataclass(frozen=True)
class Tolerance:
    """How much memory may stay behind and still count as returned: the larger of an absolute
    amount and a share of what the level borrowed (its peak over its baseline)."""

    absolute_bytes: float = 64 * MIB
    share_of_rise: float = 0.10
    # allocator: reserved over allocated, and normalised entropy of the free blocks, that are findings
    reserved_over_allocated: float = 1.5
    free_entropy: float = 0.8

    def allowed(self, rise: float) -> float:
        return max(self.absolute_bytes, self.share_of_rise * max(rise, 0.0))


DEFAULT_TOLERANCE = Tolerance()


@dataclass(frozen=True)
class LevelMemory:
    """One source's memory around one level, in bytes (None: not read)."""

    level: str
    load: float  # concurrency or requested rate: levels with equal load are repeats
    before: float | None
    peak: float | None
    after: float | None  # after the settle wait; None without one
    total: float | None = None


@dataclass(frozen=True)
class MemoryFinding:
    kind: FindingKind
    level: str | None
    summary: str
    values: dict[str, float]


def _mib(v: float) -> str:
    return f"{v / MIB:,.1f} MiB"


def level_row(m: LevelMemory, tol: Tolerance) -> dict[str, Any]:
    """The level's figures: peak (and its share of the total), what it borrowed, what it kept."""
    row: dict[str, Any] = {
        "level": m.level,
        "before_bytes": m.before,
        "peak_bytes": m.peak,
        "after_bytes": m.after,
    }
    if m.peak is not None and m.total:
        row["peak_percent"] = 100.0 * m.peak / m.total
    if m.before is not None and m.peak is not None:
        row["rise_bytes"] = max(m.peak - m.before, 0.0)
    if m.before is not None and m.after is not None:
        kept = m.after - m.before
        row["retained_bytes"] = kept
        row["returned"] = kept <= tol.allowed(row.get("rise_bytes", 0.0))
    else:
        row["returned"] = None
    return row


def leaks(rows: Sequence[Mapping[str, Any]], tol: Tolerance) -> list[MemoryFinding]:
    """Levels after whose settle wait memory stayed above the baseline by more than allowed."""
    out = []
    for row in rows:
        if row.get("returned") is False:
            kept, rise = float(row["retained_bytes"]), float(row.get("rise_bytes", 0.0))
            out.append(
                MemoryFinding(
                    "Leak",
                    str(row["level"]),
                    f"{_mib(kept)} still held after the settle wait (allowed {_mib(tol.allowed(rise))})",
                    {"retained_bytes": kept, "rise_bytes": rise, "allowed_bytes": tol.allowed(rise)},
                )
            )
    return out


def growth(levels: Sequence[LevelMemory], tol: Tolerance) -> list[MemoryFinding]:
    """Repeated identical levels whose settled memory climbed and never came back down.

    The settled reading is ``after`` where there is a settle wait, else the next repeat's
    ``before``. Found when it rose by more than the tolerance from the first repeat to the last
    and no repeat fell below the first by more than the tolerance (noise, not a trend)."""
    by_load: dict[float, list[LevelMemory]] = {}
    for m in levels:
        by_load.setdefault(m.load, []).append(m)
    out = []
    for load, group in by_load.items():
        settled = [m.after if m.after is not None else m.before for m in group]
        points = [(i, v) for i, v in enumerate(settled) if v is not None]
        if len(points) < 3:
            continue
        first, last = points[0][1], points[-1][1]
        rise = last - first
        dips = min(v for _, v in points) < first - tol.absolute_bytes
        if rise > tol.absolute_bytes and not dips:
            slope = linear_regression([float(i) for i, _ in points], [v for _, v in points]).slope
            out.append(
                MemoryFinding(
                    "Growth",
                    group[-1].level,
                    f"settled memory rose {_mib(rise)} over {len(points)} identical levels (load {load:g}): "
                    f"{_mib(slope)} per repeat",
                    {"rise_bytes": rise, "per_repeat_bytes": slope, "repeats": float(len(points))},
                )
            )
    return out


def assess(levels: Sequence[LevelMemory], tol: Tolerance = DEFAULT_TOLERANCE) -> dict[str, Any]:
    """One source's verdict: rows per level and findings; ``NoData`` when no level has a reading."""
    rows = [level_row(m, tol) for m in levels]
    if not any(m.peak is not None or m.before is not None for m in levels):
        return {"state": "NoData", "levels": rows, "findings": []}
    findings = [*leaks(rows, tol), *growth(levels, tol)]
    return {
        "state": "Found" if findings else "NotFound",
        "levels": rows,
        "findings": [f.__dict__ for f in findings],
        "settled": any(m.after is not None for m in levels),
    }


def _segments(snapshot: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    if isinstance(snapshot, Mapping):
        return list(snapshot.get("segments", []))
    return list(snapshot)


def allocator_fragmentation(
    snapshot: Mapping[str, Any] | Sequence[Mapping[str, Any]], tol: Tolerance = DEFAULT_TOLERANCE
) -> dict[str, Any]:
    """The PyTorch caching allocator's state from its memory snapshot (``torch.cuda.memory_snapshot()``
    or ``torch.cuda.memory._snapshot()``): reserved and allocated bytes, and how free space is split.

    ``free_entropy`` is the Shannon entropy of the free blocks' sizes as shares of all free bytes,
    normalised by its maximum (log of the block count): 0 when free space is one block, 1 when it is
    many blocks of equal size, which no large allocation can use without a new segment."""
    reserved = allocated = 0.0
    free: list[float] = []
    for seg in _segments(snapshot):
        reserved += float(seg.get("total_size", 0))
        blocks = seg.get("blocks", [])
        allocated += float(
            seg.get(
                "allocated_size",
                sum(b.get("size", 0) for b in blocks if b.get("state") == "active_allocated"),
            )
        )
        free.extend(float(b["size"]) for b in blocks if b.get("state") == "inactive" and b.get("size"))
    free_bytes = math.fsum(free)
    entropy = 0.0
    if free_bytes > 0:
        entropy = -math.fsum((s / free_bytes) * math.log(s / free_bytes) for s in free)
    norm = entropy / math.log(len(free)) if len(free) > 1 else 0.0
    out: dict[str, Any] = {
        "reserved_bytes": reserved,
        "allocated_bytes": allocated,
        "reserved_over_allocated": reserved / allocated if allocated > 0 else None,
        "free_blocks": len(free),
        "free_bytes": free_bytes,
        "largest_free_bytes": max(free, default=0.0),
        "free_entropy": norm,
    }
    ratio = out["reserved_over_allocated"]
    found = (ratio is not None and ratio >= tol.reserved_over_allocated) or (
        len(free) > 1 and norm >= tol.free_entropy and free_bytes >= tol.absolute_bytes
    )
    out["state"] = "Found" if found else "NotFound"
    if found:
        out["summary"] = (
            f"{_mib(reserved)} reserved for {_mib(allocated)} allocated; {_mib(free_bytes)} free in "
            f"{len(free)} blocks (largest {_mib(out['largest_free_bytes'])}, entropy {norm:.2f})"
        )
    return out
