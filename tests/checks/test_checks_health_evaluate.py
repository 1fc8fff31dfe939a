"""The health verdict from a round's figures, edge by edge: each limit is inclusive (at the limit
is within it), each band says what it saw, a refused address is an Error whatever the prober's
lag, and the typed spec reaches the round unchanged."""

from __future__ import annotations

import socket
from collections import Counter
from typing import Any

import pytest

from mcp_checks.health import HealthProbeSpec, ProbeSamples, evaluate
from mcp_checks.prober_lag import LoopLag
from mcp_checks.specs import HealthProbe
from mcp_checks.verdict import Verdict

URL = "http://127.0.0.1:1/health"
HUNDRED = [float(v) for v in range(1, 101)]  # P50 50 ms, P90 90 ms, P99 99 ms


def _spec(**kw: Any) -> HealthProbeSpec:
    base: dict[str, Any] = {"min_success_ratio": 0.9, "max_p99_ms": None, "max_prober_lag_ms": 10.0}
    return HealthProbeSpec(url=URL, **(base | kw))


def _samples(
    ok_ms: list[float] | None = None, lag_ms: list[float] | None = None, **failures: int
) -> ProbeSamples:
    return ProbeSamples(
        latencies_ms=list(HUNDRED if ok_ms is None else ok_ms),
        failures=Counter(failures),
        round_ms=250.0,
        lag=LoopLag(list(lag_ms or [])),
    )


def test_a_passing_round_says_how_many_succeeded_and_its_percentiles() -> None:
    outcome = evaluate(_spec(), _samples())
    assert (outcome.outcome, outcome.reason) == (Verdict.PASS, "HealthProbePassed")
    assert outcome.message == "100/100 probes succeeded, P99 99.00ms"
    assert {k: outcome.observed[k] for k in ("p50", "p90", "p99", "round")} == {
        "p50": "50.00ms",
        "p90": "90.00ms",
        "p99": "99.00ms",
        "round": "250.00ms",
    }


@pytest.mark.parametrize(
    ("limits", "figure"),
    [
        ({"max_p50_ms": 50.0}, "P50"),
        ({"max_p99_ms": 99.0}, "P99"),
        ({"max_round_ms": 250.0}, "round"),
    ],
)
def test_a_figure_at_its_limit_is_within_it(limits: dict[str, float], figure: str) -> None:
    assert evaluate(_spec(**limits), _samples()).outcome == Verdict.PASS
    just_below = {k: v - 0.01 for k, v in limits.items()}
    breached = evaluate(_spec(**just_below), _samples())
    assert (breached.outcome, breached.reason) == (Verdict.FAIL, "LatencyAboveThreshold")
    assert breached.message.startswith(f"{figure} ")


def test_every_breached_limit_is_named() -> None:
    outcome = evaluate(_spec(max_p50_ms=10.0, max_p99_ms=20.0, max_round_ms=100.0), _samples())
    assert outcome.message == "P50 50.00ms > 10.00ms; P99 99.00ms > 20.00ms; round 250.00ms > 100.00ms"


def test_a_success_ratio_at_the_threshold_passes_and_below_it_fails() -> None:
    at = evaluate(_spec(min_success_ratio=0.9), _samples(HUNDRED[:90], http_503=10))
    assert at.outcome == Verdict.PASS and at.observed["successRatio"] == "0.900000"
    below = evaluate(_spec(min_success_ratio=0.9), _samples(HUNDRED[:89], http_503=11))
    assert (below.outcome, below.reason) == (Verdict.FAIL, "HealthBelowThreshold")
    assert below.message == "success ratio 89.0000% is below 90.0000%"


def test_the_warn_bands_are_named_with_what_they_saw() -> None:
    spec = _spec(min_success_ratio=0.5, warn_success_ratio=0.95, warn_p99_ms=90.0)
    outcome = evaluate(spec, _samples(HUNDRED[:90], http_503=10))  # P99 90 ms: at its band
    assert (outcome.outcome, outcome.reason) == (Verdict.WARN, "NearThreshold")
    assert outcome.message == "success ratio 90.0000% is below the warn band 95.0000% (within the limits)"
    assert outcome.thresholds["warnSuccessRatio"] == "0.95" and outcome.thresholds["warnP99"] == "90.00ms"
    slow = evaluate(_spec(warn_p99_ms=98.0), _samples())
    assert (slow.outcome, slow.message) == (
        Verdict.WARN,
        "P99 99.00ms is above the warn band 98.00ms (within the limits)",
    )
    both = evaluate(_spec(warn_success_ratio=1.0, warn_p99_ms=98.0), _samples(HUNDRED, http_503=1))
    assert both.message == (
        "success ratio 99.0099% is below the warn band 100.0000%; "
        "P99 99.00ms is above the warn band 98.00ms (within the limits)"
    )


def test_a_figure_at_its_warn_band_is_no_warning() -> None:
    spec = _spec(warn_success_ratio=0.9, warn_p99_ms=99.0)
    assert evaluate(spec, _samples(HUNDRED[:90], http_503=10)).outcome == Verdict.PASS
    assert evaluate(spec, _samples()).outcome == Verdict.PASS


