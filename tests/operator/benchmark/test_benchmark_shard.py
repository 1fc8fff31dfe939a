"""The shard entrypoint (``mcp_operator.benchmark.shard.run_shard``) with the environment its
Job gives it, against the in-memory API of ``fakekube`` and the reference server.

The environment is not written by hand: the run's children and Job are built by the operator's
own builders and created through ``reconcile.create_run``, the fake Job controller starts the
Indexed Job's pods, and the fake kubelet resolves the container's env (values, the pod's name,
namespace and UID, the run key from its Secret, ``JOB_COMPLETION_INDEX``). So these tests check
the contract between the Job builder, the shard and the collector, not a copy of it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from tests.httpserve import serving
from tests.operator.fakekube import FakeKube

from mcp_bench.results.document import dumps_document, loads_document
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.api.benchmark import KIND
from mcp_operator.api.common import API_VERSION
from mcp_operator.benchmark import reconcile
from mcp_operator.benchmark.attestation import ATTESTATION_PREFIX
from mcp_operator.benchmark.contract import (
    ENV_ACTIVE_DEADLINE,
    ENV_BENCHMARK_UID,
    ENV_COMPLETION_INDEX,
    ENV_JOB_NAME,
    ENV_NAMESPACE,
    ENV_PLAN,
    ENV_POD_NAME,
    ENV_POD_UID,
    ENV_RESULT_KEY,
    ENV_SECRET_HEADERS,
    LABEL_BENCHMARK,
    LABEL_BENCHMARK_UID,
    LABEL_JOB,
    LABEL_SHARD,
    PROGRESS_KEY,
    RESULT_KEY,
    progress_object_name,
    shard_object_name,
    shard_result_patch,
)
from mcp_operator.benchmark.job import job_name, shard_job
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.benchmark.run import new_run_key, run_objects
from mcp_operator.benchmark.shard import (
    EXIT_PLAN,
    EXIT_PUBLISH,
    PUBLISH_AT_LEAST_S,
    PUBLISH_WITHIN_S,
    publish_within_s,
    run_shard,
)
from mcp_refserver import RunningServer

NS = "perf"
NAME = "llama-bench"
UID = "5d0c7f5e-2b1a-4c3e-9f10-8a6b4d2e1c07"
INDEX = 1
REQUESTS = 10
TOKEN = "Bearer canary-S3CRET-9f2c"
REQUIRED = [
    ENV_PLAN,
    ENV_BENCHMARK_UID,
    ENV_JOB_NAME,
    ENV_NAMESPACE,
    ENV_POD_NAME,
    ENV_POD_UID,
    ENV_RESULT_KEY,
]


@dataclass(frozen=True)
class Shard:
    job: str
    job_uid: str
    pod: dict[str, Any]
    env: dict[str, str]
    key: str
    termination: Path

    @property
    def result_name(self) -> str:
        return shard_object_name(self.job, INDEX)


async def _shard(
    kube: FakeKube, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, url: str, **spec_overrides: Any
) -> Shard:
    """A run created as the operator creates it; shard ``INDEX``'s pod env set in this process."""
    data: dict[str, Any] = {
        "target": {"url": url, "path": "/delay?ms=1"},
        "load": {"concurrency": [1], "requests": REQUESTS, "requestTimeoutSeconds": 5},
        "shards": 2,
        **spec_overrides,
    }
    spec = MCPBenchmarkSpec.model_validate(data)
    job = job_name(NAME, spec)
    plan = plan_from_spec(spec, url, NAME)
    manifest = shard_job(
        spec=spec,
        name=NAME,
        job=job_name(NAME, spec),
        uid=UID,
        command=("shard",),
        default_image="i",
    )
    key = new_run_key()
    children = run_objects(spec=spec, benchmark=NAME, uid=UID, job=job, key=key, plan=plan)
    assert await reconcile.create_run(NS, children, manifest)
    pods = kube.start_indexed_job(NS, job)
    pod = pods[INDEX]
    env = kube.container_env(pod)
    # every variable the shard needs is one the Job sets
    assert set(REQUIRED) <= set(env) and env[ENV_COMPLETION_INDEX] == str(INDEX)
    termination = tmp_path / "termination-log"
    for var, value in env.items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("MCP_TERMINATION_MESSAGE_PATH", str(termination))
    stored_job = kube.get("Job", NS, job)
    assert stored_job is not None
    return Shard(job, stored_job["metadata"]["uid"], pod, env, key, termination)


