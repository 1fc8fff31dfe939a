"""Kubernetes-convention conditions as pure functions over status lists."""

from __future__ import annotations

import datetime as dt
from typing import Any

from mcp_operator.api import Condition
from mcp_operator.conditions import condition, set_condition, utc_now

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"


def test_new_condition_has_every_field() -> None:
    conds = set_condition([], "Ready", True, "ChecksPassed", "1/1 checks passed", 4, now=T0)
    assert conds == [
        {
            "type": "Ready",
            "status": "True",
            "reason": "ChecksPassed",
            "message": "1/1 checks passed",
            "lastTransitionTime": T0,
            "observedGeneration": 4,
        }
    ]
    Condition.model_validate(conds[0])  # the shape the CRD declares


def test_status_wire_values() -> None:
    assert set_condition([], "A", False, "R", "", 1, now=T0)[0]["status"] == "False"
    assert set_condition([], "A", None, "R", "", 1, now=T0)[0]["status"] == "Unknown"


def test_transition_time_moves_only_when_status_changes() -> None:
    first = set_condition([], "Ready", False, "Evaluating", "m1", 1, now=T0)
    same = set_condition(first, "Ready", False, "HealthBelowThreshold", "m2", 2, now=T1)
    (cond,) = same
    # reason, message and generation follow the latest evaluation; the transition stays put
    assert (cond["reason"], cond["message"], cond["observedGeneration"]) == ("HealthBelowThreshold", "m2", 2)
    assert cond["lastTransitionTime"] == T0
    flipped = set_condition(same, "Ready", True, "ChecksPassed", "ok", 2, now=T1)
    assert flipped[0]["lastTransitionTime"] == T1 and flipped[0]["status"] == "True"


def test_other_conditions_are_kept_and_input_is_not_changed() -> None:
    before: list[dict[str, Any]] = set_condition([], "Accepted", True, "SpecAccepted", "", 1, now=T0)
    before = set_condition(before, "Ready", None, "Evaluating", "", 1, now=T0)
    snapshot = [dict(c) for c in before]
    after = set_condition(before, "Ready", True, "ChecksPassed", "", 1, now=T1)
    assert before == snapshot
    assert [c["type"] for c in after] == ["Accepted", "Ready"]
    assert condition(after, "Accepted") == snapshot[0]
    ready = condition(after, "Ready")
    assert ready is not None and ready["status"] == "True"
    assert condition(after, "Complete") is None


def test_generation_none_leaves_the_field_out() -> None:
    (cond,) = set_condition([], "Ready", True, "R", "", None, now=T0)
    assert "observedGeneration" not in cond


def test_default_stamp_is_rfc3339_utc() -> None:
    stamp = utc_now()
    parsed = dt.datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    assert abs((dt.datetime.now(dt.UTC) - parsed).total_seconds()) < 5
    (cond,) = set_condition([], "Ready", True, "R", "", 1)
    dt.datetime.strptime(cond["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")


def test_a_message_is_redacted_whatever_url_it_quotes() -> None:
    """Every condition of both resources is built here: a message that quotes a URL with
    credentials (a refusal, an error) keeps the URL and loses the credential."""
    canary = "CANARY-c0de"
    message = f"http://u:{canary}@svc:8000 unreachable; GET /health?token={canary} refused"
    (ready,) = set_condition([], "Ready", False, "TargetUnreachable", message, 1, now=T0)
    assert canary not in ready["message"]
    assert ready["message"] == "http://REDACTED@svc:8000 unreachable; GET /health?token=REDACTED refused"
