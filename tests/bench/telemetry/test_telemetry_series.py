"""The bounded sample ring: eviction, windows and their completeness."""

from __future__ import annotations

import math

import pytest

from mcp_bench.telemetry.series import FIELDS, GpuInfo, TelemetrySeries

MS = 1_000_000
GPU0 = GpuInfo(index=0, name="test-gpu", uuid="GPU-0", memory_total_bytes=1000)


def _row(value: float) -> list[float]:
    return [value] * len(FIELDS)


def test_ring_keeps_the_newest_samples_and_says_when_a_window_lost_some() -> None:
    series = TelemetrySeries([GPU0], interval_s=0.01, capacity=4)
    for i in range(10):
        series.append(i * 10 * MS, i * 10 * MS, 1000, _row(float(i)))
    assert len(series) == 4
    assert series.evicted == 6
    whole = series.window()
    assert whole.t_ns == [60 * MS, 70 * MS, 80 * MS, 90 * MS]
    assert whole.values[0]["power_w"] == [6.0, 7.0, 8.0, 9.0]
    assert whole.complete is False  # the run started long before the oldest kept sample
    recent = series.window(70 * MS, 85 * MS)
    assert recent.t_ns == [70 * MS, 80 * MS]
    assert recent.complete is True
    old = series.window(0, 85 * MS)
    assert old.complete is False


def test_window_bounds_are_inclusive_and_values_stay_per_gpu() -> None:
    gpu1 = GpuInfo(index=3, name="other", uuid="GPU-3", memory_total_bytes=2000)
    series = TelemetrySeries([GPU0, gpu1], interval_s=0.01, capacity=16)
    for i in range(5):
        series.append(i * 10 * MS, i * 10 * MS, 0, _row(float(i)) + _row(float(100 + i)))
    window = series.window(10 * MS, 30 * MS)
    assert window.t_ns == [10 * MS, 20 * MS, 30 * MS]
    assert window.values[0]["sm_util_pct"] == [1.0, 2.0, 3.0]
    assert window.values[1]["sm_util_pct"] == [101.0, 102.0, 103.0]


def test_rows_of_the_wrong_width_are_rejected() -> None:
    series = TelemetrySeries([GPU0], interval_s=0.1, capacity=4)
    with pytest.raises(ValueError, match="expected 9 values"):
        series.append(0, 0, 0, [1.0])


def test_unavailable_series_holds_no_samples() -> None:
    series = TelemetrySeries.unavailable("no GPU here", 0.1)
    assert not series.available
    assert series.reason == "no GPU here"
    assert len(series) == 0
    assert series.window().t_ns == []


def test_unread_values_stay_nan_not_zero() -> None:
    series = TelemetrySeries([GPU0], interval_s=0.1, capacity=4)
    row = _row(math.nan)
    row[FIELDS.index("power_w")] = 250.0
    series.append(0, 0, 0, row)
    window = series.window()
    assert window.values[0]["power_w"] == [250.0]
    assert math.isnan(window.values[0]["pcie_tx_kb_s"][0])
