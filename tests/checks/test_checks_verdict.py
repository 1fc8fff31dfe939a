"""The verdict engine: outcome order, Ready, score, and which check explains a failure."""

from __future__ import annotations

import datetime as dt
import itertools
import time

import pytest

from mcp_checks.verdict import SEVERITY, CheckOutcome, Verdict, decide, utc_now, worst


def _check(name: str, outcome: Verdict, reason: str = "") -> CheckOutcome:
    return CheckOutcome(name, outcome, reason or f"{outcome.value}Reason", f"{name} said {outcome.value}")


def test_outcomes_are_ordered_best_to_worst() -> None:
    order = [Verdict.PASS, Verdict.WARN, Verdict.INCONCLUSIVE, Verdict.FAIL, Verdict.ERROR]
    assert sorted(Verdict, key=SEVERITY.__getitem__) == order
    assert set(SEVERITY) == set(Verdict)
    for better, poorer in itertools.combinations(order, 2):
        assert worst([better, poorer]) == worst([poorer, better]) == poorer


def test_worst_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        worst([])


def test_no_checks_is_inconclusive_and_not_ready() -> None:
    verdict = decide([])
    assert verdict.outcome == Verdict.INCONCLUSIVE and verdict.ready is False
    assert verdict.score == 0 and verdict.reason == "NoChecks"


def test_all_pass_is_ready() -> None:
    verdict = decide([_check("a", Verdict.PASS), _check("b", Verdict.PASS)])
    assert (verdict.outcome, verdict.ready, verdict.score) == (Verdict.PASS, True, 100)
    assert verdict.reason == "ChecksPassed" and verdict.message == "2/2 checks passed"


def test_warn_is_ready_but_lowers_the_score() -> None:
    verdict = decide([_check("a", Verdict.PASS), _check("b", Verdict.WARN)])
    assert (verdict.outcome, verdict.ready, verdict.score) == (Verdict.WARN, True, 50)
    assert verdict.reason == "ChecksPassedWithWarnings" and verdict.message == "1/2 checks passed"


@pytest.mark.parametrize("bad", [Verdict.INCONCLUSIVE, Verdict.FAIL, Verdict.ERROR])
def test_anything_below_warn_is_not_ready(bad: Verdict) -> None:
    verdict = decide([_check("a", Verdict.PASS), _check("b", Verdict.WARN), _check("c", bad, "WhyNot")])
    assert verdict.outcome == bad and verdict.ready is False
    assert verdict.reason == "WhyNot"
    assert verdict.message == f"c: c said {bad.value}"
    assert verdict.score == 33  # one of three passed


def test_every_worst_check_is_named_and_the_first_gives_the_reason() -> None:
    checks = [
        _check("probe", Verdict.FAIL, "HealthBelowThreshold"),
        _check("drift", Verdict.INCONCLUSIVE, "NoData"),
        _check("latency", Verdict.FAIL, "LatencyAboveThreshold"),
    ]
    verdict = decide(checks)
    assert verdict.outcome == Verdict.FAIL and verdict.reason == "HealthBelowThreshold"
    assert verdict.message == "probe: probe said Fail; latency: latency said Fail"
    assert "drift" not in verdict.message
    assert verdict.score == 0


@pytest.mark.parametrize(("passed", "total", "score"), [(1, 3, 33), (2, 3, 67), (3, 4, 75), (1, 6, 17)])
def test_score_is_the_rounded_share_of_passes(passed: int, total: int, score: int) -> None:
    checks = [_check(f"c{i}", Verdict.PASS if i < passed else Verdict.WARN) for i in range(total)]
    assert decide(checks).score == score


def test_measured_at_is_rfc3339_utc() -> None:
    stamp = _check("a", Verdict.PASS).measured_at
    assert len(stamp) == 20 and stamp[10] == "T" and stamp.endswith("Z")


def test_no_checks_says_that_nothing_was_verified() -> None:
    assert decide([]).message == "no checks ran, so nothing was verified"


def test_measured_at_is_utc_whatever_the_host_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A host east of UTC must not stamp a check hours ahead (conditions compare these stamps)."""
    monkeypatch.setenv("TZ", "Etc/GMT-5")  # POSIX sign: five hours east of UTC
    time.tzset()
    try:
        before = dt.datetime.now(dt.UTC).replace(microsecond=0)
        stamp = dt.datetime.strptime(utc_now(), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        after = dt.datetime.now(dt.UTC)
    finally:
        monkeypatch.undo()
        time.tzset()
    assert before <= stamp <= after
