"""Merge shard results level by level, exactly: histograms are added, never percentiles averaged.

What the shards observed besides their requests is merged into bounded summaries, so a report
does not grow with shards x their documents: GPU telemetry by :mod:`mcp_bench.telemetry.merge`,
and server metrics as one delta per probe (every shard watched the same server over the same
level, so one shard's usable delta is the server's whole view of it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.document import LevelResult, ResultDocument, Unavailable
from mcp_bench.results.slo import overall
from mcp_bench.telemetry.merge import merge_telemetry


class MergeError(ValueError):
    """Shards that do not describe the same run cannot be merged."""


def _usable(delta: Any) -> bool:
    return isinstance(delta, dict) and delta.get("status") == "ok"


def merge_server_metrics(parts: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One delta per probe: the first shard's usable one (``status`` ok), else the first seen."""
    present = [p for p in parts if isinstance(p, dict)]
    if not present:
        return None
    merged: dict[str, Any] = {}
    for part in present:
        for name, delta in part.items():
            if name not in merged or (_usable(delta) and not _usable(merged[name])):
                merged[name] = delta
    return merged


def _telemetry(parts: Sequence[dict[str, Any] | Unavailable]) -> dict[str, Any] | Unavailable:
    merged = merge_telemetry(parts)
    return merged if merged is not None else "unavailable"


def _merge_level(shards: Sequence[LevelResult], doc: ResultDocument) -> LevelResult:
    first = shards[0]
    plan = doc.plan
    acc = LevelAccumulator(plan.slo, first.mode == "open", int(plan.levels.late_after_ms * 1e6))
    acc.shards = 0
    for lv in shards:
        if (lv.mode, lv.index) != (first.mode, first.index):
            raise MergeError(f"level {first.index}: shards disagree on the level ({lv.level_label})")
        acc.merge_result(lv)
        acc.shards += lv.shards
    conc = [lv.concurrency for lv in shards if lv.concurrency is not None]
    rates = [lv.requested_rate for lv in shards if lv.requested_rate is not None]
    meta = LevelMeta(
        index=first.index,
        mode=first.mode,
        concurrency=sum(conc) if conc else None,
        requested_rate=sum(rates) if rates else None,
    )
    reasons = sorted({lv.stop_reason for lv in shards if lv.stop_reason})
    merged = acc.to_result(meta, stop_reason=",".join(reasons))
    merged.telemetry = _telemetry([lv.telemetry for lv in shards])
    merged.server_metrics = merge_server_metrics([lv.server_metrics for lv in shards])
    stab = [lv.stability for lv in shards if lv.stability is not None]
    brk = [lv.breaker for lv in shards if lv.breaker is not None]
    merged.stability = {"shards": stab} if stab else None
    merged.breaker = {"shards": brk} if brk else None
    loads = [w for lv in shards for w in lv.workers or []]
    bound = [b for lv in shards for b in lv.client_bound or []]
    merged.workers = loads or None
    merged.client_bound = bound or None
    return merged


def merge_documents(docs: Sequence[ResultDocument]) -> ResultDocument:
    """One document whose levels hold the exact union of every shard's requests.

    Concurrency and requested rate add up (each shard ran its share); throughput is recomputed
    from the earliest start and the latest end; percentiles come from the merged histograms.
    """
    if not docs:
        raise MergeError("nothing to merge")
    base = docs[0]
    n_levels = len(base.levels)
    for d in docs[1:]:
        if len(d.levels) != n_levels:
            raise MergeError(f"shards have different level counts ({n_levels} and {len(d.levels)})")
        if d.plan.levels.open_loop != base.plan.levels.open_loop:
            raise MergeError("cannot merge open-loop and closed-loop shards")
    levels = [_merge_level([d.levels[i] for d in docs], base) for i in range(n_levels)]
    merged = ResultDocument(
        started_at=min(d.started_at for d in docs),
        ended_at=max(d.ended_at for d in docs),
        engine=base.engine,
        plan=base.plan,
        levels=levels,
        slo_passed=overall(levels),
        telemetry=_telemetry([d.telemetry for d in docs]),
        server_metrics=merge_server_metrics([d.server_metrics for d in docs]),
        shards=sum(d.shards for d in docs),
        notes=[n for d in docs for n in d.notes],
    )
    return merged
