"""The MCPReadiness handlers, called as kopf calls them, against the in-memory API of
``fakekube`` and real health probes (the operator's own out-of-process prober) of the
reference server on 127.0.0.1.

The handlers decide from the object as the API server has it now, not from the body kopf
hands them, and write the verdict through the API; so every test puts the resource into the
fake first and reads the verdict back from there.
"""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, cast

import kopf
import pytest
from tests.operator.fakekube import EventLog, FakeKube, PostedEvent, custom_kind, pod_object

from mcp_operator.api import MCPReadinessStatus
from mcp_operator.api.common import API_VERSION, GROUP
from mcp_operator.api.readiness import KIND, PLURAL
from mcp_operator.conditions import condition, utc_now
from mcp_operator.handlers import readiness as handlers
from mcp_refserver import RunningServer

NS = "serving"
NAME = "triton-gate"
INVOLVED = f"{NS}/{NAME}"
CR = custom_kind(GROUP, PLURAL)
Status = dict[str, Any]
Handler = Callable[..., Awaitable[None]]
# kopf's decorators type a handler as its whole callback protocol (every keyword kopf passes);
# the tests call the plain async functions with what the handlers read, as their ``**_`` allows
evaluate_readiness = cast(Handler, handlers.evaluate_readiness)
recheck_readiness = cast(Handler, handlers.recheck_readiness)


@pytest.fixture(autouse=True, scope="module")
def _stop_prober() -> Iterator[None]:
    """The prober's worker processes live as long as the operator; here, as long as this module."""
    yield
    cast(Callable[[], None], handlers.stop_prober)()  # a kopf cleanup activity


def _spec(url: str, **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "target": {"url": url},
        # 20 probes verify a 90% success ratio (10 are needed); a 500 ms P99 holds on loopback
        "checks": {"healthProbe": {"requests": 20, "concurrency": 4, "minSuccessRatio": 0.9}},
    }
    spec.update(overrides)
    return spec


def _seed(kube: FakeKube, spec: dict[str, Any], status: Status | None, generation: int) -> dict[str, Any]:
    """The resource as the API server holds it."""
    raw = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME, "namespace": NS, "uid": "c1a2b3d4", "generation": generation},
        "spec": spec,
        "status": status or {},
    }
    return kube.put(CR, raw)


async def _handle(stored: dict[str, Any], body_generation: int | None = None) -> Status:
    """One call of the create/update/resume handler with the body kopf would hand it; returns
    what it left in kopf's patch."""
    raw = {**stored, "metadata": {**stored["metadata"]}}
    if body_generation is not None:
        raw["metadata"]["generation"] = body_generation
    body = kopf.Body(cast(kopf.RawBody, raw))
    patch = kopf.Patch()
    await evaluate_readiness(spec=body.spec, status=body.status, meta=body.meta, body=body, patch=patch)
    return dict(dict(patch).get("status") or {})


async def _evaluate(
    kube: FakeKube,
    spec: dict[str, Any],
    status: Status | None = None,
    generation: int = 1,
    *,
    body_generation: int | None = None,
) -> Status:
    return await _handle(_seed(kube, spec, status, generation), body_generation)


async def _recheck(kube: FakeKube, spec: dict[str, Any], status: Status, generation: int = 1) -> None:
    body = kopf.Body(cast(kopf.RawBody, _seed(kube, spec, status, generation)))
    await recheck_readiness(spec=body.spec, status=body.status, meta=body.meta, body=body)


def _stored(kube: FakeKube) -> Status:
    obj = kube.get(CR, NS, NAME)
    assert obj is not None
    return dict(obj.get("status") or {})


def _cond(status: Status, type_: str) -> tuple[str, str]:
    found = condition(list(status.get("conditions") or []), type_)
    assert found is not None, f"no {type_} condition in {status}"
    return found["status"], found["reason"]


