"""The serving GPUs' sampler (``mcp-bench gpu-sampler``) and the shards' side of it, over real HTTP.

This machine has no NVML: the real sampler must say so in every level, with the reason, and stop
once every client said it is done. The window arithmetic (a shard's wall-clock level onto the
sampler's monotonic samples) is checked on a series filled by hand.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from typing import Any

import pytest
from rich.console import Console

from mcp_bench.cli_observers import ObserverArgError, build_observers
from mcp_bench.engines import run_plan
from mcp_bench.htmlreport.view import level_table
from mcp_bench.plan import RunPlan
from mcp_bench.report import print_report
from mcp_bench.telemetry.nvml import GpuSampler
from mcp_bench.telemetry.observer import TelemetryObserver
from mcp_bench.telemetry.remote import ServingGpuObserver
from mcp_bench.telemetry.series import FIELDS, GpuInfo, TelemetrySeries
from mcp_bench.telemetry.serve import SamplerService, serve
from mcp_refserver import RefServerConfig, start_refserver


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class _FilledSampler:
    """A started sampler whose series holds known samples (as GpuSampler's thread would write)."""

    interval_s = 0.01

    def __init__(self, series: TelemetrySeries) -> None:
        self.series = series

    def start(self) -> None:
        return None

    def stop(self) -> TelemetrySeries:
        return self.series


def _series_with(samples: list[tuple[int, float, float]]) -> TelemetrySeries:
    """One GPU of 80 GiB; each sample (perf_counter ns, memory used bytes, SM %)."""
    series = TelemetrySeries([GpuInfo(0, "NVIDIA H200", "GPU-test", 80 * 2**30)], 0.01)
    for t, mem, sm in samples:
        row = [float("nan")] * len(FIELDS)
        row[FIELDS.index("mem_used_bytes")] = mem
        row[FIELDS.index("sm_util_pct")] = sm
        series.append(t, t, 1000, row)
    return series


def test_a_wall_clock_window_selects_the_samples_of_that_level() -> None:
    base = time.perf_counter_ns()
    ms = 1_000_000
    # 0-9 ms idle at 1 GiB, 10-19 ms busy at 40 GiB (the level), 20-29 ms idle at 2 GiB
    samples = [
        (base + i * ms, float((1 if i < 10 else 40 if i < 20 else 2) * 2**30), 0 if i < 10 else 90)
        for i in range(30)
    ]
    service = SamplerService(_FilledSampler(_series_with(samples)), "node-a", clients=1)  # type: ignore[arg-type]
    service.start()
    wall = lambda perf: perf + service.offset_ns  # noqa: E731 - the sampler's own mapping, inverted
    out = service.window(wall(base + 10 * ms), wall(base + 19 * ms), settled_unix_ns=wall(base + 29 * ms))
    assert out["role"] == "serving" and out["node"] == "node-a" and out["status"] == "ok"
    (gpu,) = out["gpus"]
    sm = gpu["fields"]["sm_util_pct"]
    assert sm["min"] == 90 and sm["peak"] == 90 and sm["samples"] == 10  # none of the idle ones around
    assert gpu["fields"]["mem_used_bytes"]["peak"] == 40 * 2**30
    assert out["memory"]["before_bytes"] == 2**30  # the last reading before the level
    assert out["memory"]["peak_bytes"] == 40 * 2**30
    assert out["memory"]["after_bytes"] == 2 * 2**30  # the last reading of the settle wait
    with pytest.raises(ValueError):
        service.window(wall(base + 19 * ms), wall(base + 10 * ms))


async def _start(service: SamplerService, port: int, deadline_s: float = 30) -> asyncio.Task[str]:
    task = asyncio.create_task(serve(service, "127.0.0.1", port, deadline_s))
    for _ in range(200):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return task
        await asyncio.sleep(0.02)
    raise AssertionError("the sampler never listened")


async def test_without_nvml_every_level_says_unavailable_and_the_sampler_stops_when_shards_are_done() -> None:
    own = TelemetryObserver(0.05)
    real = GpuSampler(0.005)
    port = _free_port()
    service = SamplerService(real, "node-serving", clients=2)
    task = await _start(service, port)
    cfg = RefServerConfig.model_validate({"ttft_ms": 1, "tpot_ms": 1, "default_max_tokens": 2})
    async with await start_refserver(cfg) as srv:
        plan = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "levels": {"concurrency": [1, 2]},
                "stage": {"requests": 10},
                "observe": {"gpu_samplers": [f"http://127.0.0.1:{port}"]},
            }
        )
        observers = build_observers(plan)
        assert [type(o) for o in observers] == [ServingGpuObserver]
        doc = await run_plan(plan, [own, *observers])
    if real.series.available:  # a machine with a GPU: the same run must carry figures instead
        pytest.skip("NVML is available here; this test checks the unavailable path")
    for level in doc.levels:
        assert level.server_metrics is not None
        entry: dict[str, Any] = level.server_metrics["gpu-sampler:node-serving"]
        assert entry["role"] == "serving" and entry["status"] == "unavailable"
        assert "NVML" in entry["reason"] or "pynvml" in entry["reason"]
        assert "gpus" not in entry  # no figures, never zeros
        # the shard's own GPUs stay reported, as the load generator's
        assert isinstance(level.telemetry, dict) and level.telemetry["role"] == "load-generator"
    console = Console(record=True, width=250)
    print_report(doc, console)
    shown = console.export_text()
    assert "Serving GPU" in shown and "serving GPUs unavailable: gpu-sampler:node-serving: " in shown
    html = level_table(doc)  # the HTML report's reference table says the same
    column = html.headers.index("Serving GPU")
    assert [row[column] for row in html.rows] == ["unavailable"] * len(doc.levels)
    assert not task.done()  # one of two clients said done
    assert service.client_done("the-other-shard") == 2
    line = await asyncio.wait_for(task, 10)
    assert line.startswith("serving GPUs on node-serving: unavailable: ") and "every client done" in line


async def test_a_sampler_that_never_answers_is_unavailable_with_the_reason() -> None:
    url = f"http://127.0.0.1:{_free_port()}"
    observer = ServingGpuObserver([url], ready_wait_s=0.3, timeout_s=1)
    cfg = RefServerConfig.model_validate({"ttft_ms": 1, "tpot_ms": 1, "default_max_tokens": 2})
    async with await start_refserver(cfg) as srv:
        plan = RunPlan.from_dict(
            {
                "url": srv.url,
                "backend": "openai",
                "model": cfg.model,
                "levels": {"concurrency": [1]},
                "stage": {"requests": 3},
            }
        )
        doc = await run_plan(plan, [observer])
    entry = doc.levels[0].server_metrics[f"gpu-sampler:{url}"]  # type: ignore[index]
    assert entry["status"] == "unavailable" and "did not answer" in entry["reason"]


def test_sampler_urls_must_be_http_and_distinct() -> None:
    base = {"url": "http://127.0.0.1:1", "levels": {"concurrency": [1]}, "stage": {"requests": 1}}
    with pytest.raises(ObserverArgError, match=r"observe\.gpu_samplers"):
        build_observers(RunPlan.from_dict({**base, "observe": {"gpu_samplers": ["ftp://x"]}}))
    with pytest.raises(ObserverArgError, match="given twice"):
        build_observers(
            RunPlan.from_dict({**base, "observe": {"gpu_samplers": ["http://a:1", "http://a:1/"]}})
        )
