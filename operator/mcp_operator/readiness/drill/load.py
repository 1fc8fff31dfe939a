"""A stage's load, run by the project's engine in a worker process (its own event loop, so the
operator's work does not bend the figures), as consecutive windows of the same load: the
windows say when within the stage P99 jumps, and their histograms add up to the stage's exact
percentiles."""

from __future__ import annotations

import asyncio
import json
import math
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from mcp_bench.engines import run_plan_sync
from mcp_bench.plan import RunPlan
from mcp_bench.results.document import ResultDocument, dumps_document, loads_document
from mcp_bench.results.histogram import LatencyHistogram

from ...api.drill import StageLoad


@dataclass(frozen=True)
class WindowFigures:
    offset_s: float  # from the stage's start
    p99_ms: float | None
    completed: int
    errors: int


@dataclass(frozen=True)
class StageFigures:
    requested: str
    achieved_rps: float | None
    p50_ms: float | None
    p99_ms: float | None
    completed: int
    errors: int
    windows: tuple[WindowFigures, ...]


def load_plan(load: StageLoad, base_url: str) -> dict[str, Any]:
    """The engine's plan: one level per window, back to back."""
    windows = max(1, math.ceil(load.duration_seconds / load.window_seconds))
    window_s = load.duration_seconds / windows
    levels: dict[str, Any] = (
        {"rate": [load.rate] * windows, "arrival": "poisson", "overload": "drop"}
        if load.rate is not None
        else {"concurrency": [load.concurrency] * windows}
    )
    return {
        "url": base_url.rstrip("/") + load.path,
        "backend": "http",
        "levels": levels,
        "stage": {"duration_s": window_s},
        "request_timeout_s": 5.0,
        "labels": {"component": "mcp-readiness-drill"},
    }


def run_load_blocking(plan: dict[str, Any]) -> str:
    """Worker-process entry: run the plan, return the checksummed result document."""
    return dumps_document(run_plan_sync(RunPlan.from_dict(plan, source="drill stage")))


def figures(doc: ResultDocument, load: StageLoad) -> StageFigures:
    total = LatencyHistogram()
    windows = []
    offset = 0.0
    window_s = load.duration_seconds / max(1, len(doc.levels))
    completed = errors = 0
    for level in doc.levels:
        metric = "e2e_from_schedule" if level.mode == "open" else "e2e"
        hist = level.histogram(metric) or level.histogram("e2e")
        if hist is not None:
            total.merge(hist)
        errs = level.failed + level.dropped
        windows.append(
            WindowFigures(
                offset, hist.percentile_ms(99) if hist and hist.count else None, level.completed, errs
            )
        )
        completed += level.completed
        errors += errs
        offset += window_s
    achieved = completed / load.duration_seconds if load.duration_seconds else None
    requested = f"{load.rate:g} req/s" if load.rate is not None else f"concurrency {load.concurrency}"
    return StageFigures(
        requested=requested,
        achieved_rps=achieved,
        p50_ms=total.percentile_ms(50) if total.count else None,
        p99_ms=total.percentile_ms(99) if total.count else None,
        completed=completed,
        errors=errors,
        windows=tuple(windows),
    )


class LoadRunner:
    """Stages one at a time per drill, in worker processes started on first use."""

    def __init__(self, workers: int = 2) -> None:
        self._workers = workers
        self._pool: ProcessPoolExecutor | None = None

    async def run(self, load: StageLoad, base_url: str) -> StageFigures:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self._workers, mp_context=multiprocessing.get_context("spawn"))
        text = await asyncio.get_running_loop().run_in_executor(
            self._pool, run_load_blocking, load_plan(load, base_url)
        )
        return figures(loads_document(text), load)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def plan_json(load: StageLoad, base_url: str) -> str:
    return json.dumps(load_plan(load, base_url), sort_keys=True)