def _closed_port() -> int:
    """A loopback port nothing listens on: bound, then released."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    assert isinstance(port, int)
    return port


def _ago(seconds: int) -> str:
    return (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ready_condition(status: str, reason: str, since: str) -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": "", "lastTransitionTime": since}


# --- evaluate_readiness ---


async def test_passing_health_probe_is_ready(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    seeded = _seed(kube_fake, _spec(refserver.url), None, 1)
    assert await _handle(seeded) == {}  # the verdict goes through the API
    read, claim, verdict = kube_fake.calls
    assert (read.verb, read.kind) == ("read", CR)
    # the round is claimed against the object as read: its resourceVersion is the precondition
    assert (claim.verb, claim.method) == ("patch", "patch_namespaced_custom_object_status")
    assert claim.body["metadata"] == {"resourceVersion": seeded["metadata"]["resourceVersion"]}
    claimed = claim.body["status"]
    assert claimed["phase"] == "Running" and _cond(claimed, "Ready") == ("Unknown", "Evaluating")
    assert claimed["evaluation"]["generation"] == 1
    assert (verdict.verb, verdict.answered) == ("patch", 200)

    status = _stored(kube_fake)
    assert status["phase"] == "Succeeded" and status["verdict"] == "Pass" and status["score"] == 100
    assert status["observedGeneration"] == 1 and status["targetUrl"] == refserver.url
    assert _cond(status, "Accepted") == ("True", "SpecAccepted")
    assert _cond(status, "Ready") == ("True", "ChecksPassed")
    (check,) = status["checks"]
    assert (check["name"], check["verdict"]) == ("health-probe", "Pass")
    assert check["observed"]["requests"] == "20" and check["observed"]["succeeded"] == "20"
    assert status["evaluations"] == 1 and len(status["history"]) == 1
    MCPReadinessStatus.model_validate(status)
    (event,) = posted_events.events
    assert (event.type, event.reason, event.involved) == ("Normal", "Ready", INVOLVED)
    assert event.message.startswith("verdict Pass: ")


async def test_already_evaluated_generation_runs_nothing(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    done = {"observedGeneration": 3, "phase": "Succeeded", "verdict": "Pass"}
    assert await _evaluate(kube_fake, _spec(refserver.url), status=done, generation=3) == {}
    assert [(c.verb, c.kind) for c in kube_fake.calls] == [("read", CR)]
    assert posted_events.events == [] and _stored(kube_fake) == done
    # the next generation is evaluated
    await _evaluate(kube_fake, _spec(refserver.url), status=done, generation=4)
    assert _stored(kube_fake)["observedGeneration"] == 4 and _stored(kube_fake)["verdict"] == "Pass"


async def test_replayed_body_of_an_older_generation_runs_nothing(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    """kopf hands the handler generation 4 while the API server has 5: 5's own event follows."""
    assert await _evaluate(kube_fake, _spec(refserver.url), generation=5, body_generation=4) == {}
    assert [(c.verb, c.kind) for c in kube_fake.calls] == [("read", CR)]
    assert posted_events.events == [] and _stored(kube_fake) == {}


