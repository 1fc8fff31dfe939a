"""Per-level summaries and sampler jitter, computed from real sample windows."""

from __future__ import annotations

import math

import pytest

from mcp_bench.telemetry.series import FIELDS, GpuInfo, SampleWindow, TelemetrySeries
from mcp_bench.telemetry.stats import (
    field_summary,
    jitter_stats,
    memory_around,
    percentile,
    plot_points,
    summarise,
    summarise_window,
)

MS = 1_000_000
GIB = 1 << 30
GPU0 = GpuInfo(index=0, name="test-gpu", uuid="GPU-0", memory_total_bytes=100 * GIB)


def _series_with_ramp(n: int = 100) -> TelemetrySeries:
    """A GPU whose utilisation and memory rise linearly: 1..n percent, 1..n GiB; PCIe read every 10th."""
    series = TelemetrySeries([GPU0], interval_s=0.01, capacity=1024)
    for i in range(1, n + 1):
        row = [math.nan] * len(FIELDS)
        row[FIELDS.index("sm_util_pct")] = float(i)
        row[FIELDS.index("mem_used_bytes")] = float(i * GIB)
        row[FIELDS.index("power_w")] = 100.0 + i
        if i % 10 == 0:
            row[FIELDS.index("pcie_tx_kb_s")] = 1000.0 * i
        series.append(i * 10 * MS, i * 10 * MS, 50_000, row)
    series.mark_unsupported(0, "nvlink_tx_kib_s", "no active NVLink link on this device")
    return series


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 95.0) == 95.0
    assert percentile(values, 50.0) == 50.0
    assert percentile(values, 100.0) == 100.0
    assert percentile([7.0], 99.0) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50.0)


def test_field_summary_skips_nan_and_reports_no_data_instead_of_zero() -> None:
    assert field_summary([math.nan, math.nan]) == {"status": "no_data", "samples": 0}
    summary = field_summary([math.nan, 2.0, 4.0, math.nan])
    assert summary["samples"] == 2
    assert summary["mean"] == 3.0
    assert summary["peak"] == 4.0
    assert summary["min"] == 2.0


def test_level_summary_has_peak_mean_p95_and_memory_peak_percent() -> None:
    series = _series_with_ramp()
    level = summarise(series, 11 * MS, 500 * MS)  # samples 2..50
    assert level["status"] == "ok"
    assert level["samples"] == 49
    assert level["complete"] is True
    gpu = level["gpus"][0]
    util = gpu["fields"]["sm_util_pct"]
    assert util["peak"] == 50.0
    assert util["min"] == 2.0
    assert util["mean"] == pytest.approx(26.0)
    assert util["p95"] == 48.0  # nearest rank of 49 samples: ceil(46.55) = 47th value = 48
    assert gpu["memory_used_peak_pct"] == pytest.approx(50.0)
    pcie = gpu["fields"]["pcie_tx_kb_s"]
    assert pcie["samples"] == 5  # read every 10th tick only
    assert gpu["fields"]["nvlink_tx_kib_s"] == {
        "status": "unsupported",
        "reason": "no active NVLink link on this device",
    }
    assert gpu["fields"]["sm_clock_mhz"]["status"] == "no_data"


def test_unavailable_telemetry_summary_carries_the_reason_and_no_figures() -> None:
    summary = summarise(TelemetrySeries.unavailable("NVML could not be initialised: library not found"))
    assert summary == {
        "status": "unavailable",
        "reason": "NVML could not be initialised: library not found",
    }


def test_empty_window_is_no_data() -> None:
    summary = summarise(_series_with_ramp(), 5_000 * MS, 6_000 * MS)
    assert summary["status"] == "no_data"
    assert summary["samples"] == 0


def test_jitter_from_achieved_and_scheduled_times() -> None:
    # Scheduled every 10 ms; achieved late by 0, 1, 0, 3 ms.
    window = SampleWindow(
        interval_s=0.01,
        gpus=[GPU0],
        t_ns=[0, 11 * MS, 20 * MS, 33 * MS],
        scheduled_ns=[0, 10 * MS, 20 * MS, 30 * MS],
        read_ns=[100_000, 200_000, 100_000, 400_000],
        values=[{name: [math.nan] * 4 for name in FIELDS}],
    )
    jitter = jitter_stats(window)
    assert jitter["lateness_ms"] == {"p50": 0.0, "p99": 3.0, "max": 3.0}
    # intervals 11, 9, 13 ms -> errors 1, 1, 3 ms
    assert jitter["interval_error_ms"] == {"p50": 1.0, "p99": 3.0, "max": 3.0}
    assert jitter["achieved_interval_mean_ms"] == pytest.approx(11.0)
    assert jitter["read_ms"] == {"p50": 0.1, "p99": 0.4, "max": 0.4}


def test_summary_of_window_counts_expected_samples() -> None:
    window = _series_with_ramp().window(10 * MS, 1000 * MS)
    summary = summarise_window(window)
    assert summary["expected_samples"] == 99
    assert summary["samples"] == 100


def test_plot_points_are_bucket_means_and_bounded() -> None:
    window = _series_with_ramp(100).window()
    points = plot_points(window, max_points=10)
    assert len(points["t_s"]) == 10
    util = points["gpus"][0]["sm_util_pct"]
    assert util[0] == pytest.approx(5.5)  # mean of 1..10
    assert util[-1] == pytest.approx(95.5)
    assert points["gpus"][0]["sm_clock_mhz"] == [None] * 10
    with pytest.raises(ValueError):
        plot_points(window, 0)


def test_memory_around_a_level_reads_before_peak_and_after_the_settle_wait() -> None:
    """Two GPUs at 2 + 1 GiB at rest, 10 + 6 GiB during the level (samples 10..19), 3 + 1 GiB after."""
    gpu1 = GpuInfo(index=1, name="test-gpu", uuid="GPU-1", memory_total_bytes=100 * GIB)
    series = TelemetrySeries([GPU0, gpu1], interval_s=0.01, capacity=1024)
    for i in range(30):
        during, after = 10 <= i < 20, i >= 20
        rows = []
        for rest, busy, kept in ((2, 10, 3), (1, 6, 1)):
            row = [math.nan] * len(FIELDS)
            row[FIELDS.index("mem_used_bytes")] = float((busy if during else kept if after else rest) * GIB)
            rows.extend(row)
        series.append(i * 10 * MS, i * 10 * MS, 50_000, rows)
    start, end, settled = 10 * 10 * MS, 19 * 10 * MS, 29 * 10 * MS
    mem = memory_around(series, start, end, settled, 0.01)
    assert mem == {
        "before_bytes": 3.0 * GIB,
        "peak_bytes": 16.0 * GIB,
        "after_bytes": 4.0 * GIB,
        "total_bytes": 200.0 * GIB,
    }
    assert memory_around(series, start, end, None, 0.01)["after_bytes"] is None  # type: ignore[index]
    assert memory_around(TelemetrySeries.unavailable("no NVML"), start, end, settled, 0.01) is None
