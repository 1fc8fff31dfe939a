"""The memory forensics on the serving GPUs: a real run against the reference server reads a
node-level sampler service over HTTP (each level's window and its settle wait), and the forensics
judge that sampler's readings as a source of their own.

This machine has no GPU, so the sampler's series is written by a thread standing in for the NVML
reads (5 ms ticks into a real ``TelemetrySeries``), following what the "server" holds: 8 GiB at
rest, 20 GiB while a level runs, and after the first level 10 GiB it never gives back.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import socket
import threading
import time

from mcp_bench.cli_observers import build_observers
from mcp_bench.engines import run_plan
from mcp_bench.engines.base import RunObserver
from mcp_bench.forensics.sources import memory_forensics
from mcp_bench.plan import RunPlan
from mcp_bench.results.aggregate import LevelMeta
from mcp_bench.results.document import LevelResult
from mcp_bench.telemetry.series import FIELDS, GpuInfo, TelemetrySeries
from mcp_bench.telemetry.serve import SamplerService, serve
from mcp_refserver import RefServerConfig, start_refserver

GIB = 2**30


class _LiveSeries:
    """Ticks every 5 ms into a real series, as GpuSampler's thread does, with the memory held now."""

    interval_s = 0.005

    def __init__(self) -> None:
        self.series = TelemetrySeries([GpuInfo(0, "NVIDIA H200", "GPU-serving", 80 * GIB)], self.interval_s)
        self.held = 8 * GIB
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def _tick(self) -> None:
        while not self._stop.wait(self.interval_s):
            now = time.perf_counter_ns()
            row = [math.nan] * len(FIELDS)
            row[FIELDS.index("mem_used_bytes")] = float(self.held)
            self.series.append(now, now, 1000, row)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> TelemetrySeries:
        self._stop.set()
        self._thread.join()
        return self.series


class _Server(RunObserver):
    """What the serving process holds: 20 GiB during each level; after the first, 2 GiB stay."""

    def __init__(self, live: _LiveSeries) -> None:
        self.live = live

    async def level_started(self, plan: RunPlan, meta: LevelMeta) -> None:
        self.live.held = 20 * GIB
        await asyncio.sleep(0.05)  # a few ticks at the peak

    async def level_finished(self, plan: RunPlan, result: LevelResult) -> None:
        self.live.held = 10 * GIB


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_memory_the_serving_gpus_keep_after_a_level_is_a_leak_of_that_node() -> None:
    live = _LiveSeries()
    port = _free_port()
    service = SamplerService(live, "node-a", clients=1)  # type: ignore[arg-type]
    task = asyncio.create_task(serve(service, "127.0.0.1", port, 60))
    for _ in range(200):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)  # readings before the first level
    cfg = RefServerConfig.model_validate({"ttft_ms": 1, "tpot_ms": 1, "default_max_tokens": 2})
    async with await start_refserver(cfg) as srv:
        plan = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "levels": {"concurrency": [1, 1]},
                "stage": {"requests": 20},
                "observe": {"gpu_samplers": [f"http://127.0.0.1:{port}"], "settle_s": 0.2},
            }
        )
        doc = await run_plan(
            plan, [*build_observers(plan), _Server(live)]
        )  # the level starts, then it borrows
    await asyncio.wait_for(task, 10)  # the only client said done

    first, second = (lv.server_metrics["gpu-sampler:node-a"]["memory"] for lv in doc.levels)  # type: ignore[index]
    assert (first["before_bytes"], first["peak_bytes"], first["after_bytes"]) == (8 * GIB, 20 * GIB, 10 * GIB)
    assert (second["before_bytes"], second["peak_bytes"], second["after_bytes"]) == (
        10 * GIB,
        20 * GIB,
        10 * GIB,
    )
    verdict = memory_forensics(doc)["gpu-sampler:node-a"]
    assert verdict["state"] == "Found"
    (leak,) = verdict["findings"]
    assert leak["kind"] == "Leak" and leak["level"] == doc.levels[0].level_label
    assert leak["values"]["retained_bytes"] == 2 * GIB
