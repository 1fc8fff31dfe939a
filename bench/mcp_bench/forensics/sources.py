"""Where the memory forensics get their readings, per level of a result document.

* ``gpu``: the GPUs the load generator's NVML sampler watched (``level.telemetry["memory"]``; on the
  serving host, or with the GPU model server beside it, these are the serving GPUs);
* ``PROBE:FAMILY``: a memory gauge of a server-metrics endpoint (:data:`MEMORY_GAUGES`): the value
  before the level, the peak of the samples taken during it, and the value after the settle wait
  (``settled``). Without a settle wait the next level's ``before`` stands in for ``after`` in the
  growth check, and no level is judged for a leak.
"""

from __future__ import annotations

import math
from typing import Any

from mcp_bench.diagnose.sources.levels import gauge_series, load_of, probe_deltas, timeline_sum
from mcp_bench.forensics.memory import DEFAULT_TOLERANCE, LevelMemory, Tolerance, assess
from mcp_bench.results.document import LevelResult, ResultDocument
from mcp_bench.servermetrics.names import MEMORY_GAUGES, MEMORY_TOTALS


def _sum(values: list[float | None]) -> float | None:
    real = [v for v in values if v is not None and not math.isnan(v)]
    return math.fsum(real) if real else None


def gpu_levels(doc: ResultDocument) -> list[LevelMemory]:
    out = []
    for level in doc.levels:
        mem = level.telemetry.get("memory") if isinstance(level.telemetry, dict) else None
        if isinstance(mem, dict):
            out.append(
                LevelMemory(
                    level.level_label,
                    load_of(level),
                    mem.get("before_bytes"),
                    mem.get("peak_bytes"),
                    mem.get("after_bytes"),
                    mem.get("total_bytes"),
                )
            )
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


def gauge_levels(doc: ResultDocument) -> dict[str, list[LevelMemory]]:
    """Per ``probe:family``, the levels that have that memory gauge."""
    out: dict[str, list[LevelMemory]] = {}
    for level in doc.levels:
        for probe, delta in probe_deltas(level).items():
            for family in MEMORY_GAUGES:
                m = _gauge_level(level, delta, family)
                if m is not None:
                    out.setdefault(f"{probe}:{family}", []).append(m)
    return out


def memory_forensics(doc: ResultDocument, tol: Tolerance = DEFAULT_TOLERANCE) -> dict[str, dict[str, Any]]:
    """Every memory source of the document judged: ``{source: assess(...)}``."""
    sources: dict[str, list[LevelMemory]] = {}
    if gpus := gpu_levels(doc):
        sources["gpu"] = gpus
    sources.update(gauge_levels(doc))
    return {name: assess(levels, tol) for name, levels in sources.items()}