async def _run() -> int:
    """The entrypoint as the pod runs it: blocking, in its own thread (the server stays served)."""
    return await asyncio.to_thread(run_shard)


async def _run_in_pod(kube: FakeKube, shard: Shard) -> int:
    """As ``_run``, with its stdout kept as the pod's log (where it attests its result)."""
    return await asyncio.to_thread(kube.run_in_pod, NS, shard.pod["metadata"]["name"], run_shard)


async def test_shard_fills_in_its_result_object_and_the_collector_accepts_it(
    kube_fake: FakeKube, refserver: RunningServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shard = await _shard(kube_fake, monkeypatch, tmp_path, refserver.url)
    before = len(kube_fake.calls)
    assert await _run_in_pod(kube_fake, shard) == 0
    # one call for the result: the data of its own, pre-created object; never a create, never
    # labels or owners; the rest are progress reports into its own progress object, likewise
    calls = kube_fake.calls[before:]
    (call,) = [c for c in calls if c.name == shard.result_name]
    assert (call.verb, call.kind, call.namespace, call.name) == ("patch", "ConfigMap", NS, shard.result_name)
    assert list(call.body) == ["data"] and list(call.body["data"]) == [RESULT_KEY]
    progress = [c for c in calls if c.name != shard.result_name]
    assert progress and {(c.verb, c.name) for c in progress} == {
        ("patch", progress_object_name(shard.job, INDEX))
    }
    assert all(list(c.body["data"]) == [PROGRESS_KEY] for c in progress)

    published = kube_fake.get("ConfigMap", NS, shard.result_name)
    assert published is not None
    assert published["metadata"]["labels"] == {
        LABEL_BENCHMARK: NAME,
        LABEL_BENCHMARK_UID: UID,
        LABEL_JOB: shard.job,
        LABEL_SHARD: str(INDEX),
    }
    assert published["metadata"]["ownerReferences"] == [
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "name": NAME,
            "uid": UID,
            "controller": False,
            "blockOwnerDeletion": True,
        }
    ]
    document = loads_document(published["data"][RESULT_KEY], shard.key.encode())  # checksum and HMAC
    assert document.shard_index == INDEX
    assert document.origin == {
        "runUid": UID,
        "job": shard.job,
        "pod": shard.pod["metadata"]["name"],
        "podUid": shard.pod["metadata"]["uid"],
    }
    assert document.levels[0].completed == REQUESTS and document.levels[0].failed == 0
    assert document.plan.url == refserver.url + "/delay?ms=REDACTED"  # every query value, by position
    assert shard.termination.read_text() == (
        f"shard {INDEX}: {REQUESTS} requests completed, 0 failed; result published"
    )

    # what the collector makes of it: shard 1 counts, shard 0 (not run) is missing, not rejected
    state = reconcile.JobState(True, 1, 0, shard.job_uid, 2)
    key = await reconcile.read_run_key(NS, shard.job)
    readout, failures = await reconcile.read_results(
        NS, UID, shard.job, state, key, await reconcile.run_pods(NS, shard.job)
    )
    assert [d.shard_index for d in readout.documents] == [INDEX]
    assert readout.rejected == {} and failures == []


@pytest.fixture
async def header_echo() -> AsyncIterator[tuple[str, list[str]]]:
    """A plain HTTP target that records the Authorization header of every request."""
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    async with serving(app) as url:
        yield url, seen


