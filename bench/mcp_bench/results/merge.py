"""Merge shard results level by level, exactly: histograms are added, never percentiles averaged.

What the shards observed besides their requests is merged into bounded summaries, so a report
does not grow with shards x their documents: GPU telemetry by :mod:`mcp_bench.results.gpumerge`,
and server metrics as one delta per probe (every shard watched the same server over the same
level, so one shard's usable delta is the server's whole view of it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.consistency import merge_figures
from mcp_bench.results.document import LevelResult, ResultDocument, ShardWindow, Unavailable
from mcp_bench.results.gpumerge import merge_telemetry
from mcp_bench.results.slo import overall

# A merged level is a cluster-wide figure only when the shards measured it at the same time:
# every shard's window must cover at least this share of the union of all windows.
MIN_OVERLAP = 0.9
# Levels whose windows differ by less than this in all (start spread plus end spread) are never
# flagged: below it the ratio measures start-up jitter and clocks, not shards that ran apart.
OVERLAP_GRACE_NS = 100_000_000


class MergeError(ValueError):
    """Shards that do not describe the same run cannot be merged."""


def shard_windows(shards: Sequence[LevelResult], indices: Sequence[int | None]) -> list[ShardWindow]:
    """Each input level's measured window; an input that is itself a merge contributes the
    windows it recorded, so merging merged documents keeps one window per shard."""
    windows: list[ShardWindow] = []
    for lv, index in zip(shards, indices, strict=True):
        if lv.shard_windows:
            windows.extend(lv.shard_windows)
        elif lv.first_start_unix_ns is not None and lv.last_end_unix_ns is not None:
            windows.append(
                ShardWindow(
                    shard=index,
                    start_unix_ns=lv.first_start_unix_ns,
                    end_unix_ns=lv.last_end_unix_ns,
                    start_at_unix_ns=lv.start_at_unix_ns,
                )
            )
    return windows


def window_overlap(windows: Sequence[ShardWindow]) -> float | None:
    """The time every window shares over the time any covers (1.0: all ran together; 0: some
    never met); None for fewer than two windows."""
    if len(windows) < 2:
        return None
    union = max(w.end_unix_ns for w in windows) - min(w.start_unix_ns for w in windows)
    common = min(w.end_unix_ns for w in windows) - max(w.start_unix_ns for w in windows)
    if union <= 0:
        return 1.0
    return max(0.0, common / union)


def concurrency_flag(windows: Sequence[ShardWindow], overlap: float | None, min_overlap: float) -> str | None:
    """Why a merged level is not a cluster-wide figure, or None when its shards ran together."""
    if overlap is None or overlap >= min_overlap:
        return None
    starts = [w.start_unix_ns for w in windows]
    ends = [w.end_unix_ns for w in windows]
    if (max(starts) - min(starts)) + (max(ends) - min(ends)) < OVERLAP_GRACE_NS:
        return None
    spread_ms = (max(starts) - min(starts)) / 1e6
    return (
        f"shard windows overlap {overlap:.0%} < {min_overlap:.0%} "
        f"(starts {spread_ms:.0f} ms apart): not a cluster-wide figure"
    )


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


def _merge_level(
    shards: Sequence[LevelResult],
    doc: ResultDocument,
    indices: Sequence[int | None] = (),
    min_overlap: float = MIN_OVERLAP,
) -> LevelResult:
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
    if plan.consistency is not None:  # counts added, distances pooled, judged again
        merged.consistency = merge_figures([lv.consistency for lv in shards], plan.consistency)
    windows = shard_windows(shards, list(indices) or [None] * len(shards))
    if len(windows) > 1:
        merged.shard_windows = windows
        merged.overlap = window_overlap(windows)
        merged.not_concurrent = concurrency_flag(windows, merged.overlap, min_overlap)
    return merged


def merge_documents(docs: Sequence[ResultDocument], *, min_overlap: float = MIN_OVERLAP) -> ResultDocument:
    """One document whose levels hold the exact union of every shard's requests.

    Concurrency and requested rate add up (each shard ran its share); throughput is recomputed
    from the earliest start and the latest end; percentiles come from the merged histograms.
    Each level records every shard's window and their overlap, and is flagged
    (``not_concurrent``) where the shards did not run together for ``min_overlap`` of it.
    """
    if not docs:
        raise MergeError("nothing to merge")
    base = docs[0]
    if base.plan.search is not None and len(docs) > 1:
        # each shard chose its next probe from what it measured itself: levels of one index differ
        raise MergeError("a saturation search runs in one shard; its probes cannot be merged with others")
    n_levels = len(base.levels)
    for d in docs[1:]:
        if len(d.levels) != n_levels:
            raise MergeError(f"shards have different level counts ({n_levels} and {len(d.levels)})")
        if d.plan.levels.open_loop != base.plan.levels.open_loop:
            raise MergeError("cannot merge open-loop and closed-loop shards")
    indices = [d.shard_index for d in docs]
    levels = [_merge_level([d.levels[i] for d in docs], base, indices, min_overlap) for i in range(n_levels)]
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
    if base.search is not None:  # one shard's search, as it ran it
        merged.search = base.search
        merged.slo_passed = base.search.found
    return merged
