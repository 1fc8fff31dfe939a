"""Each KPI row whole, as the board and the verdict engine read it: name, verdict, reason, the
figure, the limit, the warn band and the evidence, on each side of every edge (found by
mutation testing: the verdicts were tested, most of what a row says was not)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from mcp_checks.api import Verdict
from mcp_operator.api.drill import KpiThresholds
from mcp_operator.readiness.drill.kpi import (
    Jump,
    KpiResult,
    hot_update_kpis,
    jump_kpi,
    jump_points,
    load_generator_kpi,
    refused_outcome,
    seconds_kpi,
    success_kpi,
)
from mcp_operator.readiness.drill.load import StageFigures, WindowFigures

RATIO = KpiThresholds(health_success_ratio=0.99, health_success_ratio_warn=0.995)  # 100 probes needed


def _row(result: KpiResult) -> tuple[str, Verdict, str, str, str, str]:
    return (result.name, result.verdict, result.reason, result.measured, result.threshold, result.warn)


@pytest.mark.parametrize(
    ("ok", "total", "row"),
    [
        (0, 0, (Verdict.INCONCLUSIVE, "NoSamples", "no requests")),
        (98, 100, (Verdict.FAIL, "HealthBelowThreshold", "98.0000% of 100")),
        (99, 100, (Verdict.WARN, "HealthNearThreshold", "99.0000% of 100")),  # at the limit: within
        (
            50,
            50,
            (
                Verdict.INCONCLUSIVE,
                "InsufficientSamples",
                "100.0000% of 50; 100 are needed to verify the limit",
            ),
        ),
        (995, 1000, (Verdict.PASS, "HealthMet", "99.5000% of 1000")),  # at the warn band: no warning
        (1000, 1000, (Verdict.PASS, "HealthMet", "100.0000% of 1000")),
    ],
)
def test_the_success_row_on_each_side_of_its_edges(
    ok: int, total: int, row: tuple[Verdict, str, str]
) -> None:
    assert _row(success_kpi(ok, total, RATIO)) == ("healthSuccessRatio", *row, ">= 99.0000%", "< 99.5000%")


def test_the_success_row_without_a_warn_band_and_at_the_extremes() -> None:
    plain = success_kpi(99, 100, KpiThresholds(health_success_ratio=0.99))
    assert (plain.verdict, plain.warn) == (Verdict.PASS, "")
    assert success_kpi(99, 100, KpiThresholds(health_success_ratio=1.0)).reason == "HealthBelowThreshold"
    assert success_kpi(1, 1, KpiThresholds(health_success_ratio=0.0)).verdict == Verdict.PASS  # 1 is enough
    # 1 / (1 - 0.97) is 33.3: 34 probes, not 33, before one failure could leave 97 %
    assert success_kpi(33, 33, KpiThresholds(health_success_ratio=0.97)).reason == "InsufficientSamples"
    assert success_kpi(34, 34, KpiThresholds(health_success_ratio=0.97)).reason == "HealthMet"


def test_a_seconds_row_judges_the_worst_value_and_names_it() -> None:
    values = [("fault a", 3.0), ("fault b", 12.5), ("fault c", 1.0)]
    warned = seconds_kpi("recoverySeconds", values, 17.0, 10.0, "NeverRecovered")
    assert warned is not None and (*_row(warned), warned.evidence) == (
        "recoverySeconds",
        Verdict.WARN,
        "NearThreshold",
        "12.50 s",
        "<= 17 s",
        "> 10 s",
        "fault b",
    )
    failed = seconds_kpi("recoverySeconds", values, 12.0, 10.0, "NeverRecovered")
    assert failed is not None and _row(failed)[1:] == (
        Verdict.FAIL,
        "AboveThreshold",
        "12.50 s",
        "<= 12 s",
        "> 10 s",
    )
    never = seconds_kpi("recoverySeconds", [*values, ("fault d", None)], 17.0, None, "NeverRecovered")
    assert never is not None and (*_row(never)[1:], never.evidence) == (
        Verdict.FAIL,
        "NeverRecovered",
        "never, within the drill",
        "<= 17 s",
        "",
        "fault d",
    )
    assert seconds_kpi("x", [], 1.0, None, "Never") is None


def test_a_hot_update_row_has_its_own_limit_warn_band_and_reason() -> None:
    t = KpiThresholds(hot_update_seconds=2.5, hot_update_seconds_warn=1.0)
    slow, never = hot_update_kpis(
        [("c", "configHotUpdate c (rollout)", 1.5), ("d", "configHotUpdate d", None)], t
    )
    assert (*_row(slow), slow.fault, slow.evidence) == (
        "hotUpdateSeconds",
        Verdict.WARN,
        "NearThreshold",
        "1.50 s",
        "<= 2.5 s",
        "> 1 s",
        "c",
        "configHotUpdate c (rollout)",
    )
    assert (never.verdict, never.reason, never.fault) == (Verdict.FAIL, "NotRolledOut", "d")


def _stage(p99: float, windows: list[tuple[float | None, int, int]], **kw: object) -> StageFigures:
    """A stage of windows (P99, completed, failed), 5 s each."""
    return StageFigures(
        requested="10 req/s",
        achieved_rps=10.0,
        p50_ms=p99 / 2,
        p99_ms=p99,
        completed=sum(c for _, c, _ in windows),
        errors=sum(e for _, _, e in windows),
        windows=tuple(WindowFigures(i * 5.0, p, c, e) for i, (p, c, e) in enumerate(windows)),
        **kw,  # type: ignore[arg-type]
    )


def test_a_window_exactly_at_the_jump_factor_is_no_jump() -> None:
    calm = ("baseline", _stage(10.0, [(10.0, 100, 0)]))
    assert jump_points([calm, ("mixed", _stage(30.0, [(30.0, 100, 0)]))], 3.0) == []
    assert jump_points([calm, ("mixed", _stage(30.1, [(30.1, 100, 0)]))], 3.0) != []


def test_one_failure_in_a_hundred_is_the_share_a_p99_allows() -> None:
    calm = ("baseline", _stage(10.0, [(10.0, 100, 0)]))
    assert jump_points([calm, ("s", _stage(10.0, [(10.0, 99, 1)]))], 3.0) == []  # exactly 1 %
    (jump,) = jump_points([calm, ("s", _stage(10.0, [(10.0, 98, 2)]))], 3.0)
    assert (jump.p99_ms, jump.errors, jump.requests) == (None, 2, 100)
    (alone,) = jump_points([calm, ("s", _stage(10.0, [(None, 0, 1)]))], 3.0)  # one request, failed
    assert (alone.p99_ms, alone.requests) == (None, 1)
    assert jump_points([calm, ("s", _stage(10.0, [(None, 0, 0)]))], 3.0) == []  # an empty window


def test_a_baseline_under_a_millisecond_still_judges() -> None:
    calm = ("baseline", _stage(0.5, [(0.5, 100, 0)]))
    (jump,) = jump_points([calm, ("spike", _stage(5.0, [(5.0, 100, 0)]))], 3.0)
    assert jump.describe() == "spike at 0.0 s: P99 5.00 ms vs 0.50 ms (10.0x)"
    zero = ("baseline", _stage(0.0, [(0.0, 100, 0)]))
    assert jump_points([zero, ("spike", _stage(5.0, [(5.0, 100, 0)]))], 3.0) == []  # no baseline


def test_a_jump_says_where_how_high_and_what_failed() -> None:
    assert Jump("spike", 12.0, 45.0, 10.0, 3, 100).describe() == (
        "spike at 12.0 s: P99 45.00 ms vs 10.00 ms (4.5x), 3 failed"
    )
    assert Jump("spike", 12.0, None, 10.0, 30, 100).describe() == (
        "spike at 12.0 s: 30 of 100 requests failed, so P99 is a failure (vs 10.00 ms)"
    )


def test_the_jump_row_whole() -> None:
    t = KpiThresholds(p99_jump_factor=3.0)
    threshold = "P99 <= 3x the last calm stage's, failures <= 1%"
    calm = [("baseline", _stage(10.0, [(10.0, 100, 0)])), ("mixed", _stage(20.0, [(20.0, 100, 0)]))]
    quiet = jump_kpi(calm, t)
    assert quiet is not None and (*_row(quiet), quiet.evidence) == (
        "p99JumpPoint",
        Verdict.PASS,
        "NoJump",
        "no jump",
        threshold,
        "",
        "",
    )
    jumped = jump_kpi(
        [*calm, ("spike", _stage(90.0, [(90.0, 100, 0)])), ("soak", _stage(100.0, [(100.0, 100, 0)]))], t
    )
    assert jumped is not None and (*_row(jumped), jumped.evidence) == (
        "p99JumpPoint",
        Verdict.WARN,
        "P99Jumped",
        "spike at 0.0 s: P99 90.00 ms vs 20.00 ms (4.5x); soak at 0.0 s: P99 100.00 ms vs 20.00 ms (5.0x)",
        threshold,
        "",
        "stages spike, soak",
    )
    assert jump_kpi(calm[:1], t) is None  # one loaded stage: nothing to compare


LOAD_THRESHOLD = "the planned load sent (within arrival noise); no finding resting on a busy client"


def _busy(p99: float, service_p99: float | None, requests: int = 100, **kw: object) -> StageFigures:
    """One window whose client passed its bound: P99 from the schedule, and from the actual send."""
    window = WindowFigures(0.0, p99, requests, 0, service_p99_ms=service_p99, client_busy=True)
    lag = ("at 0 s: worker 0: schedule lag P99 16.5 ms > 10 ms",)
    stage = _stage(p99, [(p99, requests, 0)], client_bound=lag, service_p99_ms=service_p99, **kw)
    return replace(stage, windows=(window,))


def test_the_load_generator_row_whole() -> None:
    calm = _stage(10.0, [(10.0, 100, 0)])
    kept = load_generator_kpi([("a", calm), ("b", calm)], 3.0)
    assert kept is not None and _row(kept) == (
        "loadGenerator",
        Verdict.PASS,
        "ClientKeptUp",
        "2 stages kept up",
        LOAD_THRESHOLD,
        "",
    )
    busy = load_generator_kpi(
        [
            ("a", _stage(10.0, [(10.0, 100, 0)], client_bound=("cpu 98%", "lag 2 s", "third"), dropped=4)),
            ("b", _stage(10.0, [(10.0, 100, 0)], client_bound=("cpu 95%",))),
        ],
        3.0,
    )
    assert busy is not None and (*_row(busy), busy.evidence) == (
        "loadGenerator",
        Verdict.PASS,
        "ClientBusyFindingsStand",
        "a: cpu 98%, lag 2 s; b: cpu 95%; judged on the latency from the actual send, no finding rests "
        "on it; 4 arrivals dropped by the client's in-flight cap",
        LOAD_THRESHOLD,
        "",
        "stages a, b",
    )
    assert load_generator_kpi([], 3.0) is None


def test_a_late_client_is_judged_on_the_latency_from_the_actual_send() -> None:
    """The client's own lateness lifted P99 from the schedule past the factor; from the actual
    send the service stayed within it: no jump, and the row says the client was busy."""
    calm = ("baseline", _stage(2.0, [(2.0, 100, 0)]))
    late = ("spike", _busy(16.5, service_p99=5.9))
    assert jump_points([calm, late], 3.0) == []
    row = load_generator_kpi([calm, late], 3.0)
    assert row is not None and (row.verdict, row.reason, row.evidence) == (
        Verdict.PASS,
        "ClientBusyFindingsStand",
        "stages spike",
    )
    at_the_edge = ("spike", _busy(16.5, service_p99=6.0))  # 3 x 2.0: within
    assert jump_points([calm, at_the_edge], 3.0) == []


def test_a_jump_a_busy_client_may_have_made_is_inconclusive() -> None:
    calm = ("baseline", _stage(2.0, [(2.0, 100, 0)]))
    late = ("spike", _busy(16.5, service_p99=6.1))
    (jump,) = jump_points([calm, late], 3.0)
    assert (jump.stage, jump.p99_ms, jump.client_busy) == ("spike", 16.5, True)
    quiet = ("mixed", _stage(2.0, [(2.0, 100, 0)], client_bound=("cpu 95%",)))
    row = load_generator_kpi([calm, quiet, late], 3.0)
    assert row is not None and (*_row(row), row.evidence) == (
        "loadGenerator",
        Verdict.INCONCLUSIVE,
        "LoadGeneratorSaturated",
        "spike: at 0 s: worker 0: schedule lag P99 16.5 ms > 10 ms; the P99 jump there may be the client's",
        LOAD_THRESHOLD,
        "",
        "stages spike",
    )
    twice = load_generator_kpi([calm, late, ("again", _busy(16.5, service_p99=6.1))], 3.0)
    assert twice is not None and twice.evidence == "stages spike, again"
    no_send_figure = ("spike", _busy(16.5, service_p99=None))  # closed loop: nothing to separate
    assert [j.client_busy for j in jump_points([calm, no_send_figure], 3.0)] == [True]
    idle = ("spike", _stage(16.5, [(16.5, 100, 0)]))  # no busy client: the service's jump alone
    assert [j.client_busy for j in jump_points([calm, idle], 3.0)] == [False]
    assert load_generator_kpi([calm, idle], 3.0).reason == "ClientKeptUp"  # type: ignore[union-attr]


def test_a_stage_short_of_its_planned_load_beyond_arrival_noise_is_inconclusive() -> None:
    """400 planned arrivals: Poisson noise allows 400 - 3 x 20 = 340; 339 sent is short."""
    at_noise = _stage(2.0, [(2.0, 340, 0)], planned_requests=400.0)
    short = _stage(2.0, [(2.0, 330, 9)], planned_requests=400.0, dropped=61)
    calm = _stage(2.0, [(2.0, 100, 0)])
    assert load_generator_kpi([("b", calm), ("m", at_noise)], 3.0).reason == "ClientKeptUp"  # type: ignore[union-attr]
    row = load_generator_kpi([("b", calm), ("m", short)], 3.0)
    assert row is not None and (*_row(row), row.evidence) == (
        "loadGenerator",
        Verdict.INCONCLUSIVE,
        "LoadNotDelivered",
        "m: sent 339 of 400 planned (85%); 61 arrivals dropped by the client's in-flight cap",
        LOAD_THRESHOLD,
        "",
        "stages m",
    )
    both = load_generator_kpi([("b", calm), ("m", short), ("s", short)], 3.0)
    assert both is not None and (both.measured, both.evidence) == (
        "m: sent 339 of 400 planned (85%); s: sent 339 of 400 planned (85%); 122 arrivals dropped by the "
        "client's in-flight cap",
        "stages m, s",
    )
    closed = _stage(2.0, [(2.0, 10, 0)])  # no plan of arrivals: nothing to fall short of
    assert load_generator_kpi([("c", closed)], 3.0).reason == "ClientKeptUp"  # type: ignore[union-attr]


def test_a_p99_needs_a_hundred_requests_behind_it() -> None:
    """A window of fewer requests is not judged on its P99 (it is one of its slowest few); the
    stage's whole P99 is, where the stage has enough; a stage of too few is no baseline."""
    calm = ("baseline", _stage(2.0, [(2.0, 100, 0)]))
    small_windows = ("mixed", _stage(2.5, [(9.0, 60, 0), (2.0, 60, 0)]))  # a slow request in 60
    assert jump_points([calm, small_windows], 3.0) == []
    slow_stage = ("mixed", _stage(7.0, [(9.0, 60, 0), (2.0, 60, 0)]))
    (jump,) = jump_points([calm, slow_stage], 3.0)
    assert (jump.offset_s, jump.p99_ms, jump.requests) == (0.0, 7.0, 120)
    one_window_enough = ("mixed", _stage(2.5, [(9.0, 99, 0), (9.0, 100, 0)]))
    (jump,) = jump_points([calm, one_window_enough], 3.0)
    assert (jump.offset_s, jump.requests) == (5.0, 100)
    tiny = ("baseline", _stage(0.5, [(0.5, 99, 0)]))
    assert jump_points([tiny, ("mixed", _stage(9.0, [(9.0, 100, 0)]))], 3.0) == []  # no baseline
    assert jump_points([tiny, calm, ("spike", _stage(6.1, [(6.1, 100, 0)]))], 3.0) != []
    exactly = ("mixed", _stage(7.0, [(9.0, 50, 0), (2.0, 50, 0)]))  # 100 in all: the stage judged
    assert [j.requests for j in jump_points([calm, exactly], 3.0)] == [100]
    # 99 answered and 1 failed in small windows: 100 requests, so the stage's P99 is judged
    # first (at its start), before the window whose one failure is 2 % of its 50
    failed_late = ("mixed", _stage(7.0, [(9.0, 50, 0), (2.0, 49, 1)]))
    assert [(j.offset_s, j.p99_ms) for j in jump_points([calm, failed_late], 3.0)] == [(0.0, 7.0)]
    with_a_failure = ("baseline", _stage(2.0, [(2.0, 99, 1)]))  # 100 requests, one failed: a baseline
    assert [j.stage for j in jump_points([with_a_failure, ("m", _stage(9.0, [(9.0, 100, 0)]))], 3.0)] == ["m"]