async def test_secret_header_is_sent_but_never_published(
    kube_fake: FakeKube,
    header_echo: tuple[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, seen = header_echo
    kube_fake.put(
        "Secret", {"metadata": {"name": "infer-token", "namespace": NS}, "stringData": {"token": TOKEN}}
    )
    header = {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "infer-token", "key": "token"}}}
    shard = await _shard(kube_fake, monkeypatch, tmp_path, url, target={"url": url, "headers": [header]})
    assert json.loads(shard.env[ENV_SECRET_HEADERS]) == {"Authorization": "MCP_HEADER_0"}
    assert await _run() == 0
    assert seen.count(TOKEN) >= REQUESTS  # every measured request carried it
    published = kube_fake.get("ConfigMap", NS, shard.result_name)
    assert published is not None
    text = published["data"][RESULT_KEY]
    assert "canary-S3CRET" not in text and "canary-S3CRET" not in shard.termination.read_text()
    assert "Authorization" not in loads_document(text).plan.payload.headers


@pytest.mark.parametrize("missing", REQUIRED)
async def test_missing_environment_variable_is_exit_2_naming_it(
    kube_fake: FakeKube, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, missing: str
) -> None:
    shard = await _shard(kube_fake, monkeypatch, tmp_path, "http://127.0.0.1:9")
    monkeypatch.delenv(missing)
    before = len(kube_fake.calls)
    assert await _run() == EXIT_PLAN
    assert shard.termination.read_text() == f"shard cannot start: environment variable {missing} is not set"
    assert kube_fake.calls[before:] == []  # nothing ran, nothing was published


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        (ENV_COMPLETION_INDEX, "one", "invalid literal for int()"),
        (ENV_PLAN, "{}", "url"),
        (ENV_SECRET_HEADERS, '{"Authorization": "MCP_HEADER_7"}', "MCP_HEADER_7 is not set"),
        (ENV_SECRET_HEADERS, '["Authorization"]', "must be a JSON object"),
    ],
)
async def test_unusable_environment_is_exit_2_saying_why(
    kube_fake: FakeKube, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, var: str, value: str, says: str
) -> None:
    shard = await _shard(kube_fake, monkeypatch, tmp_path, "http://127.0.0.1:9")
    monkeypatch.setenv(var, value)
    before = len(kube_fake.calls)
    assert await _run() == EXIT_PLAN
    message = shard.termination.read_text()
    assert message.startswith("shard cannot start: ") and says in message
    assert kube_fake.calls[before:] == []


