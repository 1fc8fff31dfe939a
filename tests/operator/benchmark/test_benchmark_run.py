"""A run's children besides the Job (key Secret, own account, Role limited by name, empty result
objects), credentials kept out of the Job, and a refused child create told apart from a
transient failure."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from kubernetes.client.exceptions import ApiException

from mcp_bench.plan import RunPlan
from mcp_common.redact import REDACTED
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.benchmark import reconcile
from mcp_operator.benchmark.contract import ENV_PLAN, KEY_SECRET_KEY, PLAN_SECRET_KEY
from mcp_operator.benchmark.job import job_name, shard_job
from mcp_operator.benchmark.plan import plan_from_spec, prepare_plan
from mcp_operator.benchmark.run import new_run_key, run_objects
from mcp_operator.targets import SpecProblem

UID = "0f9c2a1e-5b7d-4c1e-9e51-3d8c6a7b2f10"
TOKEN = "canary-T0KEN-4f1d"


def _spec(**overrides: Any) -> MCPBenchmarkSpec:
    data: dict[str, Any] = {
        "target": {"url": "http://vllm.ml.svc:8000", "path": "/health"},
        "load": {"concurrency": [2], "requests": 10},
        "shards": 3,
    }
    data.update(overrides)
    return MCPBenchmarkSpec.model_validate(data)


def _plan(spec: MCPBenchmarkSpec) -> RunPlan:
    return plan_from_spec(spec, "http://x", "bench")


def _by_kind(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        out.setdefault(obj["kind"], []).append(obj)
    return out


def test_run_objects_come_in_creation_order_and_are_owned_by_the_benchmark() -> None:
    spec = _spec()
    job = job_name("bench", spec)
    objects = run_objects(spec=spec, benchmark="bench", uid=UID, job=job, key="k" * 64, plan=_plan(spec))
    assert [o["kind"] for o in objects] == [
        "Secret",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
    ]
    for obj in objects:
        assert obj["metadata"]["ownerReferences"][0]["uid"] == UID
    results = [o for o in objects if o["metadata"]["labels"].get("mcp2026.io/job") == job]
    assert [m["metadata"]["name"] for m in results if m["kind"] == "ConfigMap"] == [
        f"{job}-shard-0",
        f"{job}-shard-1",
        f"{job}-shard-2",
    ]
    # live state: a progress object per shard and the start barrier's object, labelled apart so
    # the collector's listing of results never sees them
    state = [o for o in objects if o["metadata"]["labels"].get("mcp2026.io/run-state-of") == job]
    assert [m["metadata"]["name"] for m in state] == [
        f"{job}-progress-0",
        f"{job}-progress-1",
        f"{job}-progress-2",
        f"{job}-start",
    ]
    assert all("mcp2026.io/job" not in m["metadata"]["labels"] for m in state)


def test_the_role_lets_a_shard_fill_in_this_run_s_results_and_nothing_else() -> None:
    spec = _spec()
    job = job_name("bench", spec)
    kinds = _by_kind(run_objects(spec=spec, benchmark="bench", uid=UID, job=job, key="k", plan=_plan(spec)))
    (role,) = kinds["Role"]
    rule, start = role["rules"]
    assert rule == {
        "apiGroups": [""],
        "resources": ["configmaps"],
        # RBAC cannot limit create by name: the operator creates these, the shard only updates
        "resourceNames": [f"{job}-shard-{i}" for i in range(3)] + [f"{job}-progress-{i}" for i in range(3)],
        "verbs": ["get", "update", "patch"],
    }
    # the start barrier's object is the operator's to write: the shards may only read it
    assert start == {
        "apiGroups": [""],
        "resources": ["configmaps"],
        "resourceNames": [f"{job}-start"],
        "verbs": ["get"],
    }
    one = _spec(shards=1)
    (single,) = _by_kind(
        run_objects(spec=one, benchmark="bench", uid=UID, job=job, key="k", plan=_plan(one))
    )["Role"][0]["rules"]
    assert single["resourceNames"] == [f"{job}-shard-0", f"{job}-progress-0"]  # no barrier for one shard
    (account,) = kinds["ServiceAccount"]
    (binding,) = kinds["RoleBinding"]
    assert account["metadata"]["name"] == role["metadata"]["name"] == f"{job}-shard"
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": f"{job}-shard"}]
    assert "automountServiceAccountToken" not in account  # the shard needs its token to publish


def test_a_user_account_is_bound_instead_of_a_new_one() -> None:
    spec = _spec(runner={"serviceAccountName": "team-runner"})
    job = job_name("bench", spec)
    kinds = _by_kind(run_objects(spec=spec, benchmark="bench", uid=UID, job=job, key="k", plan=_plan(spec)))
    assert "ServiceAccount" not in kinds
    assert kinds["RoleBinding"][0]["subjects"] == [{"kind": "ServiceAccount", "name": "team-runner"}]


def test_the_run_secret_holds_the_key_and_the_plan_and_the_job_neither() -> None:
    """What the shards dial (a query value, a literal header value) and sign with reaches them
    from the run's Secret; the Job and its pods, which more people may read, carry neither."""
    key = new_run_key()
    assert len(key) == 64 and key != new_run_key()
    url = f"http://vllm:8000/v1?model={TOKEN}"
    spec = _spec(target={"url": url, "headers": [{"name": "X-Tenant", "value": f"tenant-{TOKEN}"}]})
    plan = plan_from_spec(spec, url, "bench")
    job = job_name("bench", spec)
    (secret,) = _by_kind(run_objects(spec=spec, benchmark="bench", uid=UID, job=job, key=key, plan=plan))[
        "Secret"
    ]
    assert secret["metadata"]["name"] == f"{job}-key" and secret["immutable"] is True
    assert set(secret["stringData"]) == {KEY_SECRET_KEY, PLAN_SECRET_KEY}
    assert secret["stringData"][KEY_SECRET_KEY] == key
    carried = RunPlan.from_dict(json.loads(secret["stringData"][PLAN_SECRET_KEY]))
    assert carried == plan and TOKEN in carried.url
    assert carried.payload.headers == {"X-Tenant": f"tenant-{TOKEN}"}
    manifest = shard_job(spec=spec, name="bench", job=job, uid=UID, command=("c",), default_image="i")
    text = json.dumps(manifest)
    assert key not in text and TOKEN not in text
    env = {e["name"]: e for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env[ENV_PLAN] == {
        "name": ENV_PLAN,
        "valueFrom": {"secretKeyRef": {"name": f"{job}-key", "key": PLAN_SECRET_KEY}},
    }


def test_secret_headers_travel_by_reference_and_literal_ones_in_the_plan() -> None:
    spec = _spec(
        target={
            "url": "http://vllm:8000",
            "headers": [
                {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "api", "key": "bearer"}}},
                {"name": "X-Tenant", "value": "team-a"},
                {"name": "X-Api-Key", "valueFrom": {"secretKeyRef": {"name": "api", "key": "key"}}},
            ],
        }
    )
    plan = plan_from_spec(spec, "http://vllm:8000", "bench")
    assert plan.payload.headers == {"X-Tenant": "team-a"}
    manifest = shard_job(
        spec=spec,
        name="bench",
        job=job_name("bench", spec),
        uid=UID,
        command=("c",),
        default_image="i",
    )
    env = {e["name"]: e for e in manifest["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MCP_HEADER_0"] == {
        "name": "MCP_HEADER_0",
        "valueFrom": {"secretKeyRef": {"name": "api", "key": "bearer"}},
    }
    assert env["MCP_HEADER_1"]["valueFrom"] == {"secretKeyRef": {"name": "api", "key": "key"}}
    assert json.loads(env["MCP_SECRET_HEADERS"]["value"]) == {
        "Authorization": "MCP_HEADER_0",
        "X-Api-Key": "MCP_HEADER_1",
    }
    assert all("value" not in e for e in env.values() if "valueFrom" in e)


async def _exists(namespace: str, name: str) -> bool:
    return True


@pytest.mark.parametrize(
    "url",
    [f"http://user:{TOKEN}@vllm:8000", f"http://vllm:8000/?token={TOKEN}", f"vllm:8000/x?api_key={TOKEN}"],
)
async def test_a_url_with_credentials_is_refused_without_repeating_them(url: str) -> None:
    problem = await prepare_plan(_spec(target={"url": url}), "ml", "bench", _exists)
    assert isinstance(problem, SpecProblem) and problem.reason == "CredentialsInUrl"
    assert TOKEN not in problem.message and "valueFrom.secretKeyRef" in problem.message


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"target": {"url": "http://vllm:8000", "path": f"/v1?token={TOKEN}"}}, "spec.target.path"),
        ({"target": {"url": "http://vllm:8000", "path": f"/v1?%74oken={TOKEN}"}}, "spec.target.path"),
        ({"target": {"url": f"http://vllm:8000/?%74oken={TOKEN}"}}, "spec.target.url"),
        (
            {
                "target": {"url": "http://vllm:8000", "backend": "openai-chat", "model": "m"},
                "workload": {"images": {"encoding": "url", "urlBase": f"http://u:{TOKEN}@img:80/p"}},
            },
            "spec.workload.images.urlBase",
        ),
        (
            {
                "target": {"url": "http://vllm:8000", "backend": "openai-chat", "model": "m"},
                "workload": {
                    "classes": [
                        {"name": "v", "images": {"encoding": "url", "urlBase": f"http://img/?sig={TOKEN}"}}
                    ]
                },
            },
            "spec.workload.classes[0].images.urlBase",
        ),
    ],
)
async def test_every_url_the_job_copies_is_checked_for_credentials(
    overrides: dict[str, Any], field: str
) -> None:
    """The path and the image urlBase reach the Job's env and the plan ConfigMap as the url does."""
    problem = await prepare_plan(_spec(**overrides), "ml", "bench", _exists)
    assert isinstance(problem, SpecProblem) and problem.reason == "CredentialsInUrl"
    assert field in problem.message and TOKEN not in problem.message


