"""The rules of the leader Lease, without a cluster (e2e/test_two_operators.py runs them against
the real API server)."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
from kubernetes.client.exceptions import ApiException

from mcp_operator.leadership.elector import Elector, standby_problem
from mcp_operator.leadership.lease import (
    Holder,
    LeaseConfig,
    Observation,
    held_spec,
    may_take,
    micro_time,
    released_spec,
)

NOW = dt.datetime(2026, 5, 1, 12, 0, 0, tzinfo=dt.UTC)


def _holder(identity: str, renew: str = "t1", transitions: int = 2) -> Holder:
    return Holder(identity, 15.0, renew, "t0", transitions, "42")


def test_a_lease_held_by_another_is_taken_only_after_a_whole_duration_unrenewed() -> None:
    seen = Observation()
    other = _holder("a")
    since = seen.see(other, now=100.0)
    assert not may_take(other, "b", since, now=100.0)
    assert not may_take(other, "b", seen.see(other, 114.9), now=114.9)
    assert may_take(other, "b", seen.see(other, 115.0), now=115.0)
    # a renewal (a new renewTime) starts the wait again, whatever the clocks of the two nodes say
    renewed = _holder("a", renew="t2")
    assert not may_take(renewed, "b", seen.see(renewed, 115.0), now=115.0)


def test_no_lease_a_released_one_or_our_own_is_taken_at_once() -> None:
    assert may_take(None, "b", 0.0, 0.0)
    assert may_take(_holder(""), "b", 0.0, 0.0)
    # the same identity: the restarted container of the same pod, its predecessor dead
    assert may_take(_holder("b"), "b", 0.0, 0.0)


def test_taking_over_counts_a_transition_and_renewing_keeps_the_acquire_time() -> None:
    took = held_spec(_holder("a"), "b", 15.0, NOW)
    assert took["holderIdentity"] == "b" and took["leaseTransitions"] == 3
    assert took["acquireTime"] == took["renewTime"] == "2026-05-01T12:00:00.000000Z"
    renewed = held_spec(_holder("b"), "b", 15.0, NOW)
    assert renewed["leaseTransitions"] == 2 and renewed["acquireTime"] == "t0"
    assert held_spec(None, "b", 15.0, NOW)["leaseTransitions"] == 0
    released = released_spec(_holder("b"), NOW)
    assert "holderIdentity" not in released and released["leaseDurationSeconds"] == 1
    assert Holder.from_lease({"spec": released, "metadata": {"resourceVersion": "7"}}).identity == ""


def test_micro_time_always_has_six_fractional_digits_in_utc() -> None:
    assert micro_time(NOW.replace(microsecond=5)) == "2026-05-01T12:00:00.000005Z"
    plus_two = dt.timezone(dt.timedelta(hours=2))
    assert micro_time(dt.datetime(2026, 5, 1, 14, 0, tzinfo=plus_two)) == "2026-05-01T12:00:00.000000Z"


def test_config_from_the_environment_and_timings_that_cannot_work_are_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("POD_NAME", "mcp-operator-7d9f-abcde")
    monkeypatch.setenv("POD_NAMESPACE", "mcp-system")
    monkeypatch.delenv("MCP_OPERATOR_IDENTITY", raising=False)
    monkeypatch.delenv("MCP_LEASE_NAMESPACE", raising=False)
    monkeypatch.delenv("MCP_LEASE_NAME", raising=False)
    config = LeaseConfig.from_env()
    assert (config.name, config.namespace, config.identity) == (
        "mcp-operator",
        "mcp-system",
        "mcp-operator-7d9f-abcde",
    )
    assert (config.duration_s, config.renew_deadline_s, config.retry_period_s) == (15.0, 10.0, 2.0)
    assert LeaseConfig.from_env(identity="x", name="ops").identity == "x"
    monkeypatch.setenv("MCP_LEASE_RENEW_DEADLINE_SECONDS", "20")  # past the duration: two could lead
    with pytest.raises(ValueError, match="duration > renew deadline"):
        LeaseConfig.from_env()


def test_a_forbidden_lease_says_which_rights_are_missing_and_where() -> None:
    config = LeaseConfig.from_env(name="mcp-operator", namespace="team-a", identity="ops-0")
    level, message = standby_problem(ApiException(status=403, reason="Forbidden"), config)
    assert level == logging.ERROR
    assert "lease team-a/" in message and "leases in team-a" in message
    assert "RoleBinding mcp-operator-leader" in message and "docs/using-it.md" in message
    level, message = standby_problem(ApiException(status=503, reason="Unavailable"), config)
    assert level == logging.WARNING and "503" in message  # the API server away: it passes


def test_a_leader_lapses_once_its_last_renewal_is_a_renew_deadline_old() -> None:
    now = [100.0]
    elector = Elector(LeaseConfig("l", "ns", "me"), clock=lambda: now[0])
    elector.leading, elector.renewed_at = True, 100.0
    now[0] = 109.9
    assert elector.lapsed() is None and elector.leading
    now[0] = 110.0
    assert elector.lapsed() == "no renewal for 10 s" and not elector.leading
