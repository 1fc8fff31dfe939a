"""Pure builders of an MCPBenchmark's children: plan, Indexed Job, RBAC, shard result object."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_bench.plan import PlanError, RunPlan
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.benchmark.contract import (
    LABEL_BENCHMARK,
    LABEL_BENCHMARK_UID,
    LABEL_JOB,
    LABEL_SHARD,
    RESULT_KEY,
    report_name,
    run_account_name,
    shard_object_name,
    shard_result_object,
    shard_result_patch,
)
from mcp_operator.benchmark.job import job_name, shard_job
from mcp_operator.benchmark.plan import plan_from_spec
from mcp_operator.benchmark.run import key_secret
from mcp_operator.children import MAX_LABEL_VALUE as MAX_NAME
from mcp_operator.children import MAX_OBJECT_NAME

UID = "0f9c2a1e-5b7d-4c1e-9e51-3d8c6a7b2f10"
COMMAND = ("mcp-operator", "shard")
DEFAULT_IMAGE = "registry.example/mcp-operator:test"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")


def _spec(**overrides: Any) -> MCPBenchmarkSpec:
    data: dict[str, Any] = {
        "target": {"url": "http://triton.ml.svc:8000/", "path": "/v2/health/ready"},
        "load": {"concurrency": [8, 16], "durationSeconds": 30, "warmupSeconds": 5},
        "shards": 4,
    }
    data.update(overrides)
    return MCPBenchmarkSpec.model_validate(data)


def _job(spec: MCPBenchmarkSpec, name: str = "bench") -> dict[str, Any]:
    return shard_job(
        spec=spec,
        name=name,
        job=job_name(name, spec),
        uid=UID,
        command=COMMAND,
        default_image=DEFAULT_IMAGE,
    )


def _container(job: dict[str, Any]) -> dict[str, Any]:
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def _env(job: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in _container(job)["env"]}


def test_job_is_indexed_with_one_completion_per_shard() -> None:
    job = _job(_spec(shards=4))
    spec = job["spec"]
    assert job["apiVersion"] == "batch/v1" and job["kind"] == "Job"
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == 4
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 3600
    assert spec["suspend"] is False and spec["ttlSecondsAfterFinished"] == 3600
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    assert _container(job)["command"] == list(COMMAND)
    assert _container(job)["image"] == DEFAULT_IMAGE  # the operator's runner image when unset


def test_gpu_requests_and_limits_only_when_asked() -> None:
    with_gpus = _container(_job(_spec(runner={"gpus": 2, "cpu": "4", "memory": "8Gi"})))["resources"]
    assert with_gpus == {
        "requests": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "2"},
        "limits": {"nvidia.com/gpu": "2"},
    }
    without = _container(_job(_spec(runner={"gpus": 0})))["resources"]
    assert without == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert "nvidia.com/gpu" not in json.dumps(without)


def test_memory_limit_only_when_asked_beside_the_gpu_limit() -> None:
    limited = _container(_job(_spec(runner={"memory": "512Mi", "memoryLimit": "1Gi"})))["resources"]
    assert limited == {"requests": {"cpu": "1", "memory": "512Mi"}, "limits": {"memory": "1Gi"}}
    both = _container(_job(_spec(runner={"gpus": 1, "memory": "8Gi", "memoryLimit": "8Gi"})))["resources"]
    assert both == {
        "requests": {"cpu": "1", "memory": "8Gi", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1", "memory": "8Gi"},
    }
    assert "limits" not in _container(_job(_spec(runner={"memory": "8Gi"})))["resources"]


def test_an_unset_memory_limit_keeps_the_job_name_of_specs_written_before_it() -> None:
    # digests of these specs before spec.runner.memoryLimit existed: a running benchmark keeps its Job
    assert job_name("bench", _spec()) == "bench-85b89e61"
    assert job_name("bench", _spec(runner={"gpus": 1, "memory": "8Gi"})) == "bench-91cee01e"
    limited = _spec(runner={"gpus": 1, "memory": "8Gi", "memoryLimit": "8Gi"})
    assert job_name("bench", limited) != "bench-91cee01e"  # a limit changes the run: a new Job


def test_memory_limit_is_a_quantity() -> None:
    with pytest.raises(ValidationError, match=r"runner\.memoryLimit"):
        _spec(runner={"memoryLimit": "64 MiB"})


def test_placement_is_copied_from_the_runner_spec() -> None:
    runner = {
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
        "tolerations": [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "maintenance", "operator": "Equal", "value": "soon", "tolerationSeconds": 60},
        ],
        "runtimeClassName": "nvidia",
        "serviceAccountName": "custom-runner",
        "backoffLimit": 2,
        "activeDeadlineSeconds": 120,
    }
    job = _job(_spec(runner=runner, suspend=True, ttlSecondsAfterFinished=None))
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-H200"}
    # tolerations go out as Kubernetes spells them, with nothing unset sent as null
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "maintenance", "operator": "Equal", "value": "soon", "tolerationSeconds": 60},
    ]
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["serviceAccountName"] == "custom-runner"
    assert job["spec"]["backoffLimit"] == 2 and job["spec"]["activeDeadlineSeconds"] == 120
    assert job["spec"]["suspend"] is True
    assert "ttlSecondsAfterFinished" not in job["spec"]


def test_unset_placement_is_left_out() -> None:
    pod = _job(_spec())["spec"]["template"]["spec"]
    for key in ("nodeSelector", "tolerations", "runtimeClassName"):
        assert key not in pod
    assert pod["serviceAccountName"] == run_account_name(job_name("bench", _spec()))


def test_env_carries_a_plan_the_shard_can_validate() -> None:
    spec = _spec(slo={"latencyP99Ms": 250})
    plan = plan_from_spec(spec, "http://triton.ml.svc:8000", "bench")
    job = shard_job(
        spec=spec,
        name="bench",
        job=job_name("bench", spec),
        uid=UID,
        command=COMMAND,
        default_image=DEFAULT_IMAGE,
    )
    env = _env(job)
    # the plan by reference, from the run's Secret (what it dials stays out of the Job)
    assert env["MCP_BENCH_PLAN"] == {
        "secretKeyRef": {"name": f"{job['metadata']['name']}-key", "key": "plan.json"}
    }
    secret = key_secret(benchmark="bench", uid=UID, job=job["metadata"]["name"], key="k", plan=plan)
    carried = RunPlan.from_dict(json.loads(secret["stringData"]["plan.json"]), source="MCP_BENCH_PLAN")
    assert carried == plan
    assert carried.slo.latency_p99_ms == 250
    assert env["MCP_BENCHMARK_UID"] == UID
    assert env["MCP_JOB_NAME"] == job["metadata"]["name"]
    assert "MCP_SHARDS" not in env and "MCP_BENCHMARK_NAME" not in env  # written and never read: gone
    assert env["MCP_NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    # the pod's own identity from the downward API, signed into its document
    assert env["MCP_POD_NAME"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["MCP_POD_UID"] == {"fieldRef": {"fieldPath": "metadata.uid"}}
    # the run's signing key by reference only, never a value in the Job
    assert env["MCP_RESULT_KEY"] == {
        "secretKeyRef": {"name": f"{job['metadata']['name']}-key", "key": "hmac-sha256-key"}
    }


def test_job_is_controlled_by_its_benchmark() -> None:
    job = _job(_spec())
    (owner,) = job["metadata"]["ownerReferences"]
    assert owner == {
        "apiVersion": "mcp2026.io/v1alpha1",
        "kind": "MCPBenchmark",
        "name": "bench",
        "uid": UID,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    name = job["metadata"]["name"]
    assert job["metadata"]["labels"][LABEL_JOB] == name
    assert job["spec"]["template"]["metadata"]["labels"][LABEL_JOB] == name
    assert job["metadata"]["labels"][LABEL_BENCHMARK] == "bench"


def test_job_names_are_deterministic_and_follow_the_spec() -> None:
    spec = _spec()
    name = job_name("bench", spec)
    assert name == job_name("bench", _spec()) and name.startswith("bench-")
    assert DNS_LABEL.match(name)
    # pausing and resuming keeps the Job; a changed load makes a new one
    assert job_name("bench", _spec(suspend=True)) == name
    assert job_name("bench", _spec(shards=5)) != name
    assert job_name("other", spec) != name


@pytest.mark.parametrize("length", [1, 50, 58, 63, 64, 120, 253])
def test_long_names_stay_within_the_label_limit(length: int) -> None:
    benchmark = "b" * length
    spec = _spec(shards=256)
    job = job_name(benchmark, spec)
    assert len(job) <= MAX_NAME and DNS_LABEL.match(job)
    assert job == job_name(benchmark, spec)
    # an Indexed Job's pods are named and hostnamed <job>-<index>: a DNS label even at index 255
    assert len(f"{job}-255") <= 63 and DNS_LABEL.match(f"{job}-255")
    assert len(report_name(benchmark)) <= MAX_OBJECT_NAME
    # shard result ConfigMaps and the run's account are DNS subdomains (253 characters)
    assert len(shard_object_name(job, 255)) <= 253 and len(run_account_name(job)) <= 253


@pytest.mark.parametrize("benchmark", ["llama.70b.h200", "a" * 60 + ".b", "x." + "y" * 250])
def test_names_with_dots_give_jobs_whose_hostnames_are_labels(benchmark: str) -> None:
    job = job_name(benchmark, _spec())
    assert DNS_LABEL.match(job) and len(f"{job}-255") <= 63
    assert job != job_name(benchmark.replace(".", "-"), _spec())  # a digest keeps them apart


def test_a_short_name_stays_readable() -> None:
    assert job_name("bench", _spec()).startswith("bench-") and len(job_name("bench", _spec())) == 14


def test_label_values_are_valid_for_long_benchmark_names() -> None:
    job = _job(_spec(), name="b" * 100)
    labels = {**job["metadata"]["labels"], **job["spec"]["template"]["metadata"]["labels"]}
    bad = {k: v for k, v in labels.items() if len(v) > 63 or not LABEL_VALUE.match(v)}
    assert not bad


def test_long_names_with_a_common_prefix_get_distinct_jobs() -> None:
    spec = _spec()
    prefix = "inference-release-candidate-benchmark-for-llama-70b-h200-"
    assert job_name(prefix + "baseline", spec) != job_name(prefix + "spike", spec)


def test_plan_closed_loop() -> None:
    plan = plan_from_spec(_spec(), "http://triton.ml.svc:8000/", "bench")
    assert plan.url == "http://triton.ml.svc:8000/v2/health/ready"  # one slash, not two
    assert plan.backend == "http" and plan.levels.concurrency == [8, 16] and plan.levels.rate is None
    assert plan.stage.duration_s == 30 and plan.stage.warmup_s == 5 and plan.stage.requests is None
    assert plan.request_timeout_s == 30
    assert plan.labels == {"benchmark": "bench"}
    assert plan.slo.empty


def test_plan_open_loop() -> None:
    spec = _spec(
        load={"rate": [100.0, 250.5], "arrival": "constant", "requests": 500, "requestTimeoutSeconds": 2}
    )
    plan = plan_from_spec(spec, "http://svc", "bench")
    assert plan.levels.open_loop and plan.levels.rate == [100.0, 250.5]
    assert plan.levels.concurrency is None and plan.levels.arrival == "constant"
    assert plan.stage.requests == 500 and plan.stage.duration_s is None
    assert plan.request_timeout_s == 2


def test_plan_path_only_applies_to_plain_http() -> None:
    spec = _spec(target={"url": "http://vllm:8000", "backend": "openai", "model": "llama", "path": "/x"})
    plan = plan_from_spec(spec, "http://vllm:8000", "bench")
    assert plan.url == "http://vllm:8000" and plan.backend == "openai" and plan.model == "llama"


def test_plan_slo_mapping() -> None:
    slo = {
        "latencyP99Ms": 200,
        "latencyP95Ms": 120,
        "ttftP99Ms": 80,
        "throughputRps": 500,
        "maxErrorRate": 0.01,
    }
    plan = plan_from_spec(_spec(slo=slo), "http://svc", "bench")
    assert plan.slo.latency_p99_ms == 200 and plan.slo.latency_p95_ms == 120
    assert plan.slo.ttft_p99_ms == 80 and plan.slo.max_error_rate == 0.01
    assert plan.slo.throughput_rps == 500


def test_plan_rejects_a_url_the_engine_cannot_load() -> None:
    spec = _spec(target={"url": "triton:8000"})  # the CRD allows no scheme; plain HTTP needs one
    with pytest.raises(PlanError, match="url"):
        plan_from_spec(spec, "triton:8000", "bench")


def test_shard_result_object_is_created_empty_and_filled_by_a_patch() -> None:
    body = shard_result_object(job="bench-abc", index=3, benchmark="bench", uid=UID)
    meta = body["metadata"]
    assert body["kind"] == "ConfigMap" and meta["name"] == shard_object_name("bench-abc", 3)
    assert meta["labels"] == {
        LABEL_BENCHMARK: "bench",
        LABEL_BENCHMARK_UID: UID,
        LABEL_JOB: "bench-abc",
        LABEL_SHARD: "3",
    }
    (owner,) = meta["ownerReferences"]
    # owned (garbage-collected with the CR) but not controlled: the Job is the CR's controlled child
    assert owner["uid"] == UID and owner["controller"] is False and owner["kind"] == "MCPBenchmark"
    assert "data" not in body  # the operator creates it empty; the shard fills in the data only
    assert shard_result_patch("{}") == {"data": {RESULT_KEY: "{}"}}


async def test_prepare_plan_checks_the_target_and_the_model_before_any_job() -> None:
    from mcp_operator.benchmark.plan import prepare_plan
    from mcp_operator.targets import SpecProblem

    services = {("ml", "triton")}

    async def exists(namespace: str, name: str) -> bool:
        return (namespace, name) in services

    found = _spec(target={"serviceRef": {"name": "triton", "port": 8000}, "path": "/health"})
    plan = await prepare_plan(found, "ml", "bench", exists)
    assert not isinstance(plan, SpecProblem) and plan.url == "http://triton.ml.svc:8000/health"

    missing = await prepare_plan(found, "other", "bench", exists)
    assert missing == SpecProblem("TargetNotFound", "Service other/triton does not exist")

    no_model = await prepare_plan(
        _spec(target={"url": "http://vllm:8000", "backend": "openai"}), "ml", "b", exists
    )
    assert isinstance(no_model, SpecProblem) and no_model.reason == "ModelRequired"


def test_runner_image_in_the_spec_wins_over_the_operator_default() -> None:
    job = _job(_spec(runner={"image": "registry.example/team/bench-runner:7"}))
    assert _container(job)["image"] == "registry.example/team/bench-runner:7"


async def test_prepare_plan_checks_the_engine_limits_without_its_tool() -> None:
    from mcp_operator.benchmark.plan import prepare_plan
    from mcp_operator.targets import SpecProblem

    async def exists(namespace: str, name: str) -> bool:
        return True

    # k6 drives plain HTTP only, and is not installed here: the feature check must not need it
    k6_openai = _spec(
        target={"url": "http://vllm:8000", "backend": "openai", "model": "m"},
        load={"concurrency": [4], "requests": 10, "engine": "k6"},
    )
    problem = await prepare_plan(k6_openai, "ml", "b", exists)
    assert isinstance(problem, SpecProblem) and problem.reason == "UnsupportedByEngine"
    assert "backend" in problem.message
    k6_http = _spec(
        load={"rate": [50.0], "requests": 10, "engine": "k6", "arrival": "constant", "overload": "drop"}
    )
    plan = await prepare_plan(k6_http, "ml", "b", exists)
    assert not isinstance(plan, SpecProblem) and plan.engine == "k6" and plan.levels.overload == "drop"


def test_shard_pods_run_non_root_with_nothing_to_escalate_to() -> None:
    spec = _spec()
    job = shard_job(
        spec=spec,
        name="bench",
        job=job_name("bench", spec),
        uid=UID,
        command=COMMAND,
        default_image=DEFAULT_IMAGE,
    )
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]  # the only writable place


def test_runner_image_and_account_need_the_operators_allow_lists() -> None:
    from mcp_operator.benchmark.plan import runner_problem
    from mcp_operator.settings import OperatorSettings

    strict = OperatorSettings(metrics_port=0, runner_image=DEFAULT_IMAGE, runner_command=COMMAND)
    runner = _spec().runner
    assert runner_problem(runner, strict) is None  # defaults: the operator's image, the run's account
    assert runner_problem(runner.model_copy(update={"image": DEFAULT_IMAGE}), strict) is None
    refused = runner_problem(runner.model_copy(update={"image": "evil.example/x:1"}), strict)
    assert refused is not None and refused.reason == "RunnerNotAllowed"
    account = runner.model_copy(update={"service_account_name": "admin"})
    assert runner_problem(account, strict) is not None
    allowing = OperatorSettings(
        metrics_port=0,
        runner_image=DEFAULT_IMAGE,
        runner_command=COMMAND,
        runner_image_allow=("registry.example/*",),
        runner_account_allow=("bench-*",),
    )
    assert runner_problem(runner.model_copy(update={"image": "registry.example/r:2"}), allowing) is None
    assert runner_problem(runner.model_copy(update={"service_account_name": "bench-ml"}), allowing) is None
    assert runner_problem(account, allowing) is not None


@pytest.mark.parametrize(
    ("cpu", "engine", "workers"),
    [
        ("1", "builtin", 1),
        ("500m", "builtin", 1),
        ("2", "builtin", 2),
        ("3500m", "builtin", 3),
        ("4", "locust", 1),
    ],
)
def test_plan_workers_follow_the_shard_pods_cpu_request(cpu: str, engine: str, workers: int) -> None:
    spec = _spec(runner={"cpu": cpu}, load={"concurrency": [8], "durationSeconds": 5, "engine": engine})
    assert plan_from_spec(spec, "http://svc", "bench").workers == workers