async def test_headers_on_a_backend_that_cannot_send_them_are_refused() -> None:
    spec = _spec(
        target={
            "url": "http://triton:8000",
            "backend": "triton-http",
            "model": "m",
            "headers": [{"name": "A", "value": "b"}],
        }
    )
    problem = await prepare_plan(spec, "ml", "bench", _exists)
    assert isinstance(problem, SpecProblem) and problem.reason == "HeadersUnsupported"


def _api_error(status: int, message: str) -> ApiException:
    exc = ApiException(status=status, reason="Refused")
    exc.body = json.dumps({"kind": "Status", "message": message})
    return exc


@pytest.mark.parametrize("status", [400, 403, 404, 422])
async def test_a_refused_child_is_a_child_rejected_error_with_the_server_s_message(
    status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: Any, **__: Any) -> None:
        raise _api_error(status, f'Job.batch "x" is invalid: see http://u:{TOKEN}@h/')

    monkeypatch.setattr(reconcile, "_creator", lambda kind: refuse)
    with pytest.raises(reconcile.ChildRejectedError) as info:
        await reconcile.create_child("ns", {"kind": "Job", "metadata": {"name": "x"}})
    assert info.value.status == status and "is invalid" in str(info.value)
    assert str(info.value).startswith(f"Job x was refused by the API server ({status})")
    assert TOKEN not in str(info.value)


