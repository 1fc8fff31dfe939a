"""Run observer that samples the GPUs for a whole run and summarises each level.

Kept out of ``mcp_bench.telemetry``'s imports: it needs the engine's interfaces, while the sampler
itself must load with the standard library alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from mcp_bench.engines.base import RunObserver
from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult, ResultDocument
from mcp_bench.telemetry.fairness import gpu_fairness
from mcp_bench.telemetry.nvml import DEFAULT_INTERVAL_S, DEFAULT_SLOW_INTERVAL_S, GpuSampler
from mcp_bench.telemetry.series import DEFAULT_CAPACITY
from mcp_bench.telemetry.stats import memory_around, plot_points, summarise

ROLE = "load-generator"
PLOT_POINTS = 500  # per run, in the document: enough for a plot, small enough for a result object


class TelemetryObserver(RunObserver):
    """Fills ``level.telemetry`` (peak/mean/P95 per field per GPU, fairness across GPUs) and
    ``doc.telemetry`` (whole run, sampler cost, a down-sampled series). ``unavailable`` with the
    reason where there is no NVML or GPU."""

    def __init__(
        self,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        slow_interval_s: float = DEFAULT_SLOW_INTERVAL_S,
        capacity: int = DEFAULT_CAPACITY,
        gpu_indices: Sequence[int] | None = None,
    ) -> None:
        # Settings are checked here, before any load is sent.
        self.sampler = GpuSampler(
            interval_s, slow_interval_s=slow_interval_s, capacity=capacity, gpu_indices=gpu_indices
        )
        self._level_start_ns: int | None = None
        self._level_end_ns: int | None = None
        self._run_start_ns: int | None = None

    async def run_started(self, plan: RunPlan) -> None:
        self._run_start_ns = time.perf_counter_ns()
        await asyncio.to_thread(self.sampler.start)

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        self._level_start_ns = time.perf_counter_ns()

    def level_summary(self, start_ns: int | None, end_ns: int) -> dict[str, Any]:
        # the shard's own GPUs: the load generator's (the serving GPUs come from gpu-sampler or DCGM)
        summary = {"role": ROLE, **summarise(self.sampler.series, start_ns, end_ns)}
        if summary.get("status") == "ok" and len(self.sampler.series.gpus) > 1:
            summary["fairness"] = gpu_fairness(self.sampler.series.window(start_ns, end_ns))
        return summary

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        self._level_end_ns = time.perf_counter_ns()
        result.telemetry = self.level_summary(self._level_start_ns, self._level_end_ns)
        if plan.observe.settle_s <= 0:
            self._add_memory(result, None)

    async def level_settled(self, plan: RunPlan, result: LevelResult) -> None:
        self._add_memory(result, time.perf_counter_ns())

    def _add_memory(self, result: LevelResult, settled_ns: int | None) -> None:
        """GPU memory before, at the peak of and after the level, for the memory forensics."""
        if (
            not isinstance(result.telemetry, dict)
            or self._level_start_ns is None
            or self._level_end_ns is None
        ):
            return
        memory = memory_around(
            self.sampler.series, self._level_start_ns, self._level_end_ns, settled_ns, self.sampler.interval_s
        )
        if memory is not None:
            result.telemetry["memory"] = memory

    async def run_finished(self, doc: ResultDocument) -> None:
        end_ns = time.perf_counter_ns()
        series = await asyncio.to_thread(self.sampler.stop)
        summary = self.level_summary(self._run_start_ns, end_ns)
        if series.available:
            summary["plot"] = plot_points(series.window(self._run_start_ns, end_ns), PLOT_POINTS)
        doc.telemetry = summary
