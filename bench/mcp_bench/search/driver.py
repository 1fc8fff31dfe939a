"""The search as levels an engine runs, and the outcome a result document records.

``probe_levels`` is the engines' level source when a plan has a search: it reads the levels
already run (the run loop appends each one) and yields the next probe, so every engine, the worker
pool and every observer run a search exactly as they run a sweep. ``search_outcome`` replays the
policy over the finished levels, so a document's outcome can always be recomputed from its levels.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult, PercentileTable
from mcp_bench.results.slo import latency_metric
from mcp_bench.saturation import SearchOutcome, SearchProbe, SearchSpec
from mcp_bench.search.knee import Point, find_knee
from mcp_bench.search.policy import Next, Stop, Tried, bracket, next_step


def _spec(plan: RunPlan) -> SearchSpec:
    if plan.search is None:
        raise ValueError("the plan has no search")
    return plan.search


def _start(plan: RunPlan) -> float:
    lv = plan.levels
    return float(lv.rate[0]) if lv.rate is not None else float((lv.concurrency or [1])[0])


def load_of(level: LevelResult) -> float:
    value = level.requested_rate if level.mode == "open" else level.concurrency
    return float(value or 0)


def tried(levels: Sequence[LevelResult]) -> list[Tried]:
    """What the policy sees of a level: its load, and whether every SLO held (no data never holds)."""
    return [Tried(load_of(lv), lv.slo.passed is True) for lv in levels]


def decide(plan: RunPlan, levels: Sequence[LevelResult]) -> Next | Stop:
    return next_step(_spec(plan), _start(plan), tried(levels), integral=not plan.levels.open_loop)


def probe_levels(plan: RunPlan, levels: Sequence[LevelResult]) -> Iterator[LevelMeta]:
    """The next probe each time it is asked, from ``levels`` as they stand then."""
    while True:
        step = decide(plan, levels)
        if isinstance(step, Stop):
            return
        index = len(levels)
        if plan.levels.open_loop:
            yield LevelMeta(index=index, mode="open", requested_rate=step.load)
        else:
            yield LevelMeta(index=index, mode="closed", concurrency=int(step.load))


def _latency(plan: RunPlan, level: LevelResult) -> PercentileTable:
    table = level.latency.get(latency_metric(plan.slo, level.mode == "open"))
    return table if table is not None and table.count else PercentileTable()


def search_outcome(plan: RunPlan, levels: Sequence[LevelResult]) -> SearchOutcome:
    """The policy replayed over the levels run: each probe with the step that chose it, the
    answer, the knee and the reason the search stopped."""
    spec = _spec(plan)
    probes: list[SearchProbe] = []
    for i, level in enumerate(levels):
        chosen = decide(plan, levels[:i])
        lat = _latency(plan, level)
        probes.append(
            SearchProbe(
                level=level.index,
                load=load_of(level),
                step=chosen.step if isinstance(chosen, Next) else "extra",
                passed=level.slo.passed is True,
                throughput_rps=level.throughput_rps,
                goodput_rps=level.goodput_rps,
                latency_mean_ms=lat.mean_ms,
                latency_p99_ms=lat.p99_ms,
            )
        )
    final = decide(plan, levels)
    if isinstance(final, Stop):
        reason, message = final.reason, final.message
    else:  # the run ended before the search did (a level raised, the run was cut short)
        reason, message = "budget_exhausted", f"the run ended after {len(levels)} probe(s), before the search"
    b = bracket(tried(levels))
    answer = next((p for p in probes if b.met is not None and p.load == b.met and p.passed), None)
    knee = find_knee(
        [Point(p.load, p.throughput_rps, p.latency_mean_ms) for p in probes],
        spec.knee_efficiency,
        spec.knee_latency_rise,
    )
    return SearchOutcome(
        over="rate" if plan.levels.open_loop else "concurrency",
        probes=probes,
        max_goodput_load=b.met,
        max_goodput_rps=None if answer is None else answer.goodput_rps,
        lowest_failing_load=b.missed,
        knee=None if isinstance(knee, str) else knee,
        knee_note="" if not isinstance(knee, str) else knee,
        stop_reason=reason,
        message=message,
    )
