"""The built-in engine: asyncio load generation in this process, one protocol client per run."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from time import perf_counter_ns

from mcp_bench.engines.base import RunObserver, client_version, fingerprint, register_engine
from mcp_bench.engines.gate import LevelProgress, gates, level_ready, tell_progress
from mcp_bench.engines.runloop import (
    drain_s,
    finish_run,
    level_accumulator,
    level_schedule,
    report_progress,
    run_levels,
)
from mcp_bench.load.closed import run_closed
from mcp_bench.load.control import LevelControl
from mcp_bench.load.open import run_open
from mcp_bench.load.payloads import payload_source
from mcp_bench.load.schedule import Schedule
from mcp_bench.plan import RunPlan
from mcp_bench.protocols import protocol_factory
from mcp_bench.protocols.retry import RetryingClient, with_retries
from mcp_bench.records import ConnectionControl, ProtocolClient, RequestPayload, RequestRecord
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.document import LevelResult, ResultDocument, WorkerLoad

PROGRESS_INTERVAL_S = 0.25
FINGERPRINT_TIMEOUT_S = 5.0
# Open loop, warm: connections opened before the level, enough for requests that last this long
# at the level's rate (capped by the in-flight limit); more open on demand.
WARM_OPEN_LOOP_S = 0.1


@dataclass
class WorkerSlice:
    """This process is worker ``index`` of a level run by several client processes: it sends
    ``schedule`` (its share of the open-loop arrivals, when given), waits on ``ready`` once its
    connections are open so every worker starts together, and reports its own CPU and lag."""

    index: int
    schedule: Schedule | None = None
    ready: Callable[[], Awaitable[None]] | None = None


class BuiltinEngine:
    name = "builtin"

    def __init__(self, worker: WorkerSlice | None = None) -> None:
        self.worker = worker

    async def run(self, plan: RunPlan, observers: Sequence[RunObserver] = ()) -> ResultDocument:
        started = datetime.now(UTC)
        # Records hold perf_counter_ns instants; this offset turns them into Unix ns once per run.
        offset_ns = time.time_ns() - perf_counter_ns()
        client = with_retries(protocol_factory(plan.backend)(plan, plan.max_connections), plan.retry)
        notes: list[str] = []
        for obs in observers:
            await obs.run_started(plan)
        await client.open()
        try:
            server = await _server_fingerprint(client, notes)
            payloads = payload_source(plan)
            levels = await run_levels(
                plan,
                observers,
                lambda meta: self._run_level(plan, meta, client, payloads, offset_ns, observers),
            )
        finally:
            await client.close()
        if isinstance(client, RetryingClient):
            notes.append(client.note())
        return await finish_run(
            plan,
            observers,
            started=started,
            engine=fingerprint(self.name, client_version(), server),
            levels=levels,
            notes=notes,
        )

    async def _run_level(
        self,
        plan: RunPlan,
        meta: LevelMeta,
        client: ProtocolClient,
        payloads: Iterator[RequestPayload],
        offset_ns: int,
        observers: Sequence[RunObserver],
    ) -> LevelResult:
        acc = level_accumulator(plan, meta, offset_ns)
        control = LevelControl(plan.stability, plan.breaker)
        if control.active:
            add, observe = acc.add, control.observe

            def sink(rec: RequestRecord) -> None:
                add(rec)
                observe(rec)

        else:
            sink = acc.add
        drain = drain_s(plan)
        control_conns = _connection_control(client)
        if control_conns is not None:
            mode = plan.levels.connections or "warm"
            control_conns.take_connect_times()  # the fingerprint's or an earlier level's
            await control_conns.prepare_connections(mode, warm_connections(plan, meta))
            acc.connections = mode
        worker = self.worker
        if worker is not None and worker.ready is not None:
            await worker.ready()
        # Objects that live through the level go to the permanent generation, so the collector
        # never walks them mid-level (a full collection there shows up as schedule lag).
        gc.collect()
        gc.freeze()
        ticker: asyncio.Task[None] | None = None
        try:
            # a start gate holds the window here, after everything that takes time to set up
            await level_ready(observers, plan, meta)
            cpu0, wall0 = time.process_time(), perf_counter_ns()
            ticker = _start_ticker(plan, meta, acc, observers)
            if meta.mode == "closed":
                assert meta.concurrency is not None
                reason = await run_closed(
                    client,
                    payloads,
                    meta.concurrency,
                    plan.stage,
                    sink,
                    control,
                    drain,
                    ramp_s=plan.levels.ramp_s,
                )
            else:
                lv = plan.levels
                reason = await run_open(
                    client,
                    payloads,
                    level_schedule(plan, meta)
                    if worker is None or worker.schedule is None
                    else worker.schedule,
                    lv.max_concurrency,
                    lv.overload,
                    sink,
                    acc.add_dropped,
                    control,
                    drain,
                )
        finally:
            gc.unfreeze()
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
        if control_conns is not None:
            acc.add_connections(control_conns.take_connect_times())
        result = acc.to_result(meta, stop_reason=reason)
        result.stability, result.breaker = control.report()
        # every process, one or several: a single client near a full core measures itself too
        # (its per-worker row only where there are several: a merged run of hundreds of
        # single-process shards would otherwise carry a row per shard per level)
        cpu_s, wall_s = time.process_time() - cpu0, (perf_counter_ns() - wall0) / 1e9
        client_load(plan, result, 0 if worker is None else worker.index, cpu_s, wall_s)
        if worker is None:
            result.workers = None
        return result


def client_load(plan: RunPlan, result: LevelResult, index: int, cpu_s: float, wall_s: float) -> None:
    """Record what worker ``index`` cost the client over the level, and flag the level when the
    worker passed the plan's bound: its figures then measure the client as much as the server."""
    share = cpu_s / wall_s if wall_s > 0 else 0.0
    lag = result.latency.get("schedule_lag")
    lag_p99 = lag.p99_ms if lag is not None else None
    result.workers = [
        WorkerLoad(
            worker=index, sent=result.sent, cpu_s=cpu_s, wall_s=wall_s, cpu_share=share, lag_p99_ms=lag_p99
        )
    ]
    bound = plan.client_bound
    reasons = []
    if share > bound.cpu_share:
        reasons.append(f"worker {index}: CPU {share:.0%} of a core > {bound.cpu_share:.0%}")
    if lag_p99 is not None and lag_p99 > bound.lag_p99_ms:
        reasons.append(f"worker {index}: schedule lag P99 {lag_p99:.3g} ms > {bound.lag_p99_ms:g} ms")
    result.client_bound = reasons or None