async def test_a_round_in_progress_is_not_started_twice_but_a_crashed_one_is_taken_over(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    claimed = {"phase": "Running", "evaluation": {"generation": 1, "id": "r0und1d", "instance": "x"}}
    monkeypatch.setattr(handlers.CLAIMS, "running", {"r0und1d"})
    assert await _evaluate(kube_fake, _spec(refserver.url), status=claimed) == {}
    assert [(c.verb, c.kind) for c in kube_fake.calls] == [("read", CR)]
    # the same marker with no round behind it any more (the operator died): evaluated again
    monkeypatch.setattr(handlers.CLAIMS, "running", set())
    await _evaluate(kube_fake, _spec(refserver.url), status=claimed)
    status = _stored(kube_fake)
    assert status["phase"] == "Succeeded" and status["evaluation"]["id"] != "r0und1d"
    assert posted_events.reasons() == [("Normal", "Ready")]


async def test_a_claim_that_loses_a_race_is_retried_later(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    kube_fake.refuse("patch", CR, 409)
    with pytest.raises(kopf.TemporaryError):
        await _evaluate(kube_fake, _spec(refserver.url))
    assert [(c.verb, c.answered) for c in kube_fake.calls] == [("read", 200), ("patch", 409)]
    assert posted_events.events == [] and _stored(kube_fake) == {}


async def test_suspended_runs_nothing(kube_fake: FakeKube, posted_events: EventLog) -> None:
    status = await _evaluate(kube_fake, _spec("http://127.0.0.1:9", suspend=True), generation=2)
    assert status == {"phase": "Suspended", "observedGeneration": 2}
    assert [(c.verb, c.kind) for c in kube_fake.calls] == [("read", CR)]
    assert posted_events.events == []


@pytest.mark.parametrize(
    ("overrides", "reason", "detail"),
    [
        ({"checks": {"healthProbe": {"requests": 0}}}, "InvalidSpec", "requests"),
        ({"checks": {"healthProbe": {"requests": 5, "minSuccessRatio": 0.99}}}, "ImpossibleThreshold", "100"),
        ({"checks": {"healthProbe": None}}, "NoChecks", "no check"),
        ({"target": {"serviceRef": {"name": "triton", "port": 8000}}}, "TargetNotFound", f"{NS}/triton"),
    ],
)
async def test_invalid_spec_is_rejected_with_its_reason(
    kube_fake: FakeKube, posted_events: EventLog, overrides: dict[str, Any], reason: str, detail: str
) -> None:
    status = await _evaluate(kube_fake, _spec("http://127.0.0.1:9", **overrides))
    assert status["phase"] == "Invalid" and status["verdict"] == "Error"
    assert status["score"] == 0 and status["checks"] == []
    assert _cond(status, "Accepted") == ("False", reason)
    assert _cond(status, "Ready") == ("False", reason)
    MCPReadinessStatus.model_validate(status)
    (event,) = posted_events.events
    assert (event.type, event.reason) == ("Warning", reason)
    assert detail in event.message
    assert kube_fake.calls_to("patch") == []  # nothing claimed: nothing ran


async def test_unreachable_target_is_an_error_never_a_pass(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    await _evaluate(kube_fake, _spec(f"http://127.0.0.1:{_closed_port()}"))
    status = _stored(kube_fake)
    assert status["phase"] == "Failed" and status["verdict"] == "Error"
    assert _cond(status, "Ready") == ("False", "TargetUnreachable")
    (check,) = status["checks"]
    assert check["verdict"] == "Error" and check["observed"]["succeeded"] == "0"
    (event,) = posted_events.events
    assert (event.type, event.reason) == ("Warning", "TargetUnreachable")
    assert event.message.startswith("verdict Error: ")


async def test_pod_gate_is_written_on_matching_pods(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    app = {"app": "triton"}
    kubelet_ready = _ready_condition("False", "ReadinessGatesNotReady", _ago(60))
    kube_fake.put("Pod", pod_object("triton-a", NS, app, conditions=[kubelet_ready]))
    kube_fake.put("Pod", pod_object("triton-b", NS, app, deleting=True))  # on its way out
    kube_fake.put("Pod", pod_object("other", NS, {"app": "vllm"}))
    gate = {"matchLabels": app, "conditionType": "mcp2026.io/triton-ready"}
    await _evaluate(kube_fake, _spec(refserver.url, podReadinessGate=gate))
    status = _stored(kube_fake)
    assert status["verdict"] == "Pass" and status["gatedPods"] == 2
    (written,) = kube_fake.calls_to("patch", "Pod")
    assert written.name == "triton-a" and written.method == "patch_namespaced_pod_status"
    pod = kube_fake.get("Pod", NS, "triton-a")
    assert pod is not None
    by_type = {c["type"]: c for c in pod["status"]["conditions"]}
    assert by_type["mcp2026.io/triton-ready"]["status"] == "True"
    assert by_type["Ready"] == kubelet_ready  # the kubelet's own conditions stay
    assert kube_fake.calls_to("list", "Pod")[-1].options["label_selector"] == "app=triton"


# --- recheck_readiness ---


async def test_recheck_that_is_not_due_changes_nothing(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    spec = _spec(refserver.url, recheckIntervalSeconds=60)
    fresh = {"observedGeneration": 1, "phase": "Succeeded", "completedAt": utc_now()}
    stale = {**fresh, "completedAt": _ago(3600)}
    for case_spec, status, generation in [
        (spec, fresh, 1),  # the interval has not passed
        (spec, stale, 2),  # the spec changed: the change handler's business, not the timer's
        ({**spec, "suspend": True}, stale, 1),
    ]:
        await _recheck(kube_fake, case_spec, status, generation)
        assert _stored(kube_fake) == status
    assert {(c.verb, c.kind) for c in kube_fake.calls} == {("read", CR)}
    assert posted_events.events == []


async def test_due_recheck_adds_to_history_without_an_event_when_nothing_changed(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    spec = _spec(refserver.url, recheckIntervalSeconds=60)
    await _evaluate(kube_fake, spec)
    first = _stored(kube_fake)
    posted_events.events.clear()
    before = len(kube_fake.calls)

    await _recheck(kube_fake, spec, {**first, "completedAt": _ago(120)})
    claim = kube_fake.calls_to("patch", CR)[-2]
    assert kube_fake.calls.index(claim) > before
    assert list(claim.body["status"]) == ["evaluation"]  # Ready stays as it was while checks run
    status = _stored(kube_fake)
    assert status["verdict"] == "Pass" and status["evaluations"] == 2
    assert len(status["history"]) == 2 and status["history"][-1]["completedAt"] == status["completedAt"]
    ready, ready_before = condition(status["conditions"], "Ready"), condition(first["conditions"], "Ready")
    assert ready is not None and ready_before is not None
    assert ready["lastTransitionTime"] == ready_before["lastTransitionTime"]  # no transition
    assert posted_events.events == []  # consumers hear only of changes


async def test_due_recheck_announces_a_changed_verdict(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    spec = _spec(refserver.url, recheckIntervalSeconds=60)
    was_down = {
        "observedGeneration": 1,
        "phase": "Failed",
        "verdict": "Error",
        "completedAt": _ago(120),
        "evaluations": 1,
        "conditions": [_ready_condition("False", "TargetUnreachable", _ago(180))],
    }
    await _recheck(kube_fake, spec, was_down)
    status = _stored(kube_fake)
    assert _cond(status, "Ready") == ("True", "ChecksPassed") and status["evaluations"] == 2
    (event,) = posted_events.events
    assert (event.type, event.reason) == ("Normal", "Ready")


async def test_recheck_of_a_service_that_went_away_is_not_ready(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    spec = {"target": {"serviceRef": {"name": "triton", "port": 8000}}, "recheckIntervalSeconds": 60}
    was_ready = {
        "observedGeneration": 1,
        "phase": "Succeeded",
        "completedAt": _ago(120),
        "targetUrl": f"http://triton.{NS}.svc:8000",
        "conditions": [_ready_condition("True", "ChecksPassed", _ago(180))],
    }
    await _recheck(kube_fake, spec, was_ready)
    assert ("read", "Service", 404) in [(c.verb, c.kind, c.answered) for c in kube_fake.calls]
    status = _stored(kube_fake)
    assert status["phase"] == "Failed" and status["verdict"] == "Error"
    assert status["targetUrl"] == was_ready["targetUrl"]
    (check,) = status["checks"]
    assert (check["name"], check["verdict"], check["reason"]) == ("target", "Error", "TargetNotFound")
    message = condition(status["conditions"], "Ready")
    assert message is not None
    assert posted_events.events == [
        PostedEvent("Warning", "TargetNotFound", f"verdict Error: {message['message']}", INVOLVED)
    ]
