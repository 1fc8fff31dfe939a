"""The MCPBenchmark handlers, called as kopf calls them, against the in-memory API of
``fakekube``: what a create, a retry, a resume, a spec change, a suspend, a refused child and
each state of the Job leave behind in the API, in status and in events.

Shard results are real: the fake Job controller starts the Job's pods, each runs the shard
entrypoint with the environment its container would get (plan, run key from the Secret, its own
name and UID), which loads the reference server with ``mcp_bench`` and publishes a signed
document; the collector then reads exactly what shard pods publish.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import kopf
import pytest
from tests.operator.fakekube import (
    JOB_INDEX,
    EventLog,
    FakeKube,
    PostedEvent,
    container_status,
    merge_patch,
    pod_object,
)

from mcp_bench.results.document import loads_document
from mcp_operator.api import MCPBenchmarkSpec, MCPBenchmarkStatus
from mcp_operator.api.benchmark import KIND
from mcp_operator.api.common import API_VERSION
from mcp_operator.benchmark.contract import (
    ENV_PLAN,
    ENV_RESULT_KEY,
    KEY_SECRET_KEY,
    LABEL_BENCHMARK,
    LABEL_BENCHMARK_UID,
    LABEL_JOB,
    PLAN_SECRET_KEY,
    RESULT_KEY,
    report_name,
    run_account_name,
    run_key_name,
    shard_object_name,
)
from mcp_operator.benchmark.job import job_name
from mcp_operator.benchmark.shard import run_shard
from mcp_operator.conditions import condition
from mcp_operator.handlers import benchmark as handlers
from mcp_refserver import RunningServer

NS = "perf"
NAME = "llama-bench"
UID = "5d0c7f5e-2b1a-4c3e-9f10-8a6b4d2e1c07"
INVOLVED = f"{NS}/{NAME}"
REQUESTS = 10
Status = dict[str, Any]
Handler = Callable[..., Awaitable[None]]
# kopf's decorators type a handler as its whole callback protocol (every keyword kopf passes);
# the tests call the plain async functions with what the handlers read, as their ``**_`` allows
start_benchmark = cast(Handler, handlers.start_benchmark)
collect_benchmark = cast(Handler, handlers.collect_benchmark)


def _spec(url: str = "http://infer.perf.svc:8000", **overrides: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "target": {"url": url, "path": "/delay?ms=1"},
        "load": {"concurrency": [1], "requests": REQUESTS, "requestTimeoutSeconds": 5},
        "shards": 2,
        "preflight": "off",  # these tests are about the run; test_benchmark_preflight.py checks it
    }
    spec.update(overrides)
    return spec


# _run_pods runs the shards one after another in this process: no barrier to wait at, and their
# windows never meet (test_benchmark_barrier.py covers both)
SEQUENTIAL: dict[str, Any] = {"startBarrier": {"enabled": False, "minOverlap": 0}}


def _job_name(spec: dict[str, Any]) -> str:
    return job_name(NAME, MCPBenchmarkSpec.model_validate(spec))


def _body(spec: dict[str, Any], status: Status | None = None, generation: int = 1) -> kopf.Body:
    raw = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": NAME, "namespace": NS, "uid": UID, "generation": generation},
        "spec": spec,
        "status": status or {},
    }
    return kopf.Body(cast(kopf.RawBody, raw))


async def _start(spec: dict[str, Any], status: Status | None = None, generation: int = 1) -> Status:
    """One call of the create/update/resume handler; returns the status it patches."""
    body = _body(spec, status, generation)
    patch = kopf.Patch()
    await start_benchmark(spec=body.spec, status=body.status, meta=body.meta, body=body, patch=patch)
    return dict(dict(patch).get("status") or {})


async def _collect(status: Status, generation: int = 1, spec: dict[str, Any] | None = None) -> Status:
    """One tick of the collection timer; returns the status it patches ({} for none)."""
    body = _body(spec or _spec(), status, generation)
    patch = kopf.Patch()
    await collect_benchmark(spec=body.spec, status=body.status, meta=body.meta, body=body, patch=patch)
    return dict(dict(patch).get("status") or {})


def _cond(status: Status, type_: str) -> tuple[str, str]:
    found = condition(list(status.get("conditions") or []), type_)
    assert found is not None, f"no {type_} condition in {status}"
    return found["status"], found["reason"]


def _message(status: Status, type_: str) -> str:
    found = condition(list(status.get("conditions") or []), type_)
    assert found is not None
    return str(found["message"])


def _container(job: dict[str, Any]) -> dict[str, Any]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def _env(job: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in _container(job)["env"]}


def _run_secret(kube: FakeKube, job: str, key: str) -> str:
    secret = kube.get("Secret", NS, run_key_name(job))
    assert secret is not None
    return base64.b64decode(secret["data"][key]).decode()


def _run_key(kube: FakeKube, job: str) -> str:
    return _run_secret(kube, job, KEY_SECRET_KEY)


def _run_plan(kube: FakeKube, job: str) -> dict[str, Any]:
    """The plan the shards run, from the run's Secret (the Job names it only)."""
    plan = json.loads(_run_secret(kube, job, PLAN_SECRET_KEY))
    assert isinstance(plan, dict)
    return plan