def level_fraction(plan: RunPlan, sent: int, elapsed_s: float) -> float:
    """How far a level is, by time or by request count, whichever is further (as the progress
    bar reckons it)."""
    stage = plan.stage
    total_s = stage.warmup_s + (stage.duration_s or 0.0)
    by_time = elapsed_s / total_s if total_s > 0 else 0.0
    by_count = sent / stage.requests if stage.requests else 0.0
    return min(1.0, max(by_time, by_count))


def warm_connections(plan: RunPlan, meta: LevelMeta) -> int:
    """How many connections a warm level opens before its measured window: one per closed-loop
    worker; in open loop, what :data:`WARM_OPEN_LOOP_S` of arrivals need, within the cap."""
    if meta.concurrency is not None:
        return meta.concurrency
    rate = meta.requested_rate or 0.0
    return max(1, min(plan.levels.max_concurrency, math.ceil(rate * WARM_OPEN_LOOP_S)))


def _connection_control(client: ProtocolClient) -> ConnectionControl | None:
    inner = client.inner if isinstance(client, RetryingClient) else client
    return inner if isinstance(inner, ConnectionControl) else None


async def _server_fingerprint(client: ProtocolClient, notes: list[str]) -> dict[str, str]:
    try:
        return await asyncio.wait_for(client.fingerprint(), FINGERPRINT_TIMEOUT_S)
    except Exception as exc:
        notes.append(f"server fingerprint unavailable: {type(exc).__name__}: {exc}")
        return {}


def _start_ticker(
    plan: RunPlan, meta: LevelMeta, acc: LevelAccumulator, observers: Sequence[RunObserver]
) -> asyncio.Task[None] | None:
    if not observers:
        return None

    watching = gates(observers)

    async def tick() -> None:
        start = perf_counter_ns()
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL_S)
            elapsed_s = (perf_counter_ns() - start) / 1e9
            report_progress(plan, meta, acc, observers, elapsed_s)
            if watching:
                progress = LevelProgress(
                    acc.sent, acc.completed, acc.failed, level_fraction(plan, acc.sent, elapsed_s), elapsed_s
                )
                tell_progress(watching, meta, progress)

    return asyncio.create_task(tick())


register_engine("builtin", BuiltinEngine)
