"""Where the memory forensics get their readings, per level of a result document.

* ``gpu``: the GPUs the load generator's NVML sampler watched (``level.telemetry["memory"]``; on the
  serving host, or with the GPU model server beside it, these are the serving GPUs);
* ``gpu-sampler:NODE``: the serving GPUs of one node, from the node-level sampler the operator
  places there (``level.server_metrics["gpu-sampler:NODE"]["memory"]``);
* ``PROBE:FAMILY``: a memory gauge of a server-metrics endpoint (:data:`MEMORY_GAUGES`): the value
  before the level, the peak of the samples taken during it, and the value after the settle wait
  (``settled``). Without a settle wait the next level's ``before`` stands in for ``after`` in the
  growth check, and no level is judged for a leak.

Where a server also reports its live allocations (:data:`LIVE_ALLOCATION_GAUGES`, e.g. PyTorch's
allocated bytes) and they returned, what its other gauges kept is the allocator's cache
(:func:`explain_caches`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from mcp_bench.diagnose.sources.levels import gauge_series, load_of, probe_deltas, timeline_sum
from mcp_bench.forensics.memory import DEFAULT_TOLERANCE, LevelMemory, Tolerance, assess
from mcp_bench.results.document import LevelResult, ResultDocument
from mcp_bench.results.serving import SAMPLER_PREFIX
from mcp_bench.servermetrics.names import (
    CACHED_BY_ALLOCATOR,
    LIVE_ALLOCATION_GAUGES,
    MEMORY_GAUGES,
    MEMORY_TOTALS,
)


def _sum(values: list[float | None]) -> float | None:
    real = [v for v in values if v is not None and not math.isnan(v)]
    return math.fsum(real) if real else None


def _sampled(level: LevelResult, mem: dict[str, Any]) -> LevelMemory:
    """A level's memory as an NVML sampler keeps it (``memory_around``'s figures)."""
    return LevelMemory(
        level.level_label,
        load_of(level),
        mem.get("before_bytes"),
        mem.get("peak_bytes"),
        mem.get("after_bytes"),
        mem.get("total_bytes"),
    )


def gpu_levels(doc: ResultDocument) -> list[LevelMemory]:
    out = []
    for level in doc.levels:
        mem = level.telemetry.get("memory") if isinstance(level.telemetry, dict) else None
        if isinstance(mem, dict):
            out.append(_sampled(level, mem))
    return out


def sampler_levels(doc: ResultDocument) -> dict[str, list[LevelMemory]]:
    """Per node-level sampler (``gpu-sampler:<node>``), the serving GPUs' memory around each level
    (the same before/peak/settled readings as the load generator's own sampler keeps)."""
    out: dict[str, list[LevelMemory]] = {}
    for level in doc.levels:
        for name, entry in (level.server_metrics or {}).items():
            if not str(name).startswith(SAMPLER_PREFIX) or not isinstance(entry, dict):
                continue
            mem = entry.get("memory") if entry.get("status") == "ok" else None
            if isinstance(mem, dict):
                out.setdefault(str(name), []).append(_sampled(level, mem))
    return out


def _gauge_level(level: LevelResult, delta: dict[str, Any], family: str) -> LevelMemory | None:
    scale = MEMORY_GAUGES[family]
    series = gauge_series(delta, family)
    if not series:
        return None
    before = _sum([s.get("before") for s in series])
    peaks = [before, _sum([s.get("after") for s in series])]
    tl = timeline_sum(delta, family)
    if tl is not None:
        peaks.extend(tl[1])
    real_peaks = [p for p in peaks if p is not None]
    settled = (delta.get("settled") or {}).get("metrics", {}).get(family)
    after = _sum([s.get("value") for s in settled]) if isinstance(settled, list) else None
    if after is None and family in LIVE_ALLOCATION_GAUGES:
        # live allocations have no cache to give back: once the level's requests are done (its end)
        # they are where they will be after a wait
        after = _sum([s.get("after") for s in series])
    total = None
    parts = [
        _sum([s.get("after") for s in gauge_series(delta, name)]) for name in MEMORY_TOTALS.get(family, ())
    ]
    if parts and all(p is not None for p in parts):
        total = math.fsum(p for p in parts if p is not None) * scale
    return LevelMemory(
        level.level_label,
        load_of(level),
        None if before is None else before * scale,
        max(real_peaks) * scale if real_peaks else None,
        None if after is None else after * scale,
        total,
    )


def _settled_from_next(levels: list[LevelMemory]) -> list[LevelMemory]:
    """With a settle wait, the next level's ``before`` was read at its end: it stands in for a
    level with no settled reading of its own (documents from before ``settled`` was recorded)."""
    return [
        replace(m, after=levels[i + 1].before) if m.after is None and i + 1 < len(levels) else m
        for i, m in enumerate(levels)
    ]


def gauge_levels(doc: ResultDocument) -> dict[str, list[LevelMemory]]:
    """Per ``probe:family``, the levels that have that memory gauge."""
    out: dict[str, list[LevelMemory]] = {}
    for level in doc.levels:
        for probe, delta in probe_deltas(level).items():
            for family in MEMORY_GAUGES:
                m = _gauge_level(level, delta, family)
                if m is not None:
                    out.setdefault(f"{probe}:{family}", []).append(m)
    if doc.plan.observe.settle_s > 0:
        out = {name: _settled_from_next(levels) for name, levels in out.items()}
    return out


def _live_returned(report: dict[str, dict[str, Any]], probe: str) -> set[str] | None:
    """Levels after which the probe's live allocations were back at their baseline (None: the
    probe has no live-allocation gauge)."""
    for family in LIVE_ALLOCATION_GAUGES:
        verdict = report.get(f"{probe}:{family}")
        if verdict is not None:
            return {row["level"] for row in verdict["levels"] if row.get("returned") is True}
    return None


def explain_caches(report: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Memory a server kept while its live allocations returned is its allocator's cache: such a
    Leak (and a Growth with live allocations that never grew) becomes ``Cached``, which is reported
    but is not a finding against the server."""
    for name, verdict in report.items():
        probe, _, family = name.rpartition(":")
        if not probe or family not in CACHED_BY_ALLOCATOR:
            continue
        returned = _live_returned(report, probe)
        if not returned:
            continue
        live_grew = any(
            f["kind"] == "Growth"
            for fam in LIVE_ALLOCATION_GAUGES
            for f in report.get(f"{probe}:{fam}", {}).get("findings", [])
        )
        for f in verdict["findings"]:
            if (f["kind"] == "Leak" and f["level"] in returned) or (f["kind"] == "Growth" and not live_grew):
                f["kind"] = "Cached"
                f["summary"] += "; live allocations returned, so this is the allocator's cache"
        if verdict["state"] == "Found" and all(f["kind"] == "Cached" for f in verdict["findings"]):
            verdict["state"] = "NotFound"
    return report


def memory_forensics(doc: ResultDocument, tol: Tolerance = DEFAULT_TOLERANCE) -> dict[str, dict[str, Any]]:
    """Every memory source of the document judged: ``{source: assess(...)}``, caches explained."""
    sources: dict[str, list[LevelMemory]] = {}
    if gpus := gpu_levels(doc):
        sources["gpu"] = gpus
    sources.update(sampler_levels(doc))  # the serving GPUs, sampled on their nodes
    sources.update(gauge_levels(doc))
    return explain_caches({name: assess(levels, tol) for name, levels in sources.items()})
