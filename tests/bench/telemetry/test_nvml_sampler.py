"""The NVML sampler: bad settings fail fast, a machine without NVML says `unavailable`, a GPU is sampled."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_bench.telemetry.nvml import GpuSampler, TelemetryConfigError
from mcp_bench.telemetry.stats import summarise

BENCH = Path(__file__).resolve().parents[3] / "bench"


def nvml_unavailable_reason() -> str | None:
    try:
        import pynvml
    except ImportError as exc:
        return f"pynvml not installed: {exc}"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        return f"NVML cannot initialise: {exc}"
    try:
        if pynvml.nvmlDeviceGetCount() == 0:
            return "NVML reports no GPU"
    finally:
        pynvml.nvmlShutdown()
    return None


@pytest.fixture
def nvml_gpu() -> Iterator[None]:
    reason = nvml_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    yield None


@pytest.mark.parametrize("bad", [0.001, 0.0049, 61.0, -1.0, math.nan])
def test_intervals_outside_5ms_to_60s_are_rejected(bad: float) -> None:
    with pytest.raises(TelemetryConfigError, match="interval_s"):
        GpuSampler(bad)


def test_slow_fields_cannot_be_read_faster_than_the_rest() -> None:
    with pytest.raises(TelemetryConfigError, match="slow_interval_s"):
        GpuSampler(0.5, slow_interval_s=0.1)
    assert GpuSampler(0.005).slow_interval_s == 1.0  # PCIe once a second by default
    with pytest.raises(TelemetryConfigError, match="capacity"):
        GpuSampler(0.1, capacity=1)


def test_missing_nvml_library_reports_unavailable_with_reason_never_zeros() -> None:
    reason = nvml_unavailable_reason()
    if reason is None:
        pytest.skip("this machine has a working NVML; the unavailable path cannot be shown here")
    sampler = GpuSampler(0.005).start()
    time.sleep(0.05)
    series = sampler.stop()
    assert series.status == "unavailable"
    assert "NVML" in series.reason or "pynvml" in series.reason
    assert len(series) == 0
    summary = summarise(series, 0, time.perf_counter_ns())
    assert summary["status"] == "unavailable"
    assert summary["reason"] == series.reason
    assert "gpus" not in summary and "samples" not in summary


def test_missing_pynvml_module_reports_unavailable_with_reason() -> None:
    # A fresh interpreter in which importing pynvml fails, as on a machine without nvidia-ml-py.
    code = (
        "import sys; sys.modules['pynvml'] = None\n"
        "from mcp_bench.telemetry.nvml import GpuSampler\n"
        "s = GpuSampler(0.1).start().stop(); print(s.status); print(s.reason)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True, cwd=BENCH
    )
    status, reason = out.stdout.splitlines()[:2]
    assert status == "unavailable"
    assert "pynvml" in reason and "not installed" in reason


def test_sampler_module_imports_with_the_standard_library_only() -> None:
    # The GPU benchmark loads it from bench/ on a machine without our dependencies.
    code = (
        "import sys; import mcp_bench.telemetry.nvml\n"
        "third = sorted(m.split('.')[0] for m in sys.modules if m.split('.')[0] in "
        "{'pydantic','aiohttp','prometheus_client','hdrhistogram','numpy','pynvml','yaml'})\n"
        "print(third)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=30, check=True, cwd=BENCH
    )
    assert out.stdout.strip() == "[]"


@pytest.mark.gpu
def test_sampler_reads_a_real_gpu(nvml_gpu: None) -> None:
    sampler = GpuSampler(0.01).start()
    start = time.perf_counter_ns()
    time.sleep(0.5)
    end = time.perf_counter_ns()
    series = sampler.stop()
    assert series.status == "ok"
    summary = summarise(series, start, end)
    assert summary["samples"] >= 10
    for gpu in summary["gpus"]:
        assert gpu["memory_total_bytes"] > 0
        mem = gpu["fields"]["mem_used_bytes"]
        # An idle GPU with no process really has 0 bytes used (NVML memory v2, as nvidia-smi shows).
        assert mem["status"] == "ok" and mem["samples"] >= 10 and mem["peak"] >= 0
        assert 0 <= gpu["memory_used_peak_pct"] <= 100
        power = gpu["fields"]["power_w"]
        assert power["status"] == "ok" and power["min"] > 0  # a powered GPU never draws 0 W
        clock = gpu["fields"]["sm_clock_mhz"]
        assert clock["status"] == "unsupported" or clock["min"] > 0
    assert series.stats.cpu_ns > 0