def test_a_threshold_no_round_can_verify_says_so() -> None:
    outcome = evaluate(_spec(min_success_ratio=1.0), _samples())
    assert (outcome.outcome, outcome.reason) == (Verdict.INCONCLUSIVE, "InsufficientSamples")
    assert outcome.message == (
        "100 probes cannot verify a success ratio of 1.0; no finite round can (0.9999 needs 10,000)"
    )


def test_no_samples_says_no_request_was_sent() -> None:
    assert evaluate(_spec(), ProbeSamples()).message == "the probe round sent no requests"


def test_failures_are_listed_by_kind_in_order() -> None:
    outcome = evaluate(_spec(), _samples(timeout=2, http_503=3, connect=1))
    assert outcome.observed["failures"] == "connect=1, http_503=3, timeout=2"


@pytest.mark.parametrize("kinds", [{"disconnected": 3}, {"client_error": 2}, {"timeout": 1, "connect": 1}])
def test_no_answer_at_all_is_an_error_of_reach(kinds: dict[str, int]) -> None:
    outcome = evaluate(_spec(), ProbeSamples(failures=Counter(kinds)))
    assert (outcome.outcome, outcome.reason) == (Verdict.ERROR, "TargetUnreachable")
    assert outcome.message.startswith(f"none of {sum(kinds.values())} probes of {URL} got an answer (")


def test_every_kind_of_no_answer_together_is_still_unreachable() -> None:
    kinds = {"connect": 1, "timeout": 1, "disconnected": 1, "client_error": 1}
    assert evaluate(_spec(), ProbeSamples(failures=Counter(kinds))).reason == "TargetUnreachable"


def test_only_bad_answers_fail_and_say_so() -> None:
    outcome = evaluate(_spec(), _samples([], http_500=4, timeout=1))
    assert (outcome.outcome, outcome.reason) == (Verdict.FAIL, "HealthBelowThreshold")
    assert outcome.message == "none of 5 probes succeeded (http_500=4, timeout=1)"


def test_a_refused_address_is_an_error_before_any_figure() -> None:
    outcome = evaluate(_spec(), _samples(HUNDRED[:5], not_allowed=3))
    assert (outcome.outcome, outcome.reason) == (Verdict.ERROR, "TargetNotAllowed")
    assert outcome.message == (
        f"3 of 8 probes of {URL} were refused before connecting: the address reached is one the "
        "target policy refuses"
    )


@pytest.mark.parametrize("kinds", [{"not_allowed": 4}, {"not_allowed": 2, "connect": 2}])
def test_a_refusal_stands_however_late_the_prober(kinds: dict[str, int]) -> None:
    outcome = evaluate(_spec(), ProbeSamples(failures=Counter(kinds), lag=LoopLag([500.0] * 10)))
    assert (outcome.outcome, outcome.reason) == (Verdict.ERROR, "TargetNotAllowed")


def test_an_overloaded_prober_names_itself_and_what_it_would_have_said() -> None:
    lag = [float(v) for v in range(1, 101)]  # P99 99 ms, max 100 ms
    outcome = evaluate(_spec(max_p99_ms=10.0), _samples(lag_ms=lag))
    assert (outcome.name, outcome.outcome, outcome.reason) == (
        "health-probe",
        Verdict.INCONCLUSIVE,
        "ProberOverloaded",
    )
    assert outcome.observed["proberLagP99"] == "99.00ms" and outcome.observed["proberLagMax"] == "100.00ms"
    assert outcome.message.startswith("the prober's own loop ran 99.00ms late at P99 (limit 10.00ms)")
    assert outcome.message.endswith("it would have been Fail (LatencyAboveThreshold: P99 99.00ms > 10.00ms)")


def test_a_prober_late_by_exactly_its_limit_still_judges() -> None:
    outcome = evaluate(
        _spec(max_p99_ms=10.0, max_prober_lag_ms=99.0), _samples(lag_ms=[float(v) for v in range(1, 101)])
    )
    assert (outcome.outcome, outcome.reason) == (Verdict.FAIL, "LatencyAboveThreshold")


def _refusing_factory(addr_info: tuple[Any, ...]) -> socket.socket:
    raise OSError(13, "refused")


def test_the_typed_spec_reaches_the_round_unchanged() -> None:
    typed = HealthProbe(
        requests=321,
        concurrency=7,
        timeout_ms=2500,
        expected_status=[200, 204],
        min_success_ratio=0.75,
        max_p50_ms=11.0,
        max_p99_ms=22.0,
        max_round_ms=3333.0,
        warn_success_ratio=0.8,
        warn_p99_ms=20.0,
        max_prober_lag_ms=4.0,
    )
    spec = HealthProbeSpec.from_spec(typed, "http://svc:8000/healthz", socket_factory=_refusing_factory)
    assert spec == HealthProbeSpec(
        url="http://svc:8000/healthz",
        requests=321,
        concurrency=7,
        timeout_s=2.5,
        expected_status=(200, 204),
        min_success_ratio=0.75,
        max_p50_ms=11.0,
        max_p99_ms=22.0,
        max_round_ms=3333.0,
        warn_success_ratio=0.8,
        warn_p99_ms=20.0,
        max_prober_lag_ms=4.0,
    )
    assert spec.socket_factory is _refusing_factory  # not compared by ==
    assert HealthProbeSpec.from_spec(typed, "http://svc/").socket_factory is None
