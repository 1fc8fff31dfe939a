"""The search policy and the knee detector, as pure functions: replayed against loads whose
answer is known (a load passes when it is at most the capacity)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mcp_bench.saturation import Knee, SearchSpec
from mcp_bench.search.knee import Point, find_knee
from mcp_bench.search.policy import Next, Stop, Tried, next_step


def replay(
    spec: SearchSpec, start: float, passes: Callable[[float], bool], *, integral: bool = False
) -> tuple[list[Next], Stop]:
    """Run the policy to its end against ``passes(load) -> bool``."""
    tried: list[Tried] = []
    steps: list[Next] = []
    while True:
        step = next_step(spec, start, tried, integral=integral)
        if isinstance(step, Stop):
            return steps, step
        assert step.load not in [t.load for t in tried], "a load is never probed twice"
        steps.append(step)
        tried.append(Tried(step.load, passes(step.load)))


@pytest.mark.parametrize("capacity", [3.0, 47.0, 80.0, 333.0, 999.0])
def test_converges_within_tolerance_of_the_capacity(capacity: float) -> None:
    spec = SearchSpec(floor=1, ceiling=1000, tolerance=0.05, max_probes=32)
    steps, stop = replay(spec, 10, lambda load: load <= capacity)
    assert stop.reason == "converged"
    met = max(s.load for s in steps if s.load <= capacity)
    missed = min(s.load for s in steps if s.load > capacity)
    assert met <= capacity < missed
    assert (missed - met) <= 0.05 * met
    assert capacity * 0.95 <= met <= capacity


def test_brackets_up_by_the_factor_then_bisects() -> None:
    spec = SearchSpec(floor=1, ceiling=1000, factor=2, max_probes=32)
    steps, _ = replay(spec, 10, lambda load: load <= 80)
    assert [(s.load, s.step) for s in steps[:6]] == [
        (10, "start"),
        (20, "bracket-up"),
        (40, "bracket-up"),
        (80, "bracket-up"),
        (160, "bracket-up"),
        (120, "bisect"),
    ]


def test_brackets_down_when_the_start_misses() -> None:
    spec = SearchSpec(floor=1, ceiling=1000, factor=4, max_probes=32)
    steps, stop = replay(spec, 400, lambda load: load <= 30)
    assert [s.step for s in steps[:3]] == ["start", "bracket-down", "bracket-down"]
    assert [s.load for s in steps[:3]] == [400, 100, 25]
    assert stop.reason == "converged"


def test_budget_bounds_the_number_of_probes() -> None:
    spec = SearchSpec(floor=1, ceiling=1000, tolerance=0.001, max_probes=5)
    steps, stop = replay(spec, 10, lambda load: load <= 80)
    assert len(steps) == 5
    assert stop.reason == "budget_exhausted"
    assert "between 80 (met) and 160 (missed)" in stop.message


def test_slo_never_met_stops_at_the_floor() -> None:
    spec = SearchSpec(floor=5, ceiling=1000, factor=2, max_probes=32)
    steps, stop = replay(spec, 40, lambda load: False)
    assert [s.load for s in steps] == [40, 20, 10, 5]
    assert stop.reason == "slo_never_met"


def test_ceiling_reached_when_every_load_meets_the_slo() -> None:
    spec = SearchSpec(floor=1, ceiling=100, factor=3, max_probes=32)
    steps, stop = replay(spec, 10, lambda load: True)
    assert [s.load for s in steps] == [10, 30, 90, 100]
    assert stop.reason == "ceiling_reached"


def test_concurrency_is_searched_in_whole_numbers() -> None:
    spec = SearchSpec(floor=1, ceiling=64, factor=2, tolerance=0.01, max_probes=32)
    steps, stop = replay(spec, 1, lambda c: c <= 6, integral=True)
    assert all(float(s.load).is_integer() for s in steps)
    assert stop.reason == "converged"
    assert max(s.load for s in steps if s.load <= 6) == 6
    assert min(s.load for s in steps if s.load > 6) == 7


def test_a_pass_above_a_miss_never_becomes_the_answer() -> None:
    # noise: 100 passed although 90 missed; the bracket stays below the lowest miss
    tried = [Tried(10, True), Tried(90, False), Tried(100, True)]
    step = next_step(SearchSpec(floor=1, ceiling=1000, max_probes=32), 10, tried, integral=False)
    assert isinstance(step, Next) and step.step == "bisect" and step.load == 50


def test_the_floor_and_ceiling_must_be_ordered() -> None:
    with pytest.raises(ValueError, match="above ceiling"):
        SearchSpec(floor=10, ceiling=5)


def _saturating(capacity: float, service_ms: float, loads: list[float]) -> list[Point]:
    """Open loop against a server of fixed capacity: throughput min(load, capacity); past it the
    backlog adds to the mean latency."""
    return [
        Point(x, min(x, capacity), service_ms + (0.0 if x <= capacity else 1000 * (x - capacity) / capacity))
        for x in loads
    ]


def test_the_knee_is_where_throughput_flattens_and_latency_climbs() -> None:
    knee = find_knee(_saturating(80, 50, [10, 20, 40, 80, 160, 120, 100, 90]), 0.5, 0.2)
    assert isinstance(knee, Knee)
    assert knee.load == 80 and knee.next_load == 90


def test_no_knee_while_throughput_keeps_pace() -> None:
    note = find_knee(_saturating(1000, 50, [10, 20, 40, 80]), 0.5, 0.2)
    assert isinstance(note, str) and note.startswith("no knee up to 80")


def test_flat_throughput_alone_is_no_knee() -> None:
    # throughput flat but latency flat too (a client-side cap, say): no knee
    points = [Point(x, 50.0, 20.0) for x in (10, 20, 40)]
    assert isinstance(find_knee(points, 0.5, 0.2), str)


def test_a_knee_needs_two_usable_points() -> None:
    assert "two are needed" in str(find_knee([Point(10, None, 5.0), Point(20, 20.0, 5.0)], 0.5, 0.2))


def test_the_knee_of_a_wide_closed_loop_is_its_slot_count() -> None:
    # 64 slots of 100 ms: past 64 throughput stays at 640/s and latency grows only as fast as
    # concurrency (1.5% from 64 to 65), so the steps bisection leaves are too small to judge alone
    spec = SearchSpec(floor=1, ceiling=1024, tolerance=0.01, max_probes=32)
    steps, _ = replay(spec, 1, lambda c: c <= 64, integral=True)
    points = [Point(s.load, min(s.load, 64) * 10.0, 100.0 * max(1.0, s.load / 64)) for s in steps]
    knee = find_knee(points, 0.5, 0.2)
    assert isinstance(knee, Knee) and knee.load == 64, knee


def test_the_knee_is_the_lowest_load_on_the_plateau() -> None:
    # noise: 38/s measured 37.9 (on the plateau of 39.5), 39 and 40 within it; the knee is 38
    points = [Point(20, 19.8, 100), Point(38, 37.9, 102), Point(39, 39.1, 104), Point(40, 39.5, 110)]
    points.append(Point(80, 39.4, 1500))
    knee = find_knee(points, 0.5, 0.2)
    assert isinstance(knee, Knee) and (knee.load, knee.next_load) == (38, 80)