# --- start_benchmark ---


async def test_valid_spec_creates_the_run_children_then_one_job(
    kube_fake: FakeKube, posted_events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_RUNNER_IMAGE", "registry.example/runner:7")
    spec = _spec()
    status = await _start(spec)
    job = _job_name(spec)
    account = run_account_name(job)
    # everything the pods need exists before the Job that starts them
    assert [c.kind for c in kube_fake.calls_to("create")] == [
        "Secret",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "Job",
    ]
    assert kube_fake.names("Job", NS) == [job]
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        assert kube_fake.names(kind, NS) == [account]
    # results, progress reports and the start barrier (two shards)
    assert sorted(kube_fake.names("ConfigMap", NS)) == sorted(
        [
            shard_object_name(job, 0),
            shard_object_name(job, 1),
            f"{job}-progress-0",
            f"{job}-progress-1",
            f"{job}-start",
        ]
    )
    result = kube_fake.get("ConfigMap", NS, shard_object_name(job, 0))
    assert result is not None and "data" not in result  # empty until its shard fills it in
    role = kube_fake.get("Role", NS, account)
    assert role is not None
    rule, start = role["rules"]
    assert rule["resourceNames"] == [
        shard_object_name(job, 0),
        shard_object_name(job, 1),
        f"{job}-progress-0",
        f"{job}-progress-1",
    ]
    assert "create" not in rule["verbs"]
    assert start["resourceNames"] == [f"{job}-start"] and start["verbs"] == ["get"]

    manifest = kube_fake.get("Job", NS, job)
    assert manifest is not None
    assert manifest["metadata"]["ownerReferences"][0]["uid"] == UID
    assert manifest["spec"]["completions"] == 2 and manifest["spec"]["suspend"] is False
    assert manifest["spec"]["template"]["spec"]["serviceAccountName"] == account
    assert _container(manifest)["image"] == "registry.example/runner:7"  # the operator's settings
    env = _env(manifest)
    assert _run_plan(kube_fake, job)["url"] == "http://infer.perf.svc:8000/delay?ms=1"
    assert env[ENV_PLAN] == {"secretKeyRef": {"name": run_key_name(job), "key": PLAN_SECRET_KEY}}
    assert "delay?ms=1" not in json.dumps(manifest)  # what it dials is the Secret's alone
    # the run's key reaches the pods by reference only, never by value in the Job
    assert env[ENV_RESULT_KEY] == {"secretKeyRef": {"name": run_key_name(job), "key": KEY_SECRET_KEY}}
    assert len(_run_key(kube_fake, job)) == 64 and _run_key(kube_fake, job) not in json.dumps(manifest)

    assert status["phase"] == "Running" and status["jobName"] == job
    assert status["observedGeneration"] == 1
    assert status["targetUrl"] == "http://infer.perf.svc:8000/delay?ms=REDACTED"  # every query value
    assert status["shards"] == {"expected": 2}
    assert _cond(status, "Accepted") == ("True", "JobCreated")
    assert _cond(status, "Complete") == ("False", "Running")
    assert _cond(status, "Ready") == ("Unknown", "Running")
    MCPBenchmarkStatus.model_validate(status)  # only fields the CRD declares
    assert posted_events.events == [
        PostedEvent("Normal", "JobCreated", f"created Job {job} with 2 shard(s)", INVOLVED)
    ]


async def test_resume_with_the_same_job_creates_nothing(kube_fake: FakeKube, posted_events: EventLog) -> None:
    """The operator restarted (resume) or the handler ran again: status names the Job already."""
    spec = _spec()
    first = await _start(spec)
    before = len(kube_fake.calls)
    again = await _start(spec, status=merge_patch({}, first))
    new_calls = kube_fake.calls[before:]
    # only the Job is steered (to the suspend it should have); nothing is created
    assert [(c.verb, c.kind, c.body) for c in new_calls] == [("patch", "Job", {"spec": {"suspend": False}})]
    assert again == {"phase": "Running", "observedGeneration": 1}
    assert kube_fake.names("Job", NS) == [_job_name(spec)]
    assert posted_events.reasons() == [("Normal", "JobCreated")]


async def test_retry_before_status_was_written_meets_409s_and_keeps_the_run_key(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    """kopf retries a handler whose status patch never landed: every create answers 409, and
    the key the shards sign with stays the first one."""
    spec = _spec()
    first = await _start(spec)
    job = str(first["jobName"])
    key = _run_key(kube_fake, job)
    before = len(kube_fake.calls)
    again = await _start(spec)
    creates = [(c.kind, c.answered) for c in kube_fake.calls[before:] if c.verb == "create"]
    assert creates == [
        ("Secret", 409),
        ("ServiceAccount", 409),
        ("Role", 409),
        ("RoleBinding", 409),
        *[("ConfigMap", 409)] * 5,  # two results, two progress objects, the start barrier
        ("Job", 409),
    ]
    assert kube_fake.names("Job", NS) == [job]
    assert _run_key(kube_fake, job) == key
    assert again["phase"] == "Running" and again["jobName"] == job
    assert posted_events.reasons() == [("Normal", "JobCreated")]  # no second announcement


async def test_invalid_spec_is_rejected_without_touching_the_api(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    status = await _start(_spec(shards=0))
    assert status["phase"] == "Invalid" and status["verdict"] == "Error"
    assert status["observedGeneration"] == 1
    assert _cond(status, "Accepted") == ("False", "InvalidSpec")
    assert _cond(status, "Ready") == ("False", "InvalidSpec")
    message = _message(status, "Ready")
    assert message.startswith("spec: ") and "shards" in message
    MCPBenchmarkStatus.model_validate(status)
    assert kube_fake.calls == []  # no key, no account, no Job
    assert posted_events.events == [PostedEvent("Warning", "InvalidSpec", message, INVOLVED)]


async def test_missing_target_service_is_target_not_found(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    spec = _spec()
    spec["target"] = {"serviceRef": {"name": "triton", "port": 8000}, "path": "/"}
    status = await _start(spec)
    assert [(c.verb, c.kind, c.namespace, c.name, c.answered) for c in kube_fake.calls] == [
        ("read", "Service", NS, "triton", 404)
    ]
    assert status["phase"] == "Invalid"
    assert _cond(status, "Accepted") == ("False", "TargetNotFound")
    assert kube_fake.names("Job", NS) == []
    assert posted_events.events == [
        PostedEvent("Warning", "TargetNotFound", f"Service {NS}/triton does not exist", INVOLVED)
    ]


async def test_a_refusal_stands_for_its_generation_across_restarts(
    kube_fake: FakeKube, posted_events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A target the policy refuses: judged once. Restarts (resume) neither post another event nor,
    with a wider policy meanwhile, run what was refused; a new generation is judged again."""
    spec = _spec()
    spec["target"] = {"serviceRef": {"name": "triton", "namespace": "models", "port": 8000}, "path": "/v2"}
    kube_fake.put("Service", {"metadata": {"name": "triton", "namespace": "models"}, "spec": {}})
    refused = merge_patch({}, await _start(spec))
    assert _cond(refused, "Accepted")[0] == "False" and len(posted_events.events) == 1
    monkeypatch.setenv("MCP_TARGET_ALLOW_NAMESPACES", "models")  # a restart with a wider policy
    for _ in range(3):
        assert await _start(spec, status=refused) == {}
    assert len(posted_events.events) == 1 and kube_fake.names("Job", NS) == []
    assert (await _start(spec, status=refused, generation=2))["phase"] == "Running"


async def test_existing_target_service_in_another_namespace_resolves(
    kube_fake: FakeKube, posted_events: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TARGET_ALLOW_NAMESPACES", "models")  # allowed by the operator's settings
    kube_fake.put("Service", {"metadata": {"name": "triton", "namespace": "models"}, "spec": {}})
    spec = _spec()
    spec["target"] = {"serviceRef": {"name": "triton", "namespace": "models", "port": 8000}, "path": "/v2"}
    status = await _start(spec)
    assert (kube_fake.calls[0].verb, kube_fake.calls[0].namespace) == ("read", "models")
    assert status["targetUrl"] == "http://triton.models.svc:8000/v2"
    manifest = kube_fake.get("Job", NS, status["jobName"])
    assert manifest is not None
    assert _run_plan(kube_fake, status["jobName"])["url"] == status["targetUrl"]
    assert posted_events.reasons() == [("Normal", "JobCreated")]


async def test_refused_child_fails_the_run_once(kube_fake: FakeKube, posted_events: EventLog) -> None:
    """A 403 on a child is not retried: no Job, status Failed with the server's message, one
    warning; the same generation is not tried again (not on resume either)."""
    kube_fake.refuse("create", "Role", 403)
    spec = _spec()
    job = _job_name(spec)
    status = await _start(spec)
    assert status["phase"] == "Failed" and status["verdict"] == "Error"
    assert _cond(status, "Ready") == ("False", "ChildRejected")
    message = _message(status, "Ready")
    assert message.startswith(f"Role {run_account_name(job)} was refused by the API server (403): ")
    assert kube_fake.names("Job", NS) == []
    assert posted_events.events == [PostedEvent("Warning", "ChildRejected", message, INVOLVED)]
    before = len(kube_fake.calls)
    assert await _start(spec, status=merge_patch({}, status)) == {}
    assert kube_fake.calls[before:] == [] and len(posted_events.events) == 1
    # a new generation (the user fixed the permissions) is tried again
    kube_fake.refusals.clear()
    retried = await _start(spec, status=merge_patch({}, status), generation=2)
    assert retried["phase"] == "Running" and kube_fake.names("Job", NS) == [job]


@pytest.mark.parametrize("forged_owner", [False, True])
async def test_a_key_secret_someone_else_made_is_made_again_not_adopted(
    kube_fake: FakeKube, posted_events: EventLog, forged_owner: bool
) -> None:
    """A Secret of the run key's name made beforehand (by whoever may create Secrets there, with
    an ``ownerReference`` to this benchmark or without: anyone may write one) would hand its
    maker the key the results are signed with and the plan the shards dial: it is deleted and
    made again before the Job, with a fresh key and the run's own plan (issue 35, item 7)."""
    spec = _spec()
    job = _job_name(spec)
    owner = {"apiVersion": "mcp2026.io/v1alpha1", "kind": "MCPBenchmark", "name": NAME, "uid": UID}
    metadata: dict[str, Any] = {"name": run_key_name(job), "namespace": NS}
    if forged_owner:
        metadata["ownerReferences"] = [owner]
    planted_plan = base64.b64encode(json.dumps({"url": "http://attacker:80/"}).encode()).decode()
    kube_fake.put(
        "Secret", {"metadata": metadata, "data": {KEY_SECRET_KEY: "a2V5", PLAN_SECRET_KEY: planted_plan}}
    )
    status = await _start(spec)
    assert status["phase"] == "Running" and status["jobName"] == job, _message(status, "Ready")
    assert _run_key(kube_fake, job) != "key" and len(_run_key(kube_fake, job)) == 64
    assert _run_plan(kube_fake, job)["url"] == "http://infer.perf.svc:8000/delay?ms=1"
    assert [c.verb for c in kube_fake.calls if c.kind == "Secret"] == ["create", "delete", "create"]
    assert posted_events.reasons() == [("Normal", "JobCreated")]


async def test_changed_spec_replaces_the_older_job_of_the_same_benchmark_only(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    first_spec = _spec()
    first = await _start(first_spec)
    old_job = first["jobName"]
    # a Job of another benchmark in the namespace, carrying its own UID label
    foreign = "other-bench-0a1b2c3d"
    kube_fake.put(
        "Job",
        {
            "metadata": {"name": foreign, "namespace": NS, "labels": {LABEL_BENCHMARK_UID: "another-uid"}},
            "spec": {"template": {"spec": {"containers": [{"name": "shard"}]}}},
        },
    )
    second_spec = _spec(shards=3)
    second = await _start(second_spec, status=merge_patch({}, first), generation=2)
    new_job = job_name(NAME, MCPBenchmarkSpec.model_validate(second_spec), run=2)  # a later run
    assert new_job != old_job
    assert kube_fake.names("Job", NS) == sorted([new_job, foreign])
    deletes = kube_fake.calls_to("delete", "Job")
    assert [(d.name, d.options) for d in deletes] == [(old_job, {"propagation_policy": "Background"})]
    listed = kube_fake.calls_to("list", "Job")[-1]
    assert listed.options["label_selector"] == f"{LABEL_BENCHMARK_UID}={UID}"
    assert second["jobName"] == new_job and second["observedGeneration"] == 2
    assert second["shards"] == {"expected": 3}
    assert [e.message for e in posted_events.events] == [
        f"created Job {old_job} with 2 shard(s)",
        f"created Job {new_job} with 3 shard(s)",
    ]


async def test_a_spec_changed_back_runs_with_fresh_children(kube_fake: FakeKube) -> None:
    """spec v1 -> v2 -> v1: the third run must not reuse run 1's Job, key, result and start
    objects (a stale start skipped the barrier and the run ended ShardsNotConcurrent)."""
    v1, v2 = _spec(), _spec(shards=3)
    first = merge_patch({}, await _start(v1))
    second = merge_patch(first, await _start(v2, status=first, generation=2))
    third = merge_patch(second, await _start(v1, status=second, generation=3))
    jobs = [first["jobName"], second["jobName"], third["jobName"]]
    assert len(set(jobs)) == 3, jobs
    assert third["specDigest"] == first["specDigest"] != second["specDigest"]
    secrets = kube_fake.names("Secret", NS)
    assert [n for n in secrets if n.startswith(jobs[2])], secrets  # its own key
    again = await _start(v1, status=third, generation=3)  # the operator restarted: the same run
    assert again == {"observedGeneration": 3} or again.get("jobName", jobs[2]) == jobs[2]


async def test_suspend_and_resume_steer_the_same_job(kube_fake: FakeKube, posted_events: EventLog) -> None:
    spec = _spec()
    status = merge_patch({}, await _start(spec))
    job = status["jobName"]
    paused = _spec(suspend=True)
    assert _job_name(paused) == job  # suspend is not part of the Job's identity

    out = await _start(paused, status=status, generation=2)
    assert out == {"phase": "Suspended", "observedGeneration": 2}
    stored = kube_fake.get("Job", NS, job)
    assert stored is not None and stored["spec"]["suspend"] is True
    status = merge_patch(status, out)

    out = await _start(spec, status=status, generation=3)
    assert out == {"phase": "Running", "observedGeneration": 3}
    stored = kube_fake.get("Job", NS, job)
    assert stored is not None and stored["spec"]["suspend"] is False
    status = merge_patch(status, out)

    # a finished run keeps its phase: suspending it changes nothing to report
    out = await _start(paused, status={**status, "phase": "Succeeded"}, generation=4)
    assert out == {"observedGeneration": 4}

    assert [c.body for c in kube_fake.calls_to("patch", "Job")] == [
        {"spec": {"suspend": True}},
        {"spec": {"suspend": False}},
        {"spec": {"suspend": True}},
    ]
    assert len(kube_fake.calls_to("create", "Job")) == 1
    assert posted_events.reasons() == [("Normal", "JobCreated")]


async def test_steering_a_job_that_is_gone_is_not_an_error(kube_fake: FakeKube) -> None:
    status = merge_patch({}, await _start(_spec()))
    del kube_fake.objects[("Job", NS, status["jobName"])]
    out = await _start(_spec(suspend=True), status=status, generation=2)
    assert kube_fake.calls_to("patch", "Job")[-1].answered == 404
    assert out == {"phase": "Suspended", "observedGeneration": 2}


async def test_suspended_from_the_start_with_its_own_service_account(
    kube_fake: FakeKube, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_RUNNER_SERVICE_ACCOUNT_ALLOW", "bench-*")  # the operator allows it
    spec = _spec(suspend=True, runner={"serviceAccountName": "bench-runner"})
    status = await _start(spec)
    job = str(status["jobName"])
    assert status["phase"] == "Suspended"
    manifest = kube_fake.get("Job", NS, job)
    assert manifest is not None and manifest["spec"]["suspend"] is True
    assert manifest["spec"]["template"]["spec"]["serviceAccountName"] == "bench-runner"
    # no account of the operator's: the user's own is bound to this run's Role
    assert kube_fake.names("ServiceAccount", NS) == []
    binding = kube_fake.get("RoleBinding", NS, run_account_name(job))
    assert binding is not None
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "bench-runner"}]


# --- collect_benchmark ---


async def _started(spec: dict[str, Any]) -> tuple[Status, str]:
    status = merge_patch({}, await _start(spec))
    return status, str(status["jobName"])


async def _run_pods(
    kube: FakeKube, job: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, only: int | None = None
) -> None:
    """The Job's pods, each running the shard entrypoint with the environment the kubelet
    resolves for it; each pod ends Succeeded or Failed with the shard's termination message."""
    for pod in kube.start_indexed_job(NS, job):
        name = pod["metadata"]["name"]
        if only is not None and pod["metadata"]["annotations"][JOB_INDEX] != str(only):
            kube.objects.pop(("Pod", NS, name))  # this index never ran
            continue
        termination = tmp_path / f"{name}.termination"
        with monkeypatch.context() as env:
            for var, value in kube.container_env(pod).items():
                env.setenv(var, value)
            env.setenv("MCP_TERMINATION_MESSAGE_PATH", str(termination))
            code = await asyncio.to_thread(kube.run_in_pod, NS, name, run_shard)
        message = termination.read_text()
        phase = "Succeeded" if code == 0 else "Failed"
        statuses = [container_status("shard", exit_code=code, message=message)]
        kube.set_status("Pod", NS, name, {"phase": phase, "containerStatuses": statuses})


def _finish_job(kube: FakeKube, job: str, *, succeeded: int, failed: int = 0) -> None:
    done = "Failed" if failed else "Complete"
    kube.set_status(
        "Job",
        NS,
        job,
        {"conditions": [{"type": done, "status": "True"}], "succeeded": succeeded, "failed": failed},
    )


def _tamper(text: str) -> str:
    """Change one digit of the completed count: still valid JSON, wrong checksum."""
    marker = '"completed":'
    at = text.index(marker) + len(marker)
    assert text[at].isdigit()
    return text[:at] + str((int(text[at]) + 1) % 10) + text[at + 1 :]


async def test_collect_reports_a_job_that_is_gone(kube_fake: FakeKube) -> None:
    status, job = await _started(_spec())
    del kube_fake.objects[("Job", NS, job)]
    out = await _collect(status)
    assert out["phase"] == "Failed" and out["verdict"] == "Error"
    assert _cond(out, "Ready") == ("False", "JobMissing")
    assert _message(out, "Ready") == f"Job {job} no longer exists"
    assert _cond(out, "Accepted") == ("True", "JobCreated")  # what was true stays
    MCPBenchmarkStatus.model_validate(out)


async def test_collect_writes_shard_counts_only_when_they_change(
    kube_fake: FakeKube, posted_events: EventLog
) -> None:
    status, job = await _started(_spec())
    kube_fake.set_status("Job", NS, job, {"active": 2})
    out = await _collect(status)
    assert out == {"shards": {"expected": 2, "succeeded": 0, "failed": 0}}
    status = merge_patch(status, out)
    assert await _collect(status) == {}  # nothing changed: no patch at all
    kube_fake.set_status("Job", NS, job, {"active": 1, "succeeded": 1})
    out = await _collect(status)
    assert out == {"shards": {"expected": 2, "succeeded": 1, "failed": 0}}
    # results are read only once the Job is done (pods are listed meanwhile: is one unschedulable?
    # and the run's small live-state objects: progress reports and the start barrier)
    listed = [c for c in kube_fake.calls_to("list") if c.kind == "ConfigMap"]
    assert listed and all(c.options["label_selector"] == f"mcp2026.io/run-state-of={job}" for c in listed)
    assert posted_events.reasons() == [("Normal", "JobCreated")]


async def test_collect_merges_two_good_shards_into_a_report(
    kube_fake: FakeKube,
    posted_events: EventLog,
    refserver: RunningServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    status, job = await _started(_spec(url=refserver.url, slo={"latencyP99Ms": 5000}, **SEQUENTIAL))
    await _run_pods(kube_fake, job, monkeypatch, tmp_path)
    # another run's result and pod in the namespace: not this Job's, so not read
    other = "llama-bench-ffffffff"
    kube_fake.put(
        "ConfigMap", {"metadata": {"name": f"{other}-shard-0", "namespace": NS, "labels": {LABEL_JOB: other}}}
    )
    kube_fake.put("Pod", pod_object(f"{other}-0-abcde", NS, {"job-name": other}, phase="Failed", exit_code=1))
    _finish_job(kube_fake, job, succeeded=2)
    posted_events.events.clear()

    out = await _collect(status, spec=_spec(url=refserver.url, **SEQUENTIAL))
    assert out["phase"] == "Succeeded" and out["verdict"] == "Pass"
    assert _cond(out, "Ready") == ("True", "SloMet")
    assert _cond(out, "Complete") == ("True", "JobFinished")
    assert out["shards"] == {"expected": 2, "reported": 2, "rejected": 0, "succeeded": 2, "failed": 0}
    (row,) = out["results"]
    assert row["requests"] == 2 * REQUESTS and row["errors"] == 0 and row["slo"] == "Pass"
    MCPBenchmarkStatus.model_validate(out)
    selectors = {c.kind: c.options.get("label_selector") for c in kube_fake.calls_to("list")}
    assert selectors["ConfigMap"] == f"{LABEL_JOB}={job}" and selectors["Pod"] == f"job-name={job}"

    assert out["reportName"] == report_name(NAME)
    report = kube_fake.get("ConfigMap", NS, report_name(NAME))
    assert report is not None
    assert report["metadata"]["labels"] == {LABEL_BENCHMARK: NAME, LABEL_BENCHMARK_UID: UID}
    (owner,) = report["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner["controller"]) == (KIND, UID, True)
    merged = loads_document(report["data"][RESULT_KEY])  # verifies its checksum
    assert merged.levels[0].completed == 2 * REQUESTS
    assert posted_events.events == [
        PostedEvent("Normal", "SloMet", "2 shard(s) merged; every SLO met", INVOLVED)
    ]

    # a second collection (its status patch was lost) replaces the report it finds
    again = await _collect(status, spec=_spec(url=refserver.url, **SEQUENTIAL))
    assert again["reportName"] == report_name(NAME) and again["verdict"] == "Pass"
    writes = [
        (c.verb, c.answered)
        for c in kube_fake.calls_to(kind="ConfigMap")
        if c.name == report_name(NAME) and c.verb != "list"
    ]
    assert writes == [("create", 201), ("create", 409), ("replace", 200)]
    report = kube_fake.get("ConfigMap", NS, report_name(NAME))
    assert report is not None
    assert loads_document(report["data"][RESULT_KEY]).levels[0].completed == 2 * REQUESTS


async def test_collect_rejects_a_shard_result_with_a_broken_checksum(
    kube_fake: FakeKube,
    posted_events: EventLog,
    refserver: RunningServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    status, job = await _started(_spec(url=refserver.url, **SEQUENTIAL))
    await _run_pods(kube_fake, job, monkeypatch, tmp_path)
    bad = shard_object_name(job, 1)
    published = kube_fake.objects[("ConfigMap", NS, bad)]
    published["data"][RESULT_KEY] = _tamper(published["data"][RESULT_KEY])
    _finish_job(kube_fake, job, succeeded=2)
    posted_events.events.clear()

    out = await _collect(status, spec=_spec(url=refserver.url, **SEQUENTIAL))
    assert out["phase"] == "Failed" and out["verdict"] == "Error"
    assert _cond(out, "Ready") == ("False", "ShardResultRejected")
    assert out["shards"]["reported"] == 1 and out["shards"]["rejected"] == 1
    assert out["results"][0]["requests"] == REQUESTS  # the good shard only
    first, last = posted_events.events
    assert (first.type, first.reason) == ("Warning", "ShardResultRejected")
    assert first.message.startswith(f"{bad}: checksum: crc32c mismatch")
    assert (last.type, last.reason) == ("Warning", "ShardResultRejected")
    assert last.message.startswith(f"1 shard result(s) rejected: {bad} (checksum:")


async def test_collect_says_why_a_shard_published_nothing(
    kube_fake: FakeKube,
    posted_events: EventLog,
    refserver: RunningServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    status, job = await _started(_spec(url=refserver.url, **SEQUENTIAL))
    kube_fake.refuse("patch", "ConfigMap", 403, name=shard_object_name(job, 1))
    await _run_pods(kube_fake, job, monkeypatch, tmp_path)
    _finish_job(kube_fake, job, succeeded=1, failed=1)
    posted_events.events.clear()

    out = await _collect(status, spec=_spec(url=refserver.url, **SEQUENTIAL))
    assert _cond(out, "Ready") == ("False", "ShardResultMissing")
    (failed_pod,) = [p for p in kube_fake.names("Pod", NS) if p.startswith(f"{job}-1-")]
    assert _message(out, "Ready") == (
        f"1 of 2 shards published a result (1 pods succeeded, 1 failed); "
        f"{failed_pod}: shard 1 could not publish its result: 403 Forbidden"
    )
    assert out["shards"]["reported"] == 1 and out["shards"]["rejected"] == 0
    assert posted_events.events == [
        PostedEvent("Warning", "ShardResultMissing", _message(out, "Ready"), INVOLVED)
    ]


async def test_collect_reports_a_shard_oom_killed_at_its_memory_limit(
    kube_fake: FakeKube,
    posted_events: EventLog,
    refserver: RunningServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    spec = _spec(url=refserver.url, runner={"memory": "32Mi", "memoryLimit": "64Mi"}, **SEQUENTIAL)
    status, job = await _started(spec)
    assert _container(kube_fake.get("Job", NS, job) or {})["resources"]["limits"] == {"memory": "64Mi"}
    await _run_pods(kube_fake, job, monkeypatch, tmp_path, only=0)
    # shard 1's pod, killed by the kernel at its limit before it published: the kubelet says
    # OOMKilled, and with FallbackToLogsOnError the termination message is the log's tail, which
    # says nothing of it
    ran = {key: pod for key, pod in kube_fake.objects.items() if key[0] == "Pod"}
    started = kube_fake.start_indexed_job(NS, job)
    kube_fake.objects.update(ran)  # shard 0's pod as it ended
    (killed,) = [p["metadata"]["name"] for p in started if ("Pod", NS, p["metadata"]["name"]) not in ran]
    assert killed.startswith(f"{job}-1-")
    oom = container_status("shard", exit_code=137, message="shard 1: level 1/1 running\n")
    oom["state"]["terminated"]["reason"] = "OOMKilled"
    kube_fake.set_status("Pod", NS, killed, {"phase": "Failed", "containerStatuses": [oom]})
    _finish_job(kube_fake, job, succeeded=1, failed=1)
    posted_events.events.clear()

    out = await _collect(status, spec=spec)
    assert _cond(out, "Ready") == ("False", "ShardFailed")
    assert _cond(out, "Failed") == ("True", "ShardFailed")
    assert out["phase"] == "Failed" and out["verdict"] == "Error"
    assert _message(out, "Ready") == (
        f"1 of 2 shards published a result (1 pods succeeded, 1 failed); "
        f"{killed}: OOMKilled (exit 137) at its memory limit 64Mi; raise spec.runner.memoryLimit"
    )
    assert posted_events.events == [PostedEvent("Warning", "ShardFailed", _message(out, "Ready"), INVOLVED)]
    MCPBenchmarkStatus.model_validate(out)
