"""Events carry no credential: anyone who may list events in the namespace reads them."""

from __future__ import annotations

import datetime as dt

from tests.operator.fakekube import EventLog, FakeKube

from mcp_operator import events

CANARY = "CANARY-e7e7"
BODY = {"metadata": {"namespace": "ml", "name": "gate"}}


def test_event_messages_are_redacted(posted_events: EventLog) -> None:
    events.warning(BODY, "TargetUnreachable", f"GET http://u:{CANARY}@svc:8000/ failed")
    events.normal(BODY, "Ready", f"verdict Pass: probes of /health?token={CANARY} answered")
    assert [e.reason for e in posted_events.events] == ["TargetUnreachable", "Ready"]
    assert all(CANARY not in e.message and "REDACTED" in e.message for e in posted_events.events)


INVOLVED = {
    "apiVersion": "mcp2026.io/v1alpha1",
    "kind": "MCPReadiness",
    "namespace": "ml",
    "name": "gate",
    "uid": "u-1",
}


def test_a_named_event_is_named_by_what_it_tells_of() -> None:
    first = events.event_name("gate", "u-1", 3, False, "Ready")
    assert first == events.event_name("gate", "u-1", 3, False, "Ready")  # the same verdict, again
    others = {
        events.event_name("gate", "u-1", 4, False, "Ready"),
        events.event_name("gate", "u-2", 3, False, "Ready"),
    }
    assert first not in others and len(others) == 2
    assert first.startswith("gate.") and len(first) == len("gate.") + 12
    longest = events.event_name("a" * 235 + "-" + "b" * 17, "u", 1)
    assert len(longest) <= 253 and longest[235] == "."  # cut before the dash: still a DNS name


def test_a_named_event_reads_as_kopfs_do_and_is_redacted() -> None:
    now = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
    body = events.named_event(
        INVOLVED, "gate.abc", True, "HealthFailed", f"GET http://svc/?token={CANARY} " + "x" * 2000, now
    )
    assert body["metadata"] == {"name": "gate.abc", "namespace": "ml"}
    assert (
        body["involvedObject"] == INVOLVED and body["type"] == "Warning" and body["reason"] == "HealthFailed"
    )
    assert CANARY not in body["message"] and len(body["message"]) == 1024
    assert body["source"] == {"component": "mcp-operator"} and body["lastTimestamp"] == now.isoformat()


async def test_a_named_event_is_posted_once(kube_fake: FakeKube, posted_events: EventLog) -> None:
    assert await events.post_named(INVOLVED, "gate.abc", False, "Ready", "verdict Pass")
    assert not await events.post_named(
        INVOLVED, "gate.abc", False, "Ready", "verdict Pass"
    )  # 409: there already
    assert posted_events.reasons() == [("Normal", "Ready")]
    assert [c.answered for c in kube_fake.calls_to("create", "Event")] == [201, 409]
