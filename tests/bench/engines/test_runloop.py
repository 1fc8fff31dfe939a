"""The run skeleton shared by all engines: levels, schedule, drain time, progress, observers, document."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from mcp_bench.engines.base import RunObserver, fingerprint
from mcp_bench.engines.runloop import (
    drain_s,
    finish_run,
    level_accumulator,
    level_metas,
    level_schedule,
    report_progress,
    run_levels,
    shard_plan,
)
from mcp_bench.plan import RunPlan
from mcp_bench.records import ErrorKind, RequestRecord
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult, ResultDocument

URL = "http://127.0.0.1:9/x"


def _plan(levels: dict[str, Any], stage: dict[str, Any], **extra: Any) -> RunPlan:
    return RunPlan.from_dict({"url": URL, "levels": levels, "stage": stage, **extra})


class Recorder(RunObserver):
    def __init__(self) -> None:
        self.events: list[str] = []
        self.fractions: list[float] = []
        self.doc: ResultDocument | None = None

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        self.events.append(f"start {meta.index}")

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        self.events.append(f"finish {result.index}")

    async def run_finished(self, doc: ResultDocument) -> None:
        self.events.append("done")
        self.doc = doc

    def progress(self, meta: LevelMeta, fraction: float, completed: int, failed: int) -> None:
        self.fractions.append(fraction)


def test_levels_are_open_for_rates_and_closed_for_concurrencies() -> None:
    open_metas = level_metas(_plan({"rate": [5, 10]}, {"duration_s": 1}))
    assert [(m.index, m.mode, m.requested_rate) for m in open_metas] == [(0, "open", 5), (1, "open", 10)]
    closed = level_metas(_plan({"concurrency": [1, 4, 8]}, {"requests": 3}))
    assert [(m.index, m.mode, m.concurrency) for m in closed] == [
        (0, "closed", 1),
        (1, "closed", 4),
        (2, "closed", 8),
    ]


def test_drain_defaults_to_one_request_timeout_and_a_second() -> None:
    assert drain_s(_plan({"concurrency": [1]}, {"requests": 1}, request_timeout_s=7)) == 8.0
    explicit = _plan({"concurrency": [1]}, {"requests": 1, "drain_timeout_s": 0.5}, request_timeout_s=7)
    assert drain_s(explicit) == 0.5


def test_level_schedule_follows_the_plan_arrival_model_and_seed() -> None:
    def offsets(seed: int) -> list[int]:
        plan = _plan({"rate": [100], "arrival": "poisson", "seed": seed}, {"warmup_s": 0.1, "requests": 50})
        schedule = level_schedule(plan, level_metas(plan)[0])
        assert schedule.measured_count == 50 and len(schedule) > 50  # warm-up arrivals come first
        return schedule.offsets_ns.tolist()

    assert offsets(1) == offsets(1)
    assert offsets(1) != offsets(2)


def test_each_level_draws_its_own_arrivals_and_a_plan_replays_them() -> None:
    """Four windows of one rate (a drill's stage): one shared seed gave each the same draw, so
    the stage fell short or over four times together (10/s for 4 x 3 s sent 96, never 120)."""
    plan = _plan({"rate": [10.0] * 4, "arrival": "poisson"}, {"duration_s": 3.0})
    drawn = [list(level_schedule(plan, meta).offsets_ns) for meta in level_metas(plan)]
    assert len({tuple(d) for d in drawn}) == 4
    again = [list(level_schedule(plan, meta).offsets_ns) for meta in level_metas(plan)]
    assert again == drawn
    many = _plan({"rate": [10.0] * 200, "arrival": "poisson"}, {"duration_s": 3.0})
    total = sum(len(level_schedule(many, meta)) for meta in level_metas(many))
    assert abs(total - 6000) < 4 * 6000**0.5  # Poisson over the whole, not one draw 200 times


def test_each_shard_draws_arrivals_of_its_own() -> None:
    """Shards of one plan sent the same instants: n shards' load came in bursts of n at once."""
    plan = _plan({"rate": [50.0] * 2, "arrival": "poisson", "seed": 7}, {"duration_s": 1.0})
    shards = [shard_plan(plan, index) for index in range(3)]
    assert shards[0] == plan
    first = [tuple(level_schedule(p, level_metas(p)[0]).offsets_ns) for p in shards]
    assert len(set(first)) == 3
    assert shard_plan(plan, 2) == shards[2]  # a shard replays its own draw
    closed = _plan({"concurrency": [2]}, {"duration_s": 1.0})
    unseeded = _plan({"rate": [5.0], "seed": None}, {"duration_s": 1.0})
    assert shard_plan(closed, 1) == closed and shard_plan(unseeded, 1) == unseeded


def test_accumulator_counts_open_levels_late_and_shifts_instants() -> None:
    plan = _plan({"rate": [5], "late_after_ms": 2}, {"duration_s": 1})
    acc = level_accumulator(plan, level_metas(plan)[0], offset_ns=1_000)
    acc.add(RequestRecord(sent_ns=5_000_000, end_ns=6_000_000, scheduled_ns=0))  # 5 ms late
    acc.add(RequestRecord(sent_ns=10_000_000, end_ns=11_000_000, scheduled_ns=9_500_000))
    result = acc.to_result(level_metas(plan)[0])
    assert result.sent == 2 and result.late == 1
    assert result.first_sent_unix_ns == 5_001_000


def test_progress_is_the_further_of_time_and_count_capped_at_one() -> None:
    obs = Recorder()
    timed = _plan({"concurrency": [1]}, {"warmup_s": 1, "duration_s": 3})
    meta = level_metas(timed)[0]
    acc = level_accumulator(timed, meta, 0)
    report_progress(timed, meta, acc, [obs], elapsed_s=1.0)
    report_progress(timed, meta, acc, [obs], elapsed_s=9.0)
    counted = _plan({"concurrency": [1]}, {"requests": 4})
    acc = level_accumulator(counted, meta, 0)
    report_progress(counted, meta, acc, [obs], elapsed_s=100.0)  # no planned time: time says nothing
    acc.add(RequestRecord(sent_ns=1, end_ns=2))
    report_progress(counted, meta, acc, [obs], elapsed_s=0.0)
    assert obs.fractions == [0.25, 1.0, 0.0, 0.25]


async def test_levels_run_in_order_between_observer_calls_and_end_in_one_document() -> None:
    plan = _plan({"concurrency": [1, 2]}, {"requests": 1}, slo={"max_error_rate": 0.0})
    obs = Recorder()
    ran: list[int] = []

    async def one(meta: LevelMeta) -> LevelResult:
        obs.events.append(f"run {meta.index}")
        ran.append(meta.index)
        acc = level_accumulator(plan, meta, 0)
        # The second level's only request fails, so that level misses the SLO and so does the run.
        error = ErrorKind.HTTP_STATUS if meta.index == 1 else None
        acc.add(RequestRecord(sent_ns=1, end_ns=2, status=500 if error else 200, error=error))
        return acc.to_result(meta, stop_reason="requests")

    levels = await run_levels(plan, [obs], one)
    assert obs.events == ["start 0", "run 0", "finish 0", "start 1", "run 1", "finish 1"]
    started = datetime.now(UTC)
    doc = await finish_run(
        plan, [obs], started=started, engine=fingerprint("x", "1", {}), levels=levels, notes=["n"]
    )
    assert obs.events[-1] == "done" and obs.doc is doc
    assert doc.started_at == started and doc.ended_at >= started
    assert [lv.index for lv in doc.levels] == ran == [0, 1]
    assert doc.notes == ["n"] and doc.engine.engine == "x"
    assert [lv.slo.passed for lv in doc.levels] == [True, False]
    assert doc.slo_passed is False