@pytest.mark.parametrize("status", [408, 429, 500, 503])
async def test_transient_failures_propagate_to_be_retried(
    status: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*_: Any, **__: Any) -> None:
        raise _api_error(status, "try again")

    monkeypatch.setattr(reconcile, "_creator", lambda kind: fail)
    with pytest.raises(ApiException):
        await reconcile.create_child("ns", {"kind": "Job", "metadata": {"name": "x"}})


async def test_a_conflict_means_a_retry_already_made_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def conflict(*_: Any, **__: Any) -> None:
        raise _api_error(409, "exists")

    monkeypatch.setattr(reconcile, "_creator", lambda kind: conflict)
    assert await reconcile.create_child("ns", {"kind": "Secret", "metadata": {"name": "x"}}) is False


class _HeaderRecorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        _HeaderRecorder.seen.append(dict(self.headers.items()))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *_: Any) -> None:
        pass


class _CoreApi:
    def __init__(self) -> None:
        self.patches: list[tuple[str, str, dict[str, Any]]] = []

    def patch_namespaced_config_map(
        self, name: str, namespace: str, body: dict[str, Any], **_: Any
    ) -> None:  # the client's keyword options (_request_timeout) are the real client's business
        self.patches.append((name, namespace, body))


def test_the_shard_sends_secret_headers_and_publishes_a_signed_document_without_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from mcp_bench.results.document import loads_document
    from mcp_operator.benchmark import shard

    server = ThreadingHTTPServer(("127.0.0.1", 0), _HeaderRecorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        spec = _spec(
            target={
                "url": url,
                "path": "/x",
                "headers": [
                    {
                        "name": "Authorization",
                        "valueFrom": {"secretKeyRef": {"name": "api", "key": "bearer"}},
                    },
                    {"name": "X-Tenant", "value": "team-a"},
                ],
            },
            shards=2,
        )
        plan = plan_from_spec(spec, url, "bench")
        core = _CoreApi()
        env = {
            "MCP_BENCH_PLAN": json.dumps(plan.model_dump(mode="json")),
            "MCP_BENCHMARK_UID": UID,
            "MCP_JOB_NAME": "bench-1a2b3c4d",
            "MCP_NAMESPACE": "ml",
            "MCP_POD_NAME": "bench-1a2b3c4d-1-xyz",
            "MCP_POD_UID": "pod-uid-1",
            "MCP_RESULT_KEY": "k" * 64,
            "MCP_SECRET_HEADERS": json.dumps({"Authorization": "MCP_HEADER_0"}),
            "MCP_HEADER_0": f"Bearer {TOKEN}",
            "JOB_COMPLETION_INDEX": "1",
            "MCP_TERMINATION_MESSAGE_PATH": str(tmp_path / "termination"),
        }
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        monkeypatch.setattr(shard.kube, "core", lambda: core)
        assert shard.run_shard() == 0
    finally:
        server.shutdown()
    # every request carries both headers, the engine's server-fingerprint probe included
    seen = _HeaderRecorder.seen
    assert len(seen) > 10
    assert all(h.get("Authorization") == f"Bearer {TOKEN}" and h.get("X-Tenant") == "team-a" for h in seen)
    # one result write (beside it, the shard's progress object)
    ((name, namespace, body),) = [p for p in core.patches if p[0] == "bench-1a2b3c4d-shard-1"]
    assert namespace == "ml"
    assert {p[0] for p in core.patches} == {"bench-1a2b3c4d-shard-1", "bench-1a2b3c4d-progress-1"}
    assert set(body) == {"data"}  # the data only: labels and owners stay the operator's
    text = body["data"]["result.json"]
    assert TOKEN not in text
    doc = loads_document(text, b"k" * 64)
    assert doc.shard_index == 1 and doc.plan.payload.headers == {"X-Tenant": REDACTED}
    assert doc.origin == {
        "runUid": UID,
        "job": "bench-1a2b3c4d",
        "pod": "bench-1a2b3c4d-1-xyz",
        "podUid": "pod-uid-1",
    }
    assert "result published" in (tmp_path / "termination").read_text()


def test_a_shard_without_its_key_does_not_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from mcp_operator.benchmark import shard

    plan = plan_from_spec(_spec(), "http://x", "bench")
    for name, value in {
        "MCP_BENCH_PLAN": json.dumps(plan.model_dump(mode="json")),
        "MCP_BENCHMARK_UID": UID,
        "MCP_JOB_NAME": "j",
        "MCP_NAMESPACE": "ml",
        "MCP_POD_NAME": "p",
        "MCP_POD_UID": "u",
        "MCP_TERMINATION_MESSAGE_PATH": str(tmp_path / "termination"),
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("MCP_RESULT_KEY", raising=False)
    assert shard.run_shard() == shard.EXIT_PLAN
    assert "MCP_RESULT_KEY is not set" in (tmp_path / "termination").read_text()
