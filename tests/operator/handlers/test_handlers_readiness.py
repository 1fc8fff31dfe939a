"""The MCPReadiness handlers, called as kopf calls them, against the in-memory API of
``fakekube`` and real health probes (the operator's own out-of-process prober) of the
reference server on 127.0.0.1.

The handlers decide from the object as the API server has it now, not from the body kopf
hands them, and write the verdict through the API; so every test puts the resource into the
fake first and reads the verdict back from there.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import socket
from collections.abc import Awaitable, Callable
from typing import Any, cast

import kopf
import pytest
from tests.operator.fakekube import EventLog, FakeKube, PostedEvent, custom_kind, pod_object
from tests.operator.handlers.queued import evaluate_and_run

from mcp_operator.api import MCPReadinessStatus
from mcp_operator.api.common import API_VERSION, GROUP
from mcp_operator.api.readiness import KIND, PLURAL
from mcp_operator.conditions import condition, utc_now
from mcp_operator.handlers import readiness as handlers
from mcp_operator.readiness import readers, runtime
from mcp_operator.readiness import release as release_module
from mcp_operator.readiness.backlog import Retry
from mcp_operator.readiness.verdictevents import VerdictEvents
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


async def _handle(stored: dict[str, Any], body_generation: int | None = None) -> None:
    """One call of the create/update/resume handler with the body kopf would hand it, then the
    round it queued."""
    raw = {**stored, "metadata": {**stored["metadata"]}}
    if body_generation is not None:
        raw["metadata"]["generation"] = body_generation
    await evaluate_and_run(kopf.Body(cast(kopf.RawBody, raw)))


async def _evaluate(
    kube: FakeKube,
    spec: dict[str, Any],
    status: Status | None = None,
    generation: int = 1,
    *,
    body_generation: int | None = None,
) -> Status:
    """The handler and its queued round; returns the status as the API server has it after."""
    await _handle(_seed(kube, spec, status, generation), body_generation)
    left = kube.get(CR, NS, NAME)
    return {} if left is None else dict(left.get("status") or {})


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
    await _handle(seeded)
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
    assert await _evaluate(kube_fake, _spec(refserver.url), status=done, generation=3) == done
    # the body kopf handed shows it judged: not even read again (a restart over 1,000 decided
    # gates made 1,000 GETs)
    assert kube_fake.calls == []
    assert posted_events.events == [] and _stored(kube_fake) == done
    # the next generation is evaluated
    await _evaluate(kube_fake, _spec(refserver.url), status=done, generation=4)
    assert _stored(kube_fake)["observedGeneration"] == 4 and _stored(kube_fake)["verdict"] == "Pass"


async def test_a_resume_of_a_decided_gate_posts_only_its_lost_verdict_event(
    kube_fake: FakeKube, posted_events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new leader adopting a decided gate (kopf's resume) posts the event its verdict recorded
    when the API server holds none, once, and reads or evaluates nothing; an update (or a
    create) of a decided gate does not look."""
    monkeypatch.setattr(runtime.current(), "verdict_events", VerdictEvents())  # this process's
    said = "verdict Pass: 1/1 checks passed"
    record = {"type": "Normal", "reason": "Ready", "message": said, "time": utc_now()}
    done = {"observedGeneration": 1, "phase": "Succeeded", "verdict": "Pass", "verdictEvent": record}
    body = kopf.Body(cast(kopf.RawBody, _seed(kube_fake, _spec("http://127.0.0.1:9"), done, 1)))

    async def handle(reason: kopf.Reason) -> None:
        await evaluate_readiness(
            spec=body.spec, status=body.status, meta=body.meta, body=body, patch=kopf.Patch(), reason=reason
        )

    await handle(kopf.Reason.UPDATE)
    assert kube_fake.calls == []
    await handle(kopf.Reason.RESUME)
    await handle(kopf.Reason.RESUME)
    assert [(c.verb, c.kind, c.answered) for c in kube_fake.calls] == [
        ("list", "Event", 200),
        ("create", "Event", 201),
    ]
    (name,) = kube_fake.names("Event", NS)
    event = kube_fake.get("Event", NS, name) or {}
    assert (event["type"], event["reason"], event["message"]) == ("Normal", "Ready", said)
    assert event["firstTimestamp"] == record["time"] and event["involvedObject"]["uid"] == "c1a2b3d4"
    assert posted_events.events == [] and _stored(kube_fake) == done


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
    monkeypatch.setattr(runtime.current().claims, "running", {"r0und1d"})
    assert await _evaluate(kube_fake, _spec(refserver.url), status=claimed) == claimed
    assert [(c.verb, c.kind) for c in kube_fake.calls] == [("read", CR)]
    # the same marker with no round behind it any more (the operator died): evaluated again
    monkeypatch.setattr(runtime.current().claims, "running", set())
    await _evaluate(kube_fake, _spec(refserver.url), status=claimed)
    status = _stored(kube_fake)
    assert status["phase"] == "Succeeded" and status["evaluation"]["id"] != "r0und1d"
    assert posted_events.reasons() == [("Normal", "Ready")]


