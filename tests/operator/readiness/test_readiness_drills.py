"""What a reconcile does about drills around its rounds (``readiness.drills``) and what the change
handler decides before a round (``readiness.change``): an aborted or lost drill ended
Inconclusive, a new drill held while an older fault is in place, a drill task whose round fails
written as the verdict, an older generation's drill stopped, a deleted gate's drill stopped.
Against the in-memory API of ``fakekube``; no fault touches anything (the journals here hold
nothing open to replay)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tests.operator.fakekube import EventLog, FakeKube, custom_kind

from mcp_operator.api.common import API_VERSION, GROUP
from mcp_operator.api.readiness import KIND, PLURAL
from mcp_operator.api.readinessstatus import read_status
from mcp_operator.conditions import condition
from mcp_operator.readiness import change, drills
from mcp_operator.readiness.claim import new_marker
from mcp_operator.readiness.round import Gate
from mcp_operator.readiness.runtime import Runtime
from mcp_operator.settings import OperatorSettings

NS, NAME, UID = "serving", "drilled", "u-7"
CR = custom_kind(GROUP, PLURAL)
Events = list[tuple[bool, str, str]]


def _spec(**drill: Any) -> dict[str, Any]:
    return {
        "target": {"url": "http://127.0.0.1:9"},
        "checks": {"healthProbe": {"requests": 20, "minSuccessRatio": 0.9}},
        "drill": {"profile": "MCP2026", **drill},
    }


@pytest.fixture
def rt() -> Runtime:
    return Runtime.from_settings(OperatorSettings.from_env())


@pytest.fixture
def events() -> Events:
    return []


def _gate(events: Events, generation: int = 1) -> Gate:
    def announce(warning: bool, reason: str, message: str) -> None:
        events.append((warning, reason, message))

    return Gate(NS, NAME, UID, generation, announce)


def _seed(kube: FakeKube, status: dict[str, Any], generation: int = 1) -> dict[str, Any]:
    raw = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME, "namespace": NS, "uid": UID, "generation": generation},
        "spec": _spec(),
        "status": status,
    }
    return kube.put(CR, raw)


def _stored(kube: FakeKube) -> dict[str, Any]:
    return dict((kube.get(CR, NS, NAME) or {}).get("status") or {})


def _reason(status: dict[str, Any], type_: str = "Ready") -> tuple[str, str]:
    found = condition(list(status.get("conditions") or []), type_) or {}
    return found.get("status", ""), found.get("reason", "")


STAGES = [{"name": "baseline", "phase": "Done"}, {"name": "spike", "phase": "Running"}, {"name": "x"}]


async def test_an_aborted_drill_ends_inconclusive_and_not_ready(events: Events) -> None:
    out: dict[str, Any] = {}
    status = {"stages": [*STAGES[:2], {"name": "mixed", "phase": "Pending"}]}
    assert await change.accept(_spec(abort=True), status, _gate(events), out) is None
    assert (out["phase"], out["verdict"], out["observedGeneration"]) == ("Aborted", "Inconclusive", 1)
    assert _reason(out) == ("False", "DrillAborted") and _reason(out, "Complete") == ("True", "DrillAborted")
    assert [s["phase"] for s in out["stages"]] == ["Done", "Stopped", "Skipped"]
    assert out["release"]["trigger"] == "Spec" and out["release"]["completedAt"] == out["completedAt"]
    assert [(warning, reason) for warning, reason, _ in events] == [(True, "DrillAborted")]


async def test_a_drill_the_operator_lost_mid_run_ends_interrupted(events: Events) -> None:
    out: dict[str, Any] = {}
    marker = {"generation": 1, "id": "gone", "instance": "op-gone", "startedAt": "2026-01-01T00:00:00Z"}
    status = {"phase": "Running", "evaluation": marker, "stages": STAGES[:2]}
    assert await change.accept(_spec(), status, _gate(events), out) is None
    assert (out["phase"], out["verdict"]) == ("Inconclusive", "Inconclusive")
    assert _reason(out) == ("False", "DrillInterrupted")
    assert "change the spec to run it again" in events[0][2]
    assert drills.interrupted(read_status(status), 1) and not drills.interrupted(read_status(status), 2)


async def test_a_new_drill_waits_while_an_older_fault_is_not_reverted(
    kube_fake: FakeKube, posted_events: EventLog, events: Events
) -> None:
    faults = [{"id": "f1", "kind": "podKill", "target": "pod/a", "phase": "RevertFailed"}]
    _seed(kube_fake, {"faults": faults})
    with pytest.raises(drills.Held, match="not reverted yet"):
        await change.accept(_spec(), {"faults": faults}, _gate(events), {})
    assert _reason(_stored(kube_fake)) == ("False", "FaultsNotReverted")
    assert events[0][:2] == (True, "FaultsNotReverted") and "podKill pod/a" in events[0][2]


async def test_the_change_handler_refuses_waits_or_suspends(events: Events) -> None:
    bad = {"target": {"url": "http://127.0.0.1:9"}, "checks": {"healthProbe": {"requests": "many"}}}
    invalid = await change.accept(bad, {}, _gate(events), {})
    assert isinstance(invalid, change.Refused) and not invalid.wait
    assert invalid.problems[0].reason == "InvalidSpec" and invalid.status["phase"] == "Invalid"
    late = {**_spec(), "target": {"url": "http://gate.late-dns.invalid:8000"}}
    del late["drill"]
    waiting = await change.accept(late, {}, _gate(events), {})
    assert isinstance(waiting, change.Refused) and waiting.wait
    out: dict[str, Any] = {}
    assert await change.accept({**late, "suspend": True}, {}, _gate(events), out) is None
    assert (out["phase"], out["observedGeneration"]) == ("Suspended", 1)
    assert [(c["type"], c["status"], c["reason"]) for c in out["conditions"]] == [
        ("Accepted", "Unknown", "Suspended")
    ]
    assert events == []


async def test_a_drill_task_that_fails_writes_the_failure_as_its_verdict(
    kube_fake: FakeKube, posted_events: EventLog, rt: Runtime, events: Events
) -> None:
    _seed(kube_fake, {"phase": "Running", "stages": STAGES[:2], "release": {"trigger": "Spec"}})
    marker = new_marker(1, "2026-01-01T00:00:00Z")

    async def evaluation() -> None:
        assert marker.id in rt.claims.running  # held from the start, before the task runs
        raise RuntimeError("the load did not run")

    drills.start(rt, UID, 1, marker, evaluation(), (NS, NAME), _gate(events).announce)
    running = rt.drills.get(UID)
    assert running is not None and running.generation == 1
    await running.task
    status = _stored(kube_fake)
    assert (status["phase"], status["verdict"]) == ("Failed", "Error")
    assert _reason(status) == ("False", "DrillFailed") and _reason(status, "Complete") == (
        "True",
        "DrillFailed",
    )
    assert [s["phase"] for s in status["stages"]] == ["Done", "Stopped"]
    assert status["release"] == {"trigger": "Spec", "completedAt": status["completedAt"]}
    assert events == [(True, "DrillFailed", "the drill failed: RuntimeError: the load did not run")]
    assert rt.claims.running == set() and rt.drills.get(UID) is None


async def test_an_older_generations_drill_is_stopped_before_anything_else(
    kube_fake: FakeKube, posted_events: EventLog, rt: Runtime, events: Events
) -> None:
    stopped = asyncio.Event()

    async def old_drill() -> None:
        try:
            await asyncio.sleep(3600)
        finally:
            stopped.set()

    rt.drills.start(UID, 1, asyncio.create_task(old_drill()))
    await asyncio.sleep(0)
    obj = _seed(kube_fake, {"phase": "Running", "observedGeneration": 1}, generation=2)
    status = await drills.settle(rt, 2, obj, _gate(events, 2).announce)
    assert stopped.is_set() and rt.drills.get(UID) is None
    assert status == {"phase": "Running", "observedGeneration": 1}  # read again after the stop
    same = asyncio.create_task(asyncio.sleep(3600))
    rt.drills.start(UID, 2, same)
    await drills.settle(rt, 2, obj, _gate(events, 2).announce)
    assert not same.cancelled() and rt.drills.get(UID) is not None  # this generation's goes on
    same.cancel()


async def test_a_deleted_gate_stops_its_drill_and_goes_when_nothing_is_open(
    kube_fake: FakeKube, posted_events: EventLog, rt: Runtime, events: Events
) -> None:
    task = asyncio.create_task(asyncio.sleep(3600))
    rt.drills.start(UID, 1, task)
    reverted = [{"id": "f1", "kind": "podKill", "target": "pod/a", "phase": "Reverted"}]
    _seed(kube_fake, {"faults": reverted})
    meta = {"namespace": NS, "name": NAME, "uid": UID}
    assert await drills.revert_deleted(rt, meta, {}, _gate(events).announce) is None
    assert task.cancelled() and events == []


def _fault(phase: str) -> dict[str, Any]:
    return {
        "id": "f1",
        "stage": "s1",
        "kind": "podKill",
        "target": "pods",
        "phase": phase,
        "plannedAt": "2026-12-06T00:00:00Z",
    }


@pytest.mark.parametrize(
    ("status", "judged"),
    [
        ({"observedGeneration": 3, "phase": "Succeeded"}, True),
        ({"observedGeneration": 3, "phase": "Suspended"}, True),
        ({"observedGeneration": 2, "phase": "Succeeded"}, False),  # this generation is not judged
        ({"observedGeneration": 3, "phase": "Running"}, False),
        ({"observedGeneration": 3, "phase": "Failed", "faults": [_fault("Reverted")]}, True),
        ({"observedGeneration": 3, "phase": "Failed", "faults": [_fault("Injected")]}, False),  # replayed
        ({"observedGeneration": 3, "phase": "Failed", "faults": [_fault("RevertFailed")]}, False),
    ],
)
def test_a_body_that_shows_its_generation_judged_and_settled_needs_no_read(
    rt: Runtime, status: dict[str, Any], judged: bool
) -> None:
    """The change handler's shortcut on a restart: only where the fresh read would find the same
    (nothing to judge, no fault journal to replay) is it skipped."""
    assert drills.judged_and_settled(rt, "uid-1", 3, status) is judged