async def test_refused_publish_is_exit_4_with_a_message(
    kube_fake: FakeKube, refserver: RunningServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shard = await _shard(kube_fake, monkeypatch, tmp_path, refserver.url)
    kube_fake.refuse("patch", "ConfigMap", 403)
    assert await _run() == EXIT_PUBLISH
    assert shard.termination.read_text() == f"shard {INDEX} could not publish its result: 403 Forbidden"
    published = kube_fake.get("ConfigMap", NS, shard.result_name)
    assert published is not None and "data" not in published


async def test_result_object_gone_is_exit_4_and_never_created_by_the_shard(
    kube_fake: FakeKube, refserver: RunningServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Shards may only fill in the object the operator made (RBAC cannot limit create by name)."""
    shard = await _shard(kube_fake, monkeypatch, tmp_path, refserver.url)
    del kube_fake.objects[("ConfigMap", NS, shard.result_name)]
    before = len(kube_fake.calls)
    assert await _run() == EXIT_PUBLISH
    assert shard.termination.read_text() == f"shard {INDEX} could not publish its result: 404 Not Found"
    calls = [c for c in kube_fake.calls[before:] if c.name == shard.result_name]
    assert [(c.verb, c.answered) for c in calls] == [("patch", 404)]
    assert kube_fake.get("ConfigMap", NS, shard.result_name) is None


async def test_fingerprint_probe_carries_the_secret_header_too(
    kube_fake: FakeKube,
    header_echo: tuple[str, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    url, seen = header_echo
    kube_fake.put(
        "Secret", {"metadata": {"name": "infer-token", "namespace": NS}, "stringData": {"token": TOKEN}}
    )
    header = {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "infer-token", "key": "token"}}}
    await _shard(kube_fake, monkeypatch, tmp_path, url, target={"url": url, "headers": [header]})
    assert await _run() == 0
    assert set(seen) == {TOKEN}


async def _collected(kube: FakeKube, shard: Shard) -> dict[str, str]:
    """What the collector rejects of this run (shard ``INDEX`` ran; the other index did not)."""
    state = reconcile.JobState(True, 1, 0, shard.job_uid, 2)
    key = await reconcile.read_run_key(NS, shard.job)
    readout, _ = await reconcile.read_results(
        NS, UID, shard.job, state, key, await reconcile.run_pods(NS, shard.job)
    )
    assert [d.shard_index for d in readout.documents] in ([], [INDEX])
    return readout.rejected


async def test_a_secret_reader_s_re_signed_result_is_rejected(
    kube_fake: FakeKube, refserver: RunningServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The run's key signs, but only the shard's container writes its log: a result re-signed by
    anyone who may read the key's Secret (completed x 10) is not the one the log attests."""
    shard = await _shard(kube_fake, monkeypatch, tmp_path, refserver.url)
    assert await _run_in_pod(kube_fake, shard) == 0
    assert ATTESTATION_PREFIX in kube_fake.logs[(NS, shard.pod["metadata"]["name"])]
    published = kube_fake.get("ConfigMap", NS, shard.result_name)
    assert published is not None
    doc = loads_document(published["data"][RESULT_KEY], shard.key.encode())
    for level in doc.levels:
        level.completed *= 10
    forged = dumps_document(doc, shard.key.encode())  # the Secret reader's key: a valid HMAC
    kube_fake.core.patch_namespaced_config_map(shard.result_name, NS, shard_result_patch(forged))
    assert await _collected(kube_fake, shard) == {shard.result_name: "the pod's log attests another document"}


async def test_a_result_its_pod_s_log_does_not_attest_is_rejected(
    kube_fake: FakeKube, refserver: RunningServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shard = await _shard(kube_fake, monkeypatch, tmp_path, refserver.url)
    assert await _run() == 0  # its stdout went elsewhere: the pod's log holds nothing
    assert await _collected(kube_fake, shard) == {shard.result_name: "not attested by the pod's log"}


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (403, "403 Forbidden: the operator may not get pods/log here"),
        (404, "404: the pod or its container's log is gone"),
        (500, "500: the kubelet's answer did not come through"),
    ],
)
async def test_an_unreadable_log_accepts_nothing(
    kube_fake: FakeKube,
    refserver: RunningServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    status: int,
    says: str,
) -> None:
    shard = await _shard(kube_fake, monkeypatch, tmp_path, refserver.url)
    assert await _run_in_pod(kube_fake, shard) == 0
    kube_fake.refuse("read", "PodLog", status)
    rejected = await _collected(kube_fake, shard)
    assert rejected[shard.result_name].startswith(f"not attested: the pod's log cannot be read ({says}")


@pytest.mark.parametrize(
    ("deadline", "elapsed", "within"),
    [
        ("3600", 100.0, 3500.0),  # the rest of the Job's deadline, not a fixed 300 s
        ("86400", 0.0, 86400.0),
        ("600", 595.0, PUBLISH_AT_LEAST_S),  # a last try however little is left
        (None, 5.0, PUBLISH_WITHIN_S),  # a Job that names no deadline (an older operator's)
        ("", 5.0, PUBLISH_WITHIN_S),
        ("soon", 5.0, PUBLISH_WITHIN_S),
    ],
)
def test_a_result_is_retried_until_the_runs_deadline(
    deadline: str | None, elapsed: float, within: float
) -> None:
    """A measured result outlives an API server outage for as long as the run may last: the
    Job's activeDeadlineSeconds, after which Kubernetes ends the pod anyway (issue 35, item 7)."""
    assert publish_within_s(deadline, elapsed) == pytest.approx(within)


def test_the_job_tells_its_shards_its_deadline() -> None:
    spec = MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": "http://h:8000"},
            "load": {"concurrency": [1], "requests": 1},
            "runner": {"activeDeadlineSeconds": 7200},
        }
    )
    manifest = shard_job(
        spec=spec, name=NAME, job=job_name(NAME, spec), uid=UID, command=("s",), default_image="i"
    )
    env = {e["name"]: e.get("value") for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[ENV_ACTIVE_DEADLINE] == "7200" == str(manifest["spec"]["activeDeadlineSeconds"])