async def test_a_claim_that_loses_a_race_is_retried_later(
    kube_fake: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    kube_fake.refuse("patch", CR, 409)
    with pytest.raises(Retry):
        await _evaluate(kube_fake, _spec(refserver.url))
    assert [(c.verb, c.answered) for c in kube_fake.calls] == [("read", 200), ("patch", 409)]
    assert posted_events.events == [] and _stored(kube_fake) == {}


async def test_suspended_runs_nothing(kube_fake: FakeKube, posted_events: EventLog) -> None:
    status = await _evaluate(kube_fake, _spec("http://127.0.0.1:9", suspend=True), generation=2)
    assert {k: status[k] for k in ("phase", "observedGeneration")} == {
        "phase": "Suspended",
        "observedGeneration": 2,
    }
    # one condition says why nothing is judged; Ready is left as it was (none here)
    assert _cond(status, "Accepted") == ("Unknown", "Suspended")
    assert condition(status["conditions"], "Ready") is None
    read, written = kube_fake.calls  # no claim: the suspension written as it is
    assert (read.verb, read.kind, written.verb) == ("read", CR, "patch")
    assert written.body == {"status": status}
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
    (written,) = kube_fake.calls_to("patch")  # the refusal, not a claim: nothing ran
    assert "metadata" not in written.body and written.body["status"]["phase"] == "Invalid"


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
    # Ready stays as it was while the checks run; the release record says a recheck runs
    assert sorted(claim.body["status"]) == ["evaluation", "release"]
    assert claim.body["status"]["release"]["trigger"] == "Recheck"
    assert claim.body["status"]["release"]["completedAt"] is None
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


# --- one evaluation per release: spec.release and spec.watch ---

watch_release = cast(Handler, handlers.watch_release)


@pytest.fixture
def apps(kube_fake: FakeKube, monkeypatch: pytest.MonkeyPatch) -> FakeKube:
    """Deployments from the fake too (the handlers build their AppsV1Api on ``kube.api_client``),
    and the settle loop polling every few milliseconds."""
    monkeypatch.setattr(readers, "_apps", lambda: kube_fake.apps)
    monkeypatch.setattr(release_module, "POLL_S", 0.01)
    return kube_fake


def _deployment(
    image: str, *, generation: int = 1, updated: int = 2, total: int = 2, **status: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS, "generation": generation},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "srv", "image": image}]},
            },
        },
        "status": {
            "observedGeneration": generation,
            "replicas": total,
            "updatedReplicas": updated,
            "availableReplicas": updated,
            **status,
        },
    }


def _watching(url: str, **overrides: Any) -> dict[str, Any]:
    return _spec(url, release="r1", watch={"workload": {"name": "web"}}, **overrides)


async def _tick(kube: FakeKube) -> None:
    """One tick of the watch timer with the object as kopf last saw it."""
    stored = kube.get(CR, NS, NAME)
    assert stored is not None
    body = kopf.Body(cast(kopf.RawBody, stored))
    await watch_release(spec=body.spec, status=body.status, meta=body.meta, body=body)


def _hash(image: str) -> str:
    return release_module.template_hash(_deployment(image))


