"""A verdict and its event, written together (``readiness.verdictevents``): the rule that decides
the event before the write, the record the verdict's status patch carries, and the repair a new
leader makes when it adopts a decided gate whose event was lost. Against the in-memory API of
``fakekube``: what is listed, what is posted, under which name and time, and how often."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from typing import Any

import pytest
from prometheus_client import REGISTRY
from tests.operator.fakekube import EventLog, FakeKube, custom_kind

from mcp_checks.api import CheckOutcome, Verdict, decide
from mcp_operator.api import MCPReadinessSpec
from mcp_operator.api.common import API_VERSION, GROUP
from mcp_operator.api.readiness import KIND, PLURAL, VerdictEventRecord
from mcp_operator.conditions import set_condition
from mcp_operator.handlers.common import announcer
from mcp_operator.readiness import verdictevents
from mcp_operator.readiness.round import Gate, run_round
from mcp_operator.readiness.runtime import Runtime
from mcp_operator.readiness.verdictevents import (
    VerdictEvent,
    VerdictEvents,
    event_name,
    verdict_event,
)
from mcp_operator.settings import OperatorSettings

NS, NAME, UID = "serving", "gate", "u-1"
CR = custom_kind(GROUP, PLURAL)
PASSED = decide([CheckOutcome("health-probe", Verdict.PASS, "ProbePassed", "20/20 answered")])
FAILED = decide([CheckOutcome("health-probe", Verdict.FAIL, "TooManyFailures", "3/20 answered")])
SPEC: dict[str, Any] = {
    "target": {"serviceRef": {"name": "gone", "port": 8000}},
    "checks": {"healthProbe": {"requests": 20, "minSuccessRatio": 0.9}},
}


def _stamp(ago_s: float) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=ago_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _record(
    ago_s: float = 60, reason: str = "TooManyFailures", message: str = "verdict Fail: x"
) -> dict[str, Any]:
    return {"type": "Warning", "reason": reason, "message": message, "time": _stamp(ago_s)}


def _decided(record: dict[str, Any] | None) -> dict[str, Any]:
    status: dict[str, Any] = {"observedGeneration": 1, "phase": "Failed"}
    if record is not None:
        status["verdictEvent"] = record
    return status


def _event(kube: FakeKube, name: str, uid: str, reason: str, message: str, at: str, ns: str = NS) -> None:
    """An event as kopf posts one (``generateName`` kopf-event-)."""
    kube.put(
        "Event",
        {
            "metadata": {"name": f"kopf-event-{name}-{at}".lower().replace(":", ""), "namespace": ns},
            "involvedObject": {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "name": name,
                "namespace": ns,
                "uid": uid,
            },
            "type": "Warning",
            "reason": reason,
            "message": message,
            "firstTimestamp": at,
            "lastTimestamp": at,
            "eventTime": at,
        },
    )


def _restored() -> float:
    return REGISTRY.get_sample_value("mcp_operator_verdict_events_restored_total") or 0.0


# --- the rule, before the write ---


def test_a_verdict_is_news_when_every_verdict_is_announced_or_ready_changes() -> None:
    assert verdict_event(PASSED, every=True, previous_ready="True") == VerdictEvent(
        False, "Ready", f"verdict Pass: {PASSED.message}"
    )
    assert verdict_event(FAILED, every=False, previous_ready="True") == VerdictEvent(
        True, "TooManyFailures", f"verdict Fail: {FAILED.message}"
    )
    assert verdict_event(FAILED, every=False, previous_ready=None) is not None  # a first verdict
    # a recheck whose verdict leaves Ready as it was is no news
    assert verdict_event(FAILED, every=False, previous_ready="False") is None
    assert verdict_event(PASSED, every=False, previous_ready="True") is None


def test_the_record_is_the_event_as_posted(posted_events: EventLog) -> None:
    """Redacted and cut as ``events`` posts it, so the record and the event are one text."""
    said = "verdict Fail: http://user:hunter2@svc:8000/health?token=abc " + "x" * 2000
    event = VerdictEvent(True, "TooManyFailures", said)
    record = event.record("2026-01-01T00:00:00Z")
    announcer({"metadata": {"namespace": NS, "name": NAME}})(event.warning, event.reason, event.message)
    (posted,) = posted_events.events
    assert (posted.type, posted.reason, posted.message) == (record.type, record.reason, record.message)
    assert "hunter2" not in record.message and "abc" not in record.message and len(record.message) == 1024
    assert record.time == "2026-01-01T00:00:00Z"


# --- the record, written with the verdict ---


def _gate(kube: FakeKube, status: dict[str, Any]) -> tuple[Gate, dict[str, Any]]:
    raw = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME, "namespace": NS, "uid": UID, "generation": 1},
        "spec": SPEC,
        "status": status,
    }
    obj = kube.put(CR, raw)
    return Gate(NS, NAME, UID, 1, announcer(obj)), obj


async def test_the_verdicts_patch_carries_the_event_that_is_then_posted(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    rt = Runtime.from_settings(OperatorSettings.from_env())
    gate, obj = _gate(kube_fake, {})
    assert await run_round(rt, gate, obj, MCPReadinessSpec.model_validate(SPEC), "Spec", None)
    _claim, verdict = kube_fake.calls_to("patch", CR)
    written = verdict.body["status"]
    record = VerdictEventRecord.model_validate(written["verdictEvent"])
    (posted,) = posted_events.events
    assert (record.type, record.reason) == ("Warning", "TargetNotFound") == (posted.type, posted.reason)
    assert record.message == posted.message and record.message.startswith("verdict Error: ")
    assert record.time == written["completedAt"]  # the verdict's own time


async def test_a_verdict_that_is_no_news_keeps_the_last_record(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    """A recheck that leaves Ready False as it was posts nothing and leaves the record of the
    verdict that made it False (its event was due then, and is the one to repair)."""
    earlier = _record(600, "TargetNotFound", "verdict Error: earlier")
    ready = set_condition([], "Ready", False, "TargetNotFound", "gone", 1, _stamp(600))
    gate, obj = _gate(kube_fake, {**_decided(earlier), "conditions": ready, "completedAt": _stamp(600)})
    rt = Runtime.from_settings(OperatorSettings.from_env())
    assert await run_round(rt, gate, obj, MCPReadinessSpec.model_validate(SPEC), "Recheck", None)
    _claim, verdict = kube_fake.calls_to("patch", CR)
    assert "verdictEvent" not in verdict.body["status"] and posted_events.events == []
    assert (kube_fake.get(CR, NS, NAME) or {})["status"]["verdictEvent"] == earlier


# --- the repair, when a new leader adopts the gate ---


async def test_a_lost_event_is_posted_at_the_recorded_time_under_a_name_of_its_own(
    kube_fake: FakeKube,
) -> None:
    record = _record(120)
    before = _restored()
    assert await VerdictEvents().ensure(NS, NAME, UID, _decided(record))
    name = event_name(NAME, UID, VerdictEventRecord.model_validate(record))
    assert name.startswith(f"{NAME}.") and name == event_name(
        NAME, UID, VerdictEventRecord.model_validate(record)
    )
    event = kube_fake.get("Event", NS, name)
    assert event is not None
    assert event["firstTimestamp"] == event["lastTimestamp"] == record["time"] and event["count"] == 1
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning",
        record["reason"],
        record["message"],
    )
    assert event["involvedObject"] == {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": NAME,
        "namespace": NS,
        "uid": UID,
    }
    assert event["source"] == {"component": "mcp-operator"} and event["reportingComponent"] == "mcp-operator"
    assert _restored() == before + 1


async def test_an_event_that_exists_is_not_posted_again_and_time_tells_a_repeat_apart(
    kube_fake: FakeKube,
) -> None:
    record = _record(120)
    _event(kube_fake, NAME, UID, record["reason"], record["message"], _stamp(119))  # kopf's, after the write
    assert not await VerdictEvents().ensure(NS, NAME, UID, _decided(record))
    assert kube_fake.calls_to("create", "Event") == []
    # the same text an hour earlier (an earlier verdict's) is not this verdict's event
    other, older = "u-2", _record(120)
    _event(kube_fake, "other", other, older["reason"], older["message"], _stamp(3600))
    assert await VerdictEvents().ensure(NS, "other", other, _decided(older))
    assert len(kube_fake.calls_to("create", "Event")) == 1


async def test_a_record_past_the_window_or_none_at_all_asks_nothing(kube_fake: FakeKube) -> None:
    repairs = VerdictEvents()
    assert not await repairs.ensure(NS, NAME, UID, _decided(_record(verdictevents.WINDOW_S + 60)))
    assert not await repairs.ensure(NS, NAME, UID, _decided(None))
    assert not await repairs.ensure(NS, NAME, UID, _decided({"type": "Warning", "time": "not a time"}))
    assert kube_fake.calls == []


async def test_a_409_is_done(kube_fake: FakeKube, caplog: pytest.LogCaptureFixture) -> None:
    """Another process posted it under the same name since the LIST: done, not a failure."""
    kube_fake.refuse("create", "Event", 409)
    repairs = VerdictEvents()
    with caplog.at_level(logging.WARNING):
        assert not await repairs.ensure(NS, NAME, UID, _decided(_record()))
        assert not await repairs.ensure(NS, NAME, UID, _decided(_record()))
    assert [c.answered for c in kube_fake.calls_to("create", "Event")] == [409]  # the second knew
    assert caplog.records == []


async def test_one_list_serves_many_gates_and_each_lost_event_is_posted_once(
    kube_fake: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(verdictevents, "PAGE", 7)  # several pages of one LIST
    records = {f"g-{i}": _record(60 + i, message=f"verdict Fail: gate {i}") for i in range(40)}
    kept = {f"g-{i}" for i in range(0, 40, 2)}
    for name in sorted(kept):
        record = records[name]
        _event(kube_fake, name, f"uid-{name}", record["reason"], record["message"], record["time"])
    repairs = VerdictEvents()
    posted = await asyncio.gather(
        *(repairs.ensure(NS, name, f"uid-{name}", _decided(r)) for name, r in records.items()),
        *(repairs.ensure(NS, name, f"uid-{name}", _decided(r)) for name, r in records.items()),  # twice
    )
    assert sum(posted) == 20 and repairs.restored == 20
    lists = kube_fake.calls_to("list", "Event")
    assert [c.method for c in lists] == ["list_event_for_all_namespaces"] * 3  # 20 events, 7 a page
    assert [c.options.get("continue") for c in lists] == [None, "7", "14"]
    assert {c.options["field_selector"] for c in lists} == {f"involvedObject.kind={KIND}"}
    # a gate resumed twice at once may try twice: its deterministic name makes the second a 409
    creates = kube_fake.calls_to("create", "Event")
    assert {c.answered for c in creates} <= {201, 409}
    created = sorted(c.body["involvedObject"]["name"] for c in creates if c.answered == 201)
    assert created == sorted(set(records) - kept)
    stored = [kube_fake.get("Event", NS, n) or {} for n in kube_fake.names("Event", NS)]
    assert sorted(e["involvedObject"]["name"] for e in stored) == sorted(records)  # one each


async def test_a_namespaced_operator_lists_each_namespace_once(kube_fake: FakeKube) -> None:
    repairs = VerdictEvents(("a", "b"))
    for ns in ("a", "b", "a"):
        await repairs.ensure(ns, NAME, f"uid-{ns}", _decided(_record()))
    assert [(c.method, c.namespace) for c in kube_fake.calls_to("list", "Event")] == [
        ("list_namespaced_event", "a"),
        ("list_namespaced_event", "b"),
    ]


async def test_a_failed_list_or_create_leaves_the_resume_alone(
    kube_fake: FakeKube, caplog: pytest.LogCaptureFixture
) -> None:
    kube_fake.refuse("list", "Event", 403)
    repairs = VerdictEvents()
    with caplog.at_level(logging.WARNING):
        assert not await repairs.ensure(NS, NAME, UID, _decided(_record()))
        assert not await repairs.ensure(NS, "other", "u-2", _decided(_record()))
    assert len(kube_fake.calls_to("list", "Event")) == 1  # not tried again by every gate
    assert "could not list the events" in caplog.text
    kube_fake.refusals.clear()
    kube_fake.refuse("create", "Event", 403)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert not await VerdictEvents().ensure(NS, NAME, UID, _decided(_record()))
    assert "could not post its verdict's lost event" in caplog.text
