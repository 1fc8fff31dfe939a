"""The verdict engine: outcome order, Ready, score, and which check explains a failure."""

from __future__ import annotations

import itertools

import pytest

from mcp_checks.verdict import SEVERITY, CheckOutcome, Outcome, decide, worst


def _check(name: str, outcome: Outcome, reason: str = "") -> CheckOutcome:
    return CheckOutcome(name, outcome, reason or f"{outcome.value}Reason", f"{name} said {outcome.value}")


def test_outcomes_are_ordered_best_to_worst() -> None:
    order = [Outcome.PASS, Outcome.WARN, Outcome.INCONCLUSIVE, Outcome.FAIL, Outcome.ERROR]
    assert sorted(Outcome, key=SEVERITY.__getitem__) == order
    assert set(SEVERITY) == set(Outcome)
    for better, poorer in itertools.combinations(order, 2):
        assert worst([better, poorer]) == worst([poorer, better]) == poorer


def test_worst_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        worst([])


def test_no_checks_is_inconclusive_and_not_ready() -> None:
    verdict = decide([])
    assert verdict.outcome == Outcome.INCONCLUSIVE and verdict.ready is False
    assert verdict.score == 0 and verdict.reason == "NoChecks"


def test_all_pass_is_ready() -> None:
    verdict = decide([_check("a", Outcome.PASS), _check("b", Outcome.PASS)])
    assert (verdict.outcome, verdict.ready, verdict.score) == (Outcome.PASS, True, 100)
    assert verdict.reason == "ChecksPassed" and verdict.message == "2/2 checks passed"


def test_warn_is_ready_but_lowers_the_score() -> None:
    verdict = decide([_check("a", Outcome.PASS), _check("b", Outcome.WARN)])
    assert (verdict.outcome, verdict.ready, verdict.score) == (Outcome.WARN, True, 50)
    assert verdict.reason == "ChecksPassedWithWarnings" and verdict.message == "1/2 checks passed"


@pytest.mark.parametrize("bad", [Outcome.INCONCLUSIVE, Outcome.FAIL, Outcome.ERROR])
def test_anything_below_warn_is_not_ready(bad: Outcome) -> None:
    verdict = decide([_check("a", Outcome.PASS), _check("b", Outcome.WARN), _check("c", bad, "WhyNot")])
    assert verdict.outcome == bad and verdict.ready is False
    assert verdict.reason == "WhyNot"
    assert verdict.message == f"c: c said {bad.value}"
    assert verdict.score == 33  # one of three passed


def test_every_worst_check_is_named_and_the_first_gives_the_reason() -> None:
    checks = [
        _check("probe", Outcome.FAIL, "HealthBelowThreshold"),
        _check("drift", Outcome.INCONCLUSIVE, "NoData"),
        _check("latency", Outcome.FAIL, "LatencyAboveThreshold"),
    ]
    verdict = decide(checks)
    assert verdict.outcome == Outcome.FAIL and verdict.reason == "HealthBelowThreshold"
    assert verdict.message == "probe: probe said Fail; latency: latency said Fail"
    assert "drift" not in verdict.message
    assert verdict.score == 0


@pytest.mark.parametrize(("passed", "total", "score"), [(1, 3, 33), (2, 3, 67), (3, 4, 75), (1, 6, 17)])
def test_score_is_the_rounded_share_of_passes(passed: int, total: int, score: int) -> None:
    checks = [_check(f"c{i}", Outcome.PASS if i < passed else Outcome.WARN) for i in range(total)]
    assert decide(checks).score == score


def test_measured_at_is_rfc3339_utc() -> None:
    stamp = _check("a", Outcome.PASS).measured_at
    assert len(stamp) == 20 and stamp[10] == "T" and stamp.endswith("Z")
