"""Events carry no credential: anyone who may list events in the namespace reads them."""

from __future__ import annotations

from tests.operator.fakekube import EventLog

from mcp_operator import events

CANARY = "CANARY-e7e7"
BODY = {"metadata": {"namespace": "ml", "name": "gate"}}


def test_event_messages_are_redacted(posted_events: EventLog) -> None:
    events.warning(BODY, "TargetUnreachable", f"GET http://u:{CANARY}@svc:8000/ failed")
    events.normal(BODY, "Ready", f"verdict Pass: probes of /health?token={CANARY} answered")
    assert [e.reason for e in posted_events.events] == ["TargetUnreachable", "Ready"]
    assert all(CANARY not in e.message and "REDACTED" in e.message for e in posted_events.events)
