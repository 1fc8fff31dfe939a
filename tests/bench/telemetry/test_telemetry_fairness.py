"""GPU fairness: std, min/max ratio and Jain index against the reference figures."""

from __future__ import annotations

import math

import pytest

from mcp_bench.fairness import fairness
from mcp_bench.telemetry.fairness import gpu_fairness
from mcp_bench.telemetry.series import FIELDS, GpuInfo, SampleWindow


def test_equal_shares_are_perfectly_fair() -> None:
    report = fairness({"a": 0.8, "b": 0.8, "c": 0.8})
    assert report.std == pytest.approx(0.0, abs=1e-12)
    assert report.min_max_ratio == 1.0
    assert report.jain_index == pytest.approx(1.0)
    assert report.meets_reference is True


def test_one_idle_instance_of_two_gives_jain_one_half() -> None:
    report = fairness({"a": 1.0, "b": 0.0})
    assert report.jain_index == pytest.approx(0.5)
    assert report.min_max_ratio == 0.0
    assert report.std == pytest.approx(0.5)
    assert report.meets_reference is False


def test_known_shares_against_hand_computed_figures() -> None:
    shares = {"a": 0.9, "b": 0.6, "c": 0.75}
    report = fairness(shares)
    mean = 0.75
    std = math.sqrt(((0.15**2) * 2) / 3)
    assert report.mean == pytest.approx(mean)
    assert report.std == pytest.approx(std)
    assert report.cv == pytest.approx(std / mean)
    assert report.min_max_ratio == pytest.approx(0.6 / 0.9)
    assert report.jain_index == pytest.approx(2.25**2 / (3 * (0.81 + 0.36 + 0.5625)))
    assert report.jain_index == pytest.approx(1 / (1 + (std / mean) ** 2))
    # std 0.122 < 0.18, ratio 0.667 > 0.65, Jain 0.974 > 0.85
    assert report.meets_reference is True
    assert fairness({"a": 0.9, "b": 0.55, "c": 0.75}).meets_reference is False  # ratio 0.61


def test_undefined_fairness_is_not_a_pass() -> None:
    assert fairness({"only": 0.7}).meets_reference is None
    idle = fairness({"a": 0.0, "b": 0.0})
    assert idle.meets_reference is None
    assert idle.jain_index is None
    assert idle.reason == "no load on any instance"


def test_percent_values_are_rejected_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"fractions within 0\.\.1"):
        fairness({"a": 85.0, "b": 90.0})
    with pytest.raises(ValueError, match="at least one"):
        fairness({})


def test_gpu_fairness_uses_mean_sm_utilisation_per_gpu() -> None:
    gpus = [GpuInfo(i, "g", f"GPU-{i}", 1) for i in range(3)]
    util = [[90.0, 70.0], [60.0, 60.0], [math.nan, math.nan]]  # third GPU never read
    values = []
    for series in util:
        per = {name: [math.nan, math.nan] for name in FIELDS}
        per["sm_util_pct"] = series
        values.append(per)
    window = SampleWindow(0.1, gpus, [0, 1], [0, 1], [0, 0], values)
    result = gpu_fairness(window)
    assert result["shares"] == {"gpu0": pytest.approx(0.8), "gpu1": pytest.approx(0.6)}
    assert result["instances"] == 2
    assert result["min_max_ratio"] == pytest.approx(0.75)
    empty = SampleWindow(0.1, gpus[:1], [], [], [], [{name: [] for name in FIELDS}])
    assert gpu_fairness(empty)["status"] == "no_data"