def test_a_stage_of_small_windows_with_a_busy_client_is_judged_whole_on_both_latencies() -> None:
    calm = ("baseline", _stage(2.0, [(2.0, 100, 0)]))

    def busy(service_p99: float | None) -> StageFigures:
        windows = tuple(WindowFigures(i * 5.0, 16.5, 60, 0, client_busy=i == 1) for i in range(2))
        return replace(_busy(16.5, service_p99, requests=120), windows=windows)

    assert jump_points([calm, ("spike", busy(5.9))], 3.0) == []
    (jump,) = jump_points([calm, ("spike", busy(6.1))], 3.0)
    assert (jump.offset_s, jump.p99_ms, jump.requests, jump.client_busy) == (0.0, 16.5, 120, True)


def test_too_few_requests_for_a_p99_is_inconclusive_not_no_jump() -> None:
    t = KpiThresholds()
    tiny = ("baseline", _stage(0.5, [(0.5, 12, 0)]))
    calm = ("mixed", _stage(2.0, [(2.0, 99, 1)]))  # 1 failed of 100: within what a P99 allows
    spike = ("spike", _stage(2.0, [(2.0, 100, 0)]))
    row = jump_kpi([tiny, calm, spike], t)
    assert row is not None and (*_row(row), row.evidence) == (
        "p99JumpPoint",
        Verdict.INCONCLUSIVE,
        "TooFewRequests",
        "baseline: 12 requests; mixed: 100 requests: a P99 needs 100 (raise the stage's rate or time: "
        "spec.drill.durationScale)",
        "P99 <= 3x the last calm stage's, failures <= 1%",
        "",
        "stages baseline, mixed",
    )
    judged = jump_kpi([calm, spike], t)
    assert judged is not None and judged.reason == "NoJump"
    jumped = jump_kpi([tiny, calm, ("spike", _stage(9.0, [(9.0, 100, 0)]))], t)
    assert jumped is not None and jumped.reason == "P99Jumped"  # a jump found stands


