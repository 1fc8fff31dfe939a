"""The run skeleton every engine shares: which levels a plan has, how each is set up, how observers
hear about it, and how the result document is assembled.

The built-in engine and the external ones (Locust, k6) differ only in how a level's load is sent;
keeping the rest here means a plan runs through the same levels, schedule, drain time, progress
reports and document whichever engine sends the load.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime

from mcp_bench.engines.base import RunObserver
from mcp_bench.load.schedule import Schedule, arrival_schedule
from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.document import EngineFingerprint, LevelResult, ResultDocument
from mcp_bench.results.slo import overall
from mcp_bench.search.driver import probe_levels, search_outcome


def level_metas(plan: RunPlan) -> list[LevelMeta]:
    lv = plan.levels
    if lv.rate is not None:
        return [LevelMeta(index=i, mode="open", requested_rate=r) for i, r in enumerate(lv.rate)]
    return [LevelMeta(index=i, mode="closed", concurrency=c) for i, c in enumerate(lv.concurrency or [])]


def level_schedule(plan: RunPlan, meta: LevelMeta) -> Schedule:
    """The arrival instants of an open-loop level (warm-up first), from the plan's arrival model.
    Each level draws from a seed of its own (the plan's seed and the level's index): one seed for
    every level replayed the same draw in each, so consecutive windows of one rate (a drill's
    stage) fell short or over together instead of averaging out."""
    assert meta.requested_rate is not None
    lv, stage = plan.levels, plan.stage
    return arrival_schedule(
        meta.requested_rate,
        lv.arrival,
        burstiness=lv.burstiness,
        seed=None if lv.seed is None else f"{lv.seed}/{meta.index}",
        warmup_s=stage.warmup_s,
        duration_s=stage.duration_s,
        requests=stage.requests,
        ramp_s=lv.ramp_s,
    )


SHARD_SEED_STRIDE = 2**32  # shard k of a run draws from the plan's seed plus k times this


def shard_plan(plan: RunPlan, index: int) -> RunPlan:
    """The plan shard ``index`` of a run runs: the same load, its arrivals a draw of its own (the
    first shard's the plan's). Shards of one seed sent the same instants, so n shards' load came
    in bursts of n requests at once, and each stray of the draw n times over."""
    seed = plan.levels.seed
    if index == 0 or seed is None or not plan.levels.open_loop:
        return plan
    levels = plan.levels.model_copy(update={"seed": seed + index * SHARD_SEED_STRIDE})
    return plan.model_copy(update={"levels": levels})


def drain_s(plan: RunPlan) -> float:
    """How long in-flight requests may finish after the planned time (default: one timeout and a second)."""
    stage = plan.stage
    return stage.drain_timeout_s if stage.drain_timeout_s is not None else plan.request_timeout_s + 1.0


def level_accumulator(plan: RunPlan, meta: LevelMeta, offset_ns: int) -> LevelAccumulator:
    """An empty accumulator for one level; ``offset_ns`` turns record instants into Unix ns."""
    acc = LevelAccumulator(plan.slo, meta.mode == "open", int(plan.levels.late_after_ms * 1e6))
    acc.offset_ns = offset_ns
    return acc


def report_progress(
    plan: RunPlan,
    meta: LevelMeta,
    acc: LevelAccumulator,
    observers: Sequence[RunObserver],
    elapsed_s: float,
) -> None:
    """Tell observers how far the level is: by time or by request count, whichever is further."""
    stage = plan.stage
    total_s = stage.warmup_s + (stage.duration_s or 0.0)
    by_time = elapsed_s / total_s if total_s > 0 else 0.0
    by_count = acc.sent / stage.requests if stage.requests else 0.0
    fraction = min(1.0, max(by_time, by_count))
    for obs in observers:
        obs.progress(meta, fraction, acc.completed, acc.failed)


async def run_levels(
    plan: RunPlan,
    observers: Sequence[RunObserver],
    run_level: Callable[[LevelMeta], Awaitable[LevelResult]],
) -> list[LevelResult]:
    """Run the plan's levels in order with ``run_level``, announcing each to the observers."""
    levels: list[LevelResult] = []
    # a search chooses each next level from the levels run so far
    metas = level_metas(plan) if plan.search is None else probe_levels(plan, levels)
    for meta in metas:
        for obs in observers:
            await obs.level_started(plan, meta)
        result = await run_level(meta)
        for obs in observers:
            await obs.level_finished(plan, result)
        if plan.observe.settle_s > 0:  # no load, so memory the level only borrowed is given back
            await asyncio.sleep(plan.observe.settle_s)
            for obs in observers:
                await obs.level_settled(plan, result)
        levels.append(result)
    return levels


async def finish_run(
    plan: RunPlan,
    observers: Sequence[RunObserver],
    *,
    started: datetime,
    engine: EngineFingerprint,
    levels: list[LevelResult],
    notes: list[str],
) -> ResultDocument:
    """The result document of a finished run (SLO verdict over all levels; a search's: whether some
    load met the SLO), shown to the observers."""
    search = None if plan.search is None else search_outcome(plan, levels)
    doc = ResultDocument(
        started_at=started,
        ended_at=datetime.now(UTC),
        engine=engine,
        plan=plan,
        levels=levels,
        slo_passed=overall(levels) if search is None else search.found,
        notes=notes,
        search=search,
    )
    for obs in observers:
        await obs.run_finished(doc)
    return doc
