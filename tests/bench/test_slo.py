"""The benchmark's SLO verdict per level and for the run: each declared objective is one check,
a limit is met at the limit, a figure that was not measured fails, and the run passes only when
every level that declared an SLO passed."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_bench.plan import Slo
from mcp_bench.results.document import LevelResult, PercentileTable, SloVerdict
from mcp_bench.results.slo import evaluate, latency_metric, overall, request_latency_limit_ms

E2E = PercentileTable(count=100, mean_ms=40.0, p95_ms=80.0, p99_ms=95.0)
SCHEDULED = PercentileTable(count=100, mean_ms=60.0, p95_ms=120.0, p99_ms=150.0)


def _level(**kw: Any) -> LevelResult:
    base: dict[str, Any] = {
        "index": 0,
        "mode": "closed",
        "sent": 100,
        "completed": 98,
        "failed": 2,
        "throughput_rps": 50.0,
        "latency": {
            "e2e": E2E,
            "e2e_from_schedule": SCHEDULED,
            "ttft": PercentileTable(count=100, p99_ms=12.0),
            "tpot": PercentileTable(count=100, p99_ms=3.0),
        },
    }
    return LevelResult(**(base | kw))


@pytest.mark.parametrize(
    ("latency_from", "open_loop", "metric"),
    [
        ("auto", True, "e2e_from_schedule"),  # coordinated omission: from the scheduled send
        ("auto", False, "e2e"),
        ("sent", True, "e2e"),
        ("sent", False, "e2e"),
        ("scheduled", True, "e2e_from_schedule"),
        ("scheduled", False, "e2e"),  # a closed loop has no schedule
    ],
)
def test_which_latency_an_slo_judges(latency_from: str, open_loop: bool, metric: str) -> None:
    assert latency_metric(Slo(latency_from=latency_from), open_loop) == metric  # type: ignore[arg-type]


def test_the_goodput_bound_is_the_tightest_percentile_target() -> None:
    assert request_latency_limit_ms(Slo(latency_p99_ms=100, latency_p95_ms=60)) == 60
    assert request_latency_limit_ms(Slo(latency_p99_ms=100)) == 100
    assert request_latency_limit_ms(Slo(latency_p95_ms=70, latency_mean_ms=10)) == 70
    assert request_latency_limit_ms(Slo(latency_mean_ms=10)) is None


def test_no_slo_declared_is_no_verdict() -> None:
    assert evaluate(Slo(), _level(), open_loop=False) == SloVerdict(passed=None)


def test_every_objective_is_one_check_met_at_its_limit() -> None:
    slo = Slo(
        latency_p99_ms=95.0,
        latency_p95_ms=80.0,
        latency_mean_ms=40.0,
        ttft_p99_ms=12.0,
        tpot_p99_ms=3.0,
        max_error_rate=0.02,
        throughput_rps=50.0,
    )
    verdict = evaluate(slo, _level(), open_loop=False)
    assert verdict.passed is True
    assert [(c.name, c.target, c.actual, c.passed, c.detail) for c in verdict.checks] == [
        ("latency_p99_ms", 95.0, 95.0, True, "e2e p99"),
        ("latency_p95_ms", 80.0, 80.0, True, "e2e p95"),
        ("latency_mean_ms", 40.0, 40.0, True, "e2e mean"),
        ("ttft_p99_ms", 12.0, 12.0, True, "ttft p99"),
        ("tpot_p99_ms", 3.0, 3.0, True, "tpot p99"),
        ("max_error_rate", 0.02, 0.02, True, "failed+dropped / offered"),
        ("throughput_rps", 50.0, 50.0, True, "completed requests/s (at least)"),
    ]


@pytest.mark.parametrize(
    ("slo", "failing"),
    [
        (Slo(latency_p99_ms=94.9), "latency_p99_ms"),
        (Slo(latency_p95_ms=79.9), "latency_p95_ms"),
        (Slo(latency_mean_ms=39.9), "latency_mean_ms"),
        (Slo(ttft_p99_ms=11.9), "ttft_p99_ms"),
        (Slo(tpot_p99_ms=2.9), "tpot_p99_ms"),
        (Slo(max_error_rate=0.019), "max_error_rate"),
        (Slo(throughput_rps=50.1), "throughput_rps"),
    ],
)
def test_a_figure_past_its_limit_fails_the_level(slo: Slo, failing: str) -> None:
    verdict = evaluate(slo, _level(), open_loop=False)
    assert verdict.passed is False
    assert [(c.name, c.passed) for c in verdict.checks] == [(failing, False)]


def test_an_open_loop_level_is_judged_from_the_scheduled_send() -> None:
    verdict = evaluate(Slo(latency_p99_ms=100.0, latency_mean_ms=50.0), _level(mode="open"), open_loop=True)
    assert verdict.passed is False
    assert [(c.actual, c.passed, c.detail) for c in verdict.checks] == [
        (150.0, False, "e2e_from_schedule p99"),
        (60.0, False, "e2e_from_schedule mean"),
    ]


def test_dropped_arrivals_count_as_errors_of_what_was_offered() -> None:
    """An open loop that could not send a request failed it: (failed + dropped) / (sent + dropped)."""
    verdict = evaluate(Slo(max_error_rate=0.1), _level(sent=80, failed=4, dropped=20), open_loop=True)
    (check,) = verdict.checks
    assert check.actual == pytest.approx(0.24) and check.passed is False


@pytest.mark.parametrize(
    ("slo", "detail"),
    [
        (Slo(latency_p99_ms=10), "no data for e2e p99"),
        (Slo(latency_p95_ms=10), "no data for e2e p95"),
        (Slo(latency_mean_ms=10), "no data for e2e mean"),
        (Slo(ttft_p99_ms=10), "no data for ttft p99"),
        (Slo(tpot_p99_ms=10), "no data for tpot p99"),
        (Slo(max_error_rate=0.5), "no data for failed+dropped / offered"),
        (Slo(throughput_rps=1), "no data for throughput"),
    ],
)
def test_a_figure_that_was_not_measured_fails(slo: Slo, detail: str) -> None:
    empty = LevelResult(index=0, mode="closed")
    verdict = evaluate(slo, empty, open_loop=False)
    assert verdict.passed is False
    (check,) = verdict.checks
    assert (check.actual, check.passed, check.detail) == (None, False, detail)


def _verdict(passed: bool | None) -> LevelResult:
    return _level(slo=SloVerdict(passed=passed))


@pytest.mark.parametrize(
    ("levels", "passed"),
    [
        ([], None),
        ([None, None], None),
        ([True, None], True),
        ([True, True], True),
        ([True, False, None], False),
        ([False], False),
    ],
)
def test_the_run_passes_only_when_every_level_with_an_slo_passed(
    levels: list[bool | None], passed: bool | None
) -> None:
    assert overall([_verdict(p) for p in levels]) is passed


limits = st.floats(min_value=0.1, max_value=500.0)


@settings(deadline=None, max_examples=100, derandomize=True, database=None)
@given(limits, limits, st.floats(min_value=0.0, max_value=1.0))
def test_a_faster_level_never_turns_a_pass_into_a_fail(p99: float, target: float, factor: float) -> None:
    """The SLO ladder is monotone: the same level with every figure ``factor`` times as long."""
    slow = _level(latency={"e2e": PercentileTable(count=1, p99_ms=p99)})
    fast = _level(latency={"e2e": PercentileTable(count=1, p99_ms=p99 * factor)})
    slo = Slo(latency_p99_ms=target)
    assert (evaluate(slo, fast, False).passed or False) >= (evaluate(slo, slow, False).passed or False)
