"""Pure builders for an MCPBenchmark's children: the shard plan, the Indexed Job and the
service account, Role and RoleBinding that let shard pods publish their results.

Names are deterministic (resource name + a digest of the spec), so a retried create answers
409 instead of making a duplicate, and a changed spec gets a new Job.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mcp_bench.engines import plan_feature_problem
from mcp_bench.plan import PlanError, RunPlan

from .api.benchmark import MCPBenchmarkSpec
from .api.common import API_VERSION
from .targets import ServiceExists, SpecProblem, resolve_url

LABEL_BENCHMARK = "mcp2026.io/benchmark"
LABEL_BENCHMARK_UID = "mcp2026.io/benchmark-uid"
LABEL_JOB = "mcp2026.io/job"
LABEL_SHARD = "mcp2026.io/shard"
LABEL_COMPONENT = "app.kubernetes.io/component"
RESULT_KEY = "result.json"
SHARD_ACCOUNT = "mcp-bench-shard"
MAX_NAME = 63
MAX_OBJECT_NAME = 253


def spec_digest(spec: MCPBenchmarkSpec) -> str:
    """Digest of everything that shapes the run; ``suspend`` is left out so that pausing and
    resuming keep the same Job."""
    canonical = json.dumps(spec.model_dump(mode="json", exclude={"suspend"}), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def bounded_name(name: str, limit: int, suffix: str = "") -> str:
    """``name + suffix`` within ``limit`` characters; a name that must be cut keeps a digest of
    the whole name, so two long names that share a prefix still get different results."""
    if len(name) + len(suffix) <= limit:
        return name + suffix
    digest = hashlib.sha256(name.encode()).hexdigest()[:8]
    return f"{name[: limit - len(suffix) - len(digest) - 1]}-{digest}{suffix}"


def job_name(benchmark: str, spec: MCPBenchmarkSpec) -> str:
    """Job names are label values too (``job-name``), so at most 63 characters."""
    return bounded_name(benchmark, MAX_NAME, f"-{spec_digest(spec)}")


def benchmark_labels(benchmark: str, uid: str) -> dict[str, str]:
    """The name for people (bounded to a label value) and the UID for selectors."""
    return {LABEL_BENCHMARK: bounded_name(benchmark, MAX_NAME), LABEL_BENCHMARK_UID: uid}


def shard_object_name(job: str, index: int) -> str:
    return f"{job}-shard-{index}"


def report_name(benchmark: str) -> str:
    return bounded_name(benchmark, MAX_OBJECT_NAME, "-report")


def plan_from_spec(spec: MCPBenchmarkSpec, url: str, benchmark: str) -> RunPlan:
    """The plan each shard runs: the spec's load per shard, against the resolved URL."""
    load = spec.load
    levels: dict[str, Any] = {"arrival": load.arrival, "overload": load.overload}
    if load.concurrency is not None:
        levels["concurrency"] = load.concurrency
    else:
        levels["rate"] = load.rate
    stage: dict[str, Any] = {"warmup_s": load.warmup_seconds}
    if load.duration_seconds is not None:
        stage["duration_s"] = load.duration_seconds
    if load.requests is not None:
        stage["requests"] = load.requests
    slo = {
        key: value
        for key, value in {
            "latency_p99_ms": spec.slo.latency_p99_ms,
            "latency_p95_ms": spec.slo.latency_p95_ms,
            "ttft_p99_ms": spec.slo.ttft_p99_ms,
            # judged on the merged levels, whose throughput is cluster-wide, as the spec says
            "throughput_rps": spec.slo.throughput_rps,
            "max_error_rate": spec.slo.max_error_rate,
        }.items()
        if value is not None
    }
    target = url.rstrip("/") + spec.target.path if spec.target.backend == "http" else url
    return RunPlan.from_dict(
        {
            "url": target,
            "engine": load.engine,
            "backend": spec.target.backend,
            "model": spec.target.model,
            "levels": levels,
            "stage": stage,
            "request_timeout_s": load.request_timeout_seconds,
            "slo": slo,
            "labels": {"benchmark": benchmark},
        },
        source="spec",
    )


