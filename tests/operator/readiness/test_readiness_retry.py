"""When a verdict that was the operator's own doing is evaluated again (``readiness.retry``):
only an Inconclusive for the operator's reasons (ProberOverloaded; the health probe's round
timed out as a whole), after 5, 10, 20, 40, 80 s, at most five times; never a Fail, an Error or
another Inconclusive. Pure functions, so every boundary is tested directly."""

from __future__ import annotations

import datetime as dt

import pytest

from mcp_checks.api import CheckOutcome, Verdict
from mcp_operator.api.readiness import MCPReadinessStatus
from mcp_operator.api.readinessstatus import RetryRecord, read_status
from mcp_operator.readiness.retry import (
    BASE_S,
    CAP_S,
    MAX_ATTEMPTS,
    operator_caused,
    retry_after,
    retry_due,
    retry_record,
)

NOW = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
OVERLOADED = CheckOutcome("health-probe", Verdict.INCONCLUSIVE, "ProberOverloaded", "late")
TIMED_OUT = CheckOutcome("health-probe", Verdict.INCONCLUSIVE, "CheckTimedOut", "past its bound")
PASSED = CheckOutcome("xds-sync", Verdict.PASS, "AllSynced", "")
WARNED = CheckOutcome("metric-drift", Verdict.WARN, "NearThreshold", "")


def test_the_operator_reasons() -> None:
    assert operator_caused(OVERLOADED) and operator_caused(TIMED_OUT)
    # ProberOverloaded is the prober's own verdict, whichever row carries it
    assert operator_caused(CheckOutcome("other", Verdict.INCONCLUSIVE, "ProberOverloaded", ""))
    # another check's time-out may be its source's (a slow Prometheus): not the operator's
    assert not operator_caused(CheckOutcome("metric-drift", Verdict.INCONCLUSIVE, "CheckTimedOut", ""))
    assert not operator_caused(CheckOutcome("health-probe", Verdict.INCONCLUSIVE, "NoSamples", ""))
    # a reason on a row that is not Inconclusive is not the operator's doing
    assert not operator_caused(CheckOutcome("health-probe", Verdict.FAIL, "ProberOverloaded", ""))
    assert not operator_caused(CheckOutcome("health-probe", Verdict.ERROR, "CheckTimedOut", ""))


@pytest.mark.parametrize(("attempts", "after"), [(0, 5.0), (1, 10.0), (2, 20.0), (3, 40.0), (4, 80.0)])
def test_the_backoff_doubles_from_five_seconds(attempts: int, after: float) -> None:
    assert retry_after([OVERLOADED], attempts) == after
    assert retry_after([TIMED_OUT, PASSED, WARNED], attempts) == after


def test_the_attempts_are_bounded() -> None:
    assert MAX_ATTEMPTS == 5
    assert retry_after([OVERLOADED], MAX_ATTEMPTS - 1) is not None
    assert retry_after([OVERLOADED], MAX_ATTEMPTS) is None
    assert retry_after([OVERLOADED], MAX_ATTEMPTS + 3) is None


def test_the_delay_is_capped() -> None:
    assert (BASE_S, CAP_S) == (5.0, 120.0)
    assert max(retry_after([OVERLOADED], n) or 0 for n in range(MAX_ATTEMPTS)) <= CAP_S


@pytest.mark.parametrize(
    "rows",
    [
        [CheckOutcome("health-probe", Verdict.FAIL, "HealthBelowThreshold", "")],  # a genuine Fail
        [OVERLOADED, CheckOutcome("xds-sync", Verdict.FAIL, "ProxyStale", "")],  # a Fail beside it
        [OVERLOADED, CheckOutcome("round", Verdict.ERROR, "InternalError", "")],
        [OVERLOADED, CheckOutcome("metric-drift", Verdict.INCONCLUSIVE, "NoSeries", "")],  # no data
        [CheckOutcome("health-probe", Verdict.INCONCLUSIVE, "InsufficientSamples", "")],
        [PASSED],
        [PASSED, WARNED],
        [],
    ],
)
def test_anything_but_the_operators_own_inconclusive_is_final(rows: list[CheckOutcome]) -> None:
    assert retry_after(rows, 0) is None


def test_a_first_verdict_schedules_the_first_retry() -> None:
    record = retry_record(None, False, [OVERLOADED], NOW)
    assert record == {"attempts": 0, "nextAt": "2026-03-01T12:00:05Z", "reason": "ProberOverloaded"}
    MCPReadinessStatus.model_validate({"retry": record})


def test_a_retried_round_counts_one_more_attempt_and_backs_off() -> None:
    first = retry_record(None, False, [TIMED_OUT], NOW)
    second = retry_record(RetryRecord.model_validate(first), True, [OVERLOADED], NOW)
    assert second == {"attempts": 1, "nextAt": "2026-03-01T12:00:10Z", "reason": "ProberOverloaded"}
    third = retry_record(RetryRecord.model_validate(second), True, [OVERLOADED], NOW)
    assert third is not None and (third["attempts"], third["nextAt"]) == (2, "2026-03-01T12:00:20Z")


def test_the_last_attempt_is_recorded_with_nothing_more_due() -> None:
    previous = RetryRecord.model_validate(
        {"attempts": MAX_ATTEMPTS - 1, "nextAt": "2026-03-01T11:59:00Z", "reason": "CheckTimedOut"}
    )
    assert retry_record(previous, True, [OVERLOADED], NOW) == {
        "attempts": MAX_ATTEMPTS,
        "reason": "ProberOverloaded",
        "nextAt": None,  # null in the merge patch: the old time must go, or it is retried forever
    }


def test_a_retry_that_passes_keeps_its_count_and_cause() -> None:
    previous = RetryRecord.model_validate(
        {"attempts": 0, "nextAt": "2026-03-01T11:59:00Z", "reason": "CheckTimedOut"}
    )
    assert retry_record(previous, True, [PASSED], NOW) == {
        "attempts": 1,
        "reason": "CheckTimedOut",
        "nextAt": None,
    }


def test_a_round_that_was_no_retry_starts_from_none() -> None:
    """A new generation, a new release or an interval recheck: the old count does not carry."""
    previous = RetryRecord.model_validate(
        {"attempts": 3, "nextAt": "2026-03-01T11:59:00Z", "reason": "ProberOverloaded"}
    )
    assert retry_record(previous, False, [PASSED], NOW) is None  # null removes the record
    fresh = retry_record(previous, False, [OVERLOADED], NOW)
    assert fresh is not None and fresh["attempts"] == 0


def test_due_only_once_its_time_has_come() -> None:
    assert not retry_due(read_status({}), NOW)
    assert not retry_due(read_status({"retry": {"attempts": 5, "reason": "ProberOverloaded"}}), NOW)
    assert not retry_due(read_status({"retry": {"attempts": 0, "nextAt": "2026-03-01T12:00:01Z"}}), NOW)
    assert retry_due(read_status({"retry": {"attempts": 0, "nextAt": "2026-03-01T12:00:00Z"}}), NOW)
    assert retry_due(read_status({"retry": {"attempts": 0, "nextAt": "2026-03-01T11:00:00Z"}}), NOW)
