"""The built-in engine: asyncio load generation in this process, one protocol client per run."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from time import perf_counter_ns

from mcp_bench.engines.base import RunObserver, client_version, fingerprint, register_engine
from mcp_bench.load.closed import run_closed
from mcp_bench.load.control import LevelControl
from mcp_bench.load.open import run_open
from mcp_bench.load.payloads import payload_source
from mcp_bench.load.schedule import arrival_schedule
from mcp_bench.plan import RunPlan
from mcp_bench.protocols import protocol_factory
from mcp_bench.records import ProtocolClient, RequestPayload, RequestRecord
from mcp_bench.results.aggregate import LevelAccumulator, LevelMeta
from mcp_bench.results.document import LevelResult, ResultDocument
from mcp_bench.results.slo import overall

PROGRESS_INTERVAL_S = 0.25
FINGERPRINT_TIMEOUT_S = 5.0


def level_metas(plan: RunPlan) -> list[LevelMeta]:
    lv = plan.levels
    if lv.rate is not None:
        return [LevelMeta(index=i, mode="open", requested_rate=r) for i, r in enumerate(lv.rate)]
    return [LevelMeta(index=i, mode="closed", concurrency=c) for i, c in enumerate(lv.concurrency or [])]


class BuiltinEngine:
    name = "builtin"

    async def run(self, plan: RunPlan, observers: Sequence[RunObserver] = ()) -> ResultDocument:
        started = datetime.now(UTC)
        # Records hold perf_counter_ns instants; this offset turns them into Unix ns once per run.
        offset_ns = time.time_ns() - perf_counter_ns()
        client = protocol_factory(plan.backend)(plan, plan.max_connections)
        notes: list[str] = []
        for obs in observers:
            await obs.run_started(plan)
        await client.open()
        try:
            server = await _server_fingerprint(client, notes)
            payloads = payload_source(plan)
            levels: list[LevelResult] = []
            for meta in level_metas(plan):
                for obs in observers:
                    await obs.level_started(plan, meta)
                result = await self._run_level(plan, meta, client, payloads, offset_ns, observers)
                for obs in observers:
                    await obs.level_finished(plan, result)
                levels.append(result)
        finally:
            await client.close()
        doc = ResultDocument(
            started_at=started,
            ended_at=datetime.now(UTC),
            engine=fingerprint(self.name, client_version(), server),
            plan=plan,
            levels=levels,
            slo_passed=overall(levels),
            notes=notes,
        )
        for obs in observers:
            await obs.run_finished(doc)
        return doc

    async def _run_level(
        self,
        plan: RunPlan,
        meta: LevelMeta,
        client: ProtocolClient,
        payloads: Iterator[RequestPayload],
        offset_ns: int,
        observers: Sequence[RunObserver],
    ) -> LevelResult:
        acc = LevelAccumulator(plan.slo, meta.mode == "open", int(plan.levels.late_after_ms * 1e6))
        acc.offset_ns = offset_ns
        control = LevelControl(plan.stability, plan.breaker)
        if control.active:
            add, observe = acc.add, control.observe

            def sink(rec: RequestRecord) -> None:
                add(rec)
                observe(rec)

        else:
            sink = acc.add
        stage = plan.stage
        drain_s = stage.drain_timeout_s if stage.drain_timeout_s is not None else plan.request_timeout_s + 1.0
        ticker = _start_ticker(plan, meta, acc, observers)
        # Objects that live through the level go to the permanent generation, so the collector
        # never walks them mid-level (a full collection there shows up as schedule lag).
        gc.collect()
        gc.freeze()
        try:
            if meta.mode == "closed":
                assert meta.concurrency is not None
                reason = await run_closed(client, payloads, meta.concurrency, stage, sink, control, drain_s)
            else:
                assert meta.requested_rate is not None
                lv = plan.levels
                schedule = arrival_schedule(
                    meta.requested_rate,
                    lv.arrival,
                    burstiness=lv.burstiness,
                    seed=lv.seed,
                    warmup_s=stage.warmup_s,
                    duration_s=stage.duration_s,
                    requests=stage.requests,
                )
                reason = await run_open(
                    client,
                    payloads,
                    schedule,
                    lv.max_concurrency,
                    lv.overload,
                    sink,
                    acc.add_dropped,
                    control,
                    drain_s,
                )
        finally:
            gc.unfreeze()
            if ticker is not None:
                ticker.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await ticker
        result = acc.to_result(meta, stop_reason=reason)
        result.stability, result.breaker = control.report()
        return result


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
    stage = plan.stage
    total_s = stage.warmup_s + (stage.duration_s or 0.0)

    async def tick() -> None:
        start = perf_counter_ns()
        while True:
            await asyncio.sleep(PROGRESS_INTERVAL_S)
            by_time = (perf_counter_ns() - start) / 1e9 / total_s if total_s > 0 else 0.0
            by_count = acc.sent / stage.requests if stage.requests else 0.0
            fraction = min(1.0, max(by_time, by_count))
            for obs in observers:
                obs.progress(meta, fraction, acc.completed, acc.failed)

    return asyncio.create_task(tick())


register_engine("builtin", BuiltinEngine)
