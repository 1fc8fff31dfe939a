"""Several client processes per run: one event loop per core, so the client is not the bottleneck.

Each level is split deterministically: closed-loop concurrency (and a request count) divided among
the workers; the open-loop arrival schedule generated once, here, from the plan's seed, and dealt
round-robin, so the union of the workers' schedules is exactly the one-process schedule. Every
worker runs the built-in engine on its share in a spawned process, starts when all have opened
their connections, and returns its result document; the levels are merged as shards are
(:func:`mcp_bench.results.merge.merge_documents`), so percentiles stay exact.
"""

from __future__ import annotations

import asyncio
import math
import multiprocessing as mp
import queue
import threading
import traceback
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mcp_bench.engines.base import RunObserver, client_version, fingerprint, run_sync
from mcp_bench.engines.builtin import BuiltinEngine, WorkerSlice
from mcp_bench.engines.gate import gates, level_ready
from mcp_bench.engines.runloop import finish_run, level_schedule, run_levels
from mcp_bench.load.schedule import Schedule
from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import (
    EngineFingerprint,
    LevelResult,
    ResultDocument,
    dumps_document,
    loads_document,
)
from mcp_bench.results.merge import merge_documents

# Time allowed, beyond the request timeout, for every worker to start and open its connections.
START_SLACK_S = 60.0


class WorkerError(RuntimeError):
    """A worker process failed or went away without a result."""


@dataclass(frozen=True)
class WorkerPart:
    """One worker's share of a level: a one-level plan, and its open-loop arrivals."""

    plan: RunPlan
    offsets_ns: array[int] | None = None
    warmup_count: int = 0

    @property
    def schedule(self) -> Schedule | None:
        return None if self.offsets_ns is None else Schedule(self.offsets_ns, self.warmup_count)


def _shares(total: int, n: int) -> list[int]:
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def split_level(plan: RunPlan, meta: LevelMeta) -> list[WorkerPart]:
    """The workers' shares of one level (fewer workers than asked where a level is too small)."""
    lv, stage = plan.levels, plan.stage
    if meta.mode == "closed":
        assert meta.concurrency is not None
        n = min(plan.workers, meta.concurrency, stage.requests or meta.concurrency)
        reqs = _shares(stage.requests, n) if stage.requests is not None else [None] * n
        return [
            WorkerPart(
                plan.model_copy(
                    update={
                        "workers": 1,
                        "search": None,  # the parent's search chose this level
                        "levels": lv.model_copy(update={"concurrency": [c], "rate": None}),
                        "stage": stage.model_copy(update={"requests": r}),
                    }
                )
            )
            for c, r in zip(_shares(meta.concurrency, n), reqs, strict=True)
        ]
    assert meta.requested_rate is not None
    n = plan.workers
    schedule = level_schedule(plan, meta)  # once, so a seed-less plan is one draw, not n
    cap = math.ceil(lv.max_concurrency / n)
    levels = lv.model_copy(
        update={"rate": [meta.requested_rate / n], "concurrency": None, "max_concurrency": cap}
    )
    one = plan.model_copy(update={"workers": 1, "levels": levels, "search": None})
    return [
        WorkerPart(one, schedule.offsets_ns[i::n], len(range(i, schedule.warmup_count, n))) for i in range(n)
    ]


def _worker_main(
    index: int, part: WorkerPart, barrier: Any, go: Any, results: Any, start_timeout_s: float
) -> None:
    """A spawned worker: run the built-in engine on this share, send back the document text.
    With ``go`` (a start gate in the parent), it waits for that too once all are ready."""

    async def ready() -> None:
        await asyncio.to_thread(barrier.wait, start_timeout_s)
        if go is not None:
            await asyncio.to_thread(go.wait)

    try:
        engine = BuiltinEngine(WorkerSlice(index, part.schedule, ready))
        doc = run_sync(engine.run(part.plan))
        results.put((index, "ok", dumps_document(doc)))
    except BaseException as exc:  # the parent must hear of every failure, not wait for it
        barrier.abort()
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        results.put((index, "error", text))


def run_level_processes(
    plan: RunPlan, meta: LevelMeta, gate: Callable[[], None] | None = None
) -> list[ResultDocument]:
    """Run one level in one spawned process per share; their documents, in worker order.
    ``gate`` (blocking) is called once every worker has opened its connections; they start
    when it returns (a start barrier across shards)."""
    parts = split_level(plan, meta)
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(len(parts) + (1 if gate is not None else 0))
    go = ctx.Event() if gate is not None else None
    results = ctx.Queue()
    start_timeout = plan.request_timeout_s + START_SLACK_S
    procs = [
        ctx.Process(target=_worker_main, args=(i, part, barrier, go, results, start_timeout), daemon=True)
        for i, part in enumerate(parts)
    ]
    for proc in procs:
        proc.start()
    docs: dict[int, ResultDocument] = {}
    errors: list[str] = []
    try:
        if gate is not None and go is not None:
            try:
                barrier.wait(start_timeout)
            except threading.BrokenBarrierError:
                pass  # a worker failed before it was ready: its error arrives below
            else:
                gate()
                go.set()
        while len(docs) + len(errors) < len(parts):
            try:
                index, status, text = results.get(timeout=1.0)
            except queue.Empty:
                if any(not p.is_alive() and p.exitcode not in (0, None) for p in procs):
                    dead = [i for i, p in enumerate(procs) if not p.is_alive() and p.exitcode]
                    raise WorkerError(f"worker process {dead} exited without a result") from None
                continue
            if status == "ok":
                docs[index] = loads_document(text)
            else:
                errors.append(f"worker {index}: {text}")
    finally:
        for proc in procs:
            proc.join(timeout=5.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
    real = [e for e in errors if "BrokenBarrierError" not in e] or errors
    if real:
        raise WorkerError("; ".join(real))
    return [docs[i] for i in range(len(parts))]


def merge_level(meta: LevelMeta, docs: Sequence[ResultDocument]) -> LevelResult:
    """The workers' level as one: histograms added as shards' are; the level keeps its own
    index, concurrency and rate, and counts as one shard."""
    level = merge_documents(docs).levels[0]
    level.index = meta.index
    level.concurrency = meta.concurrency
    level.requested_rate = meta.requested_rate
    level.shards = 1
    # one shard's workers: their windows are not shards' (the shard's merge records its own)
    level.shard_windows, level.overlap, level.not_concurrent = None, None, None
    return level


class WorkerPool:
    """The ``workers > 1`` form of the built-in engine's run: same levels, observers and document."""

    async def run(self, plan: RunPlan, observers: Sequence[RunObserver] = ()) -> ResultDocument:
        started = datetime.now(UTC)
        engine: EngineFingerprint | None = None
        notes: list[str] = []
        for obs in observers:
            await obs.run_started(plan)

        loop = asyncio.get_running_loop()
        held = gates(observers)

        async def one_level(meta: LevelMeta) -> LevelResult:
            nonlocal engine

            def gate() -> None:
                asyncio.run_coroutine_threadsafe(level_ready(held, plan, meta), loop).result()

            docs = await asyncio.to_thread(run_level_processes, plan, meta, gate if held else None)
            engine = engine or docs[0].engine
            for note in (n for d in docs for n in d.notes):
                if note not in notes:
                    notes.append(note)
            return merge_level(meta, docs)

        levels = await run_levels(plan, observers, one_level)
        return await finish_run(
            plan,
            observers,
            started=started,
            engine=engine or fingerprint("builtin", client_version(), {}),
            levels=levels,
            notes=notes,
        )