async def test_a_watching_gate_records_the_release_it_judged(
    apps: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    apps.put("Deployment", _deployment("srv:1"))
    await _evaluate(apps, _watching(refserver.url))
    claim = apps.calls_to("patch", CR)[0].body["status"]
    assert _cond(claim, "Ready") == ("Unknown", "Evaluating")
    assert claim["release"]["completedAt"] is None and claim["release"]["trigger"] == "Spec"
    assert claim["evaluation"]["fingerprint"] == claim["release"]["fingerprint"]
    status = _stored(apps)
    assert status["verdict"] == "Pass" and _cond(status, "Ready") == ("True", "ChecksPassed")
    rel = status["release"]
    assert rel["revision"] == "r1" and rel["workload"] == "Deployment/web"
    assert rel["workloadTemplateHash"] == _hash("srv:1") and rel["generation"] == 1
    assert rel["startedAt"].endswith("Z") and "." in rel["startedAt"] and rel["completedAt"]
    assert [c["name"] for c in status["checks"]] == ["rollout", "health-probe"]
    assert (status["checks"][0]["verdict"], status["checks"][0]["reason"]) == ("Pass", "RolloutSettled")
    (entry,) = status["history"]
    assert entry["revision"] == "r1" and entry["trigger"] == "Spec"
    assert entry["workloadTemplateHash"] == _hash("srv:1")
    MCPReadinessStatus.model_validate(status)


async def test_a_new_pod_template_starts_exactly_one_evaluation_with_ready_unknown(
    apps: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    apps.put("Deployment", _deployment("srv:1"))
    await _evaluate(apps, _watching(refserver.url))
    first = _stored(apps)
    patches = len(apps.calls_to("patch", CR))
    await _tick(apps)  # nothing changed: nothing runs
    assert len(apps.calls_to("patch", CR)) == patches

    apps.put("Deployment", _deployment("srv:2", generation=2))
    await asyncio.gather(_tick(apps), _tick(apps))  # two ticks at once: one round
    claims = apps.calls_to("patch", CR)[patches:]
    assert len(claims) == 2  # the claim, then the verdict
    claimed = claims[0].body["status"]
    assert claimed["phase"] == "Running" and _cond(claimed, "Ready") == ("Unknown", "Evaluating")
    assert "template " + _hash("srv:2") in (condition(claimed["conditions"], "Ready") or {})["message"]
    assert claimed["release"]["trigger"] == "Watch" and claimed["release"]["completedAt"] is None
    status = _stored(apps)
    assert status["evaluations"] == first["evaluations"] + 1 == 2
    assert status["release"]["workloadTemplateHash"] == _hash("srv:2")
    assert status["release"]["revision"] == "r1"  # spec.release is unchanged
    assert status["release"]["startedAt"] > first["release"]["startedAt"]
    assert [h["trigger"] for h in status["history"]] == ["Spec", "Watch"]
    assert posted_events.reasons() == [("Normal", "Ready"), ("Normal", "Ready")]  # every release is news
    await _tick(apps)  # the new release is recorded: nothing more
    assert len(apps.calls_to("patch", CR)) == patches + 2


async def test_the_checks_wait_for_the_rollout_of_the_new_template(
    apps: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    apps.put("Deployment", _deployment("srv:2", updated=1, total=3))  # an old pod still serves

    async def finish_rollout() -> None:
        await asyncio.sleep(0.3)
        apps.set_status("Deployment", NS, "web", _deployment("srv:2")["status"])

    rollout = asyncio.create_task(finish_rollout())
    await _evaluate(apps, _watching(refserver.url))
    await rollout
    status = _stored(apps)
    row = status["checks"][0]
    assert (row["name"], row["verdict"]) == ("rollout", "Pass") and row["durationMs"] >= 250
    probe = status["checks"][1]
    # the probe ran after the rollout had settled, not against the old pod
    assert probe["measuredAt"] >= status["release"]["startedAt"][:19] + "Z"
    reads = [c for c in apps.calls if c.kind == "Deployment"]
    assert len(reads) >= 3  # one to claim, then polled until settled


async def test_a_failed_rollout_fails_the_gate_and_one_that_never_settles_is_inconclusive(
    apps: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    deadline = {
        "conditions": [
            {"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "x"}
        ]
    }
    apps.put("Deployment", _deployment("srv:2", updated=1, total=3, **deadline))
    await _evaluate(apps, _watching(refserver.url))
    status = _stored(apps)
    assert status["verdict"] == "Fail" and _cond(status, "Ready") == ("False", "RolloutFailed")
    assert [c["verdict"] for c in status["checks"]] == ["Fail", "Pass"]

    apps.put("Deployment", _deployment("srv:3", updated=1, total=3))
    spec = _watching(refserver.url)
    spec["watch"]["settleTimeoutSeconds"] = 0
    await _evaluate(apps, spec, generation=2)
    status = _stored(apps)
    assert status["verdict"] == "Inconclusive" and _cond(status, "Ready")[0] == "False"
    assert status["checks"][0]["reason"] == "RolloutNotSettled"


async def test_a_gate_deleted_while_its_release_settles_writes_no_verdict(
    apps: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    apps.put("Deployment", _deployment("srv:2", updated=1, total=3))

    async def delete_gate() -> None:
        await asyncio.sleep(0.1)
        with apps._lock:
            del apps.objects[(CR, NS, NAME)]

    deleting = asyncio.create_task(delete_gate())
    await _evaluate(apps, _watching(refserver.url))
    await deleting
    assert len(apps.calls_to("patch", CR)) == 1  # the claim only
    assert runtime.current().claims.running == set() and posted_events.events == []


async def test_a_due_recheck_leaves_a_new_release_to_the_watch(
    apps: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    apps.put("Deployment", _deployment("srv:1"))
    spec = _watching(refserver.url, recheckIntervalSeconds=60)
    await _evaluate(apps, spec)
    first = _stored(apps)
    apps.put("Deployment", _deployment("srv:2", generation=2))
    patches = len(apps.calls_to("patch", CR))
    await _recheck(apps, spec, {**first, "completedAt": _ago(120)})
    assert len(apps.calls_to("patch", CR)) == patches  # watch_release takes it, with Ready Unknown
    apps.put("Deployment", _deployment("srv:1"))
    await _recheck(apps, spec, {**first, "completedAt": _ago(120)})
    status = _stored(apps)
    assert status["evaluations"] == 2 and status["release"]["trigger"] == "Recheck"


async def test_a_watched_application_revision_is_the_release_revision(
    apps: FakeKube, posted_events: EventLog, refserver: RunningServer
) -> None:
    application = custom_kind("argoproj.io", "applications")

    def synced(revision: str) -> dict[str, Any]:
        return {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "shop", "namespace": "argocd"},
            "status": {"sync": {"status": "Synced", "revision": revision}},
        }

    apps.put(application, synced("aaa111"))
    spec = _spec(refserver.url, watch={"application": {"name": "shop"}})
    await _evaluate(apps, spec)
    assert _stored(apps)["release"]["revision"] == "aaa111"
    apps.put(application, synced("bbb222"))
    await _tick(apps)
    status = _stored(apps)
    assert status["release"]["revision"] == status["release"]["applicationRevision"] == "bbb222"
    assert status["release"]["trigger"] == "Watch" and status["evaluations"] == 2


async def test_a_rejected_spec_records_the_release_it_was_meant_to_judge(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    spec = _spec("http://127.0.0.1:9", release="r9", checks={"healthProbe": {"requests": 5}})
    status = await _evaluate(kube_fake, spec)
    assert status["phase"] == "Invalid"
    assert status["release"]["revision"] == "r9" and status["release"]["completedAt"]


async def test_a_watch_round_left_running_by_a_failure_is_taken_over_once(
    apps: FakeKube, posted_events: EventLog, refserver: RunningServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    apps.put("Deployment", _deployment("srv:2"))
    left = {
        "observedGeneration": 1,
        "phase": "Running",
        "evaluations": 1,
        "evaluation": {"generation": 1, "id": "d3adr0und", "instance": "x", "fingerprint": "f"},
        "release": {"trigger": "Watch", "generation": 1, "startedAt": "2026-05-01T12:00:00.000Z"},
    }
    _seed(apps, _watching(refserver.url), left, 1)
    monkeypatch.setattr(runtime.current().claims, "running", {"d3adr0und"})  # still running here: hands off
    await _tick(apps)
    assert apps.calls_to("patch", CR) == []
    monkeypatch.setattr(runtime.current().claims, "running", set())  # its task failed: taken over
    await _tick(apps)
    status = _stored(apps)
    assert status["phase"] == "Succeeded" and status["evaluations"] == 2
    assert status["evaluation"]["id"] != "d3adr0und" and status["release"]["trigger"] == "Watch"
    assert status["release"]["workloadTemplateHash"] == _hash("srv:2")
    await _tick(apps)
    assert len(apps.calls_to("patch", CR)) == 2  # one claim, one verdict