async def prepare_plan(
    spec: MCPBenchmarkSpec, namespace: str, benchmark: str, exists: ServiceExists
) -> RunPlan | SpecProblem:
    """The plan the shards run, or why this spec cannot run (checked before any Job exists)."""
    url = await resolve_url(spec.target.url, spec.target.service_ref, namespace, exists)
    if isinstance(url, SpecProblem):
        return url
    if spec.target.backend != "http" and not spec.target.model:
        return SpecProblem("ModelRequired", f"backend {spec.target.backend} needs spec.target.model")
    try:
        plan = plan_from_spec(spec, url, benchmark)
    except PlanError as exc:
        return SpecProblem("InvalidPlan", str(exc))
    problem = plan_feature_problem(plan)  # the engine's own limits; its tool is the runner image's business
    if problem is not None:
        return SpecProblem("UnsupportedByEngine", f"spec.load.engine {spec.load.engine}: {problem}")
    return plan


def owner_reference(name: str, uid: str, kind: str = "MCPBenchmark") -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def shard_job(
    *,
    spec: MCPBenchmarkSpec,
    name: str,
    uid: str,
    plan: RunPlan,
    command: tuple[str, ...],
    default_image: str,
) -> dict[str, Any]:
    """An Indexed Job with one completion per shard, placed as the runner spec asks."""
    runner = spec.runner
    job = job_name(name, spec)
    labels = {**benchmark_labels(name, uid), LABEL_JOB: job, LABEL_COMPONENT: "bench-shard"}
    resources: dict[str, dict[str, str]] = {"requests": {"cpu": runner.cpu, "memory": runner.memory}}
    if runner.gpus:
        resources["requests"]["nvidia.com/gpu"] = str(runner.gpus)
        resources["limits"] = {"nvidia.com/gpu": str(runner.gpus)}
    env = [
        {"name": "MCP_BENCH_PLAN", "value": json.dumps(plan.model_dump(mode="json"), sort_keys=True)},
        {"name": "MCP_BENCHMARK_NAME", "value": name},
        {"name": "MCP_BENCHMARK_UID", "value": uid},
        {"name": "MCP_JOB_NAME", "value": job},
        {"name": "MCP_SHARDS", "value": str(spec.shards)},
        {"name": "MCP_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": runner.service_account_name or SHARD_ACCOUNT,
        "containers": [
            {
                "name": "shard",
                "image": runner.image or default_image,
                "command": list(command),
                "env": env,
                "resources": resources,
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }
        ],
    }
    if runner.node_selector:
        pod_spec["nodeSelector"] = dict(runner.node_selector)
    if runner.tolerations:
        pod_spec["tolerations"] = [t.to_wire() for t in runner.tolerations]
    if runner.runtime_class_name:
        pod_spec["runtimeClassName"] = runner.runtime_class_name
    job_spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": spec.shards,
        "parallelism": spec.shards,
        "backoffLimit": runner.backoff_limit,
        "activeDeadlineSeconds": runner.active_deadline_seconds,
        "suspend": spec.suspend,
        "template": {"metadata": {"labels": labels}, "spec": pod_spec},
    }
    if spec.ttl_seconds_after_finished is not None:
        job_spec["ttlSecondsAfterFinished"] = spec.ttl_seconds_after_finished
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": job, "labels": labels, "ownerReferences": [owner_reference(name, uid)]},
        "spec": job_spec,
    }


def shard_rbac() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Service account with just enough rights to publish shard results as ConfigMaps."""
    labels = {"app.kubernetes.io/part-of": "mcp-operator", LABEL_COMPONENT: "bench-shard"}
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": SHARD_ACCOUNT, "labels": labels},
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": SHARD_ACCOUNT, "labels": labels},
        "rules": [
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get", "update", "patch"]}
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": SHARD_ACCOUNT, "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": SHARD_ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": SHARD_ACCOUNT}],
    }
    return account, role, binding


def shard_result_object(
    *, job: str, index: int, benchmark: str, uid: str, document_text: str
) -> dict[str, Any]:
    """The ConfigMap a shard publishes: owned by the MCPBenchmark, labelled for the collector."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": shard_object_name(job, index),
            "labels": {**benchmark_labels(benchmark, uid), LABEL_JOB: job, LABEL_SHARD: str(index)},
            "ownerReferences": [owner_reference(benchmark, uid) | {"controller": False}],
        },
        "data": {RESULT_KEY: document_text},
    }