def test_a_row_on_the_wire_and_as_a_check() -> None:
    row = KpiResult(
        "recoverySeconds", Verdict.WARN, "NearThreshold", "12.50 s", "<= 17 s", "> 10 s", "pod a", "f1"
    )
    assert row.to_wire() == {
        "name": "recoverySeconds",
        "fault": "f1",
        "verdict": "Warn",
        "mark": "!",
        "measured": "12.50 s",
        "threshold": "<= 17 s",
        "warn": "> 10 s",
        "evidence": "pod a",
    }
    outcome = row.outcome()
    assert (outcome.name, outcome.outcome, outcome.reason, outcome.message) == (
        "kpi:recoverySeconds:f1",
        Verdict.WARN,
        "NearThreshold",
        "12.50 s against <= 17 s (pod a)",
    )
    assert (outcome.observed, outcome.thresholds) == (
        {"measured": "12.50 s"},
        {"limit": "<= 17 s", "warn": "> 10 s"},
    )
    bare = KpiResult("p99JumpPoint", Verdict.PASS, "NoJump", "no jump", "P99 <= 3x").outcome()
    assert (bare.name, bare.message, bare.thresholds) == (
        "kpi:p99JumpPoint",
        "no jump against P99 <= 3x",
        {"limit": "P99 <= 3x"},
    )
    assert "fault" not in KpiResult("a", Verdict.PASS, "R", "m", "t").to_wire()


def test_a_fault_that_could_not_be_injected_is_an_error_that_says_why() -> None:
    outcome = refused_outcome("zone-1", "FaultRefused", "namespace shop did not opt in")
    assert (outcome.name, outcome.outcome, outcome.reason, outcome.message) == (
        "fault:zone-1",
        Verdict.ERROR,
        "FaultRefused",
        "namespace shop did not opt in",
    )
    [finding] = outcome.findings
    assert (finding.subject, finding.outcome, finding.reason, finding.observed) == (
        "zone-1",
        Verdict.ERROR,
        "FaultRefused",
        "namespace shop did not opt in",
    )
