"""Pure builders for an MCPBenchmark's Job: the Indexed Job with one completion per shard, and
the service account, Role and RoleBinding that let shard pods publish their results.

The Job is named from a digest of the spec, so a retried create answers 409 instead of making
a duplicate, ``suspend`` pauses and resumes the same Job, and a changed spec gets a new one.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from mcp_bench.plan import RunPlan

from ..api.benchmark import MCPBenchmarkSpec
from ..children import MAX_LABEL_VALUE, bounded_name
from .contract import (
    COMPONENT_SHARD,
    ENV_BENCHMARK_NAME,
    ENV_BENCHMARK_UID,
    ENV_JOB_NAME,
    ENV_NAMESPACE,
    ENV_PLAN,
    LABEL_COMPONENT,
    LABEL_JOB,
    SHARD_ACCOUNT,
    benchmark_labels,
    benchmark_owner,
)


def spec_digest(spec: MCPBenchmarkSpec) -> str:
    """Digest of everything that shapes the run; ``suspend`` is left out so that pausing and
    resuming keep the same Job."""
    canonical = json.dumps(spec.model_dump(mode="json", exclude={"suspend"}), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def job_name(benchmark: str, spec: MCPBenchmarkSpec) -> str:
    """Job names are label values too (``job-name``), so at most 63 characters."""
    return bounded_name(benchmark, MAX_LABEL_VALUE, f"-{spec_digest(spec)}")


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
    labels = {**benchmark_labels(name, uid), LABEL_JOB: job, LABEL_COMPONENT: COMPONENT_SHARD}
    resources: dict[str, dict[str, str]] = {"requests": {"cpu": runner.cpu, "memory": runner.memory}}
    if runner.gpus:
        resources["requests"]["nvidia.com/gpu"] = str(runner.gpus)
        resources["limits"] = {"nvidia.com/gpu": str(runner.gpus)}
    env = [
        {"name": ENV_PLAN, "value": json.dumps(plan.model_dump(mode="json"), sort_keys=True)},
        {"name": ENV_BENCHMARK_NAME, "value": name},
        {"name": ENV_BENCHMARK_UID, "value": uid},
        {"name": ENV_JOB_NAME, "value": job},
        {"name": ENV_NAMESPACE, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
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
        "metadata": {"name": job, "labels": labels, "ownerReferences": [benchmark_owner(name, uid)]},
        "spec": job_spec,
    }


def shard_rbac() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Service account with just enough rights to publish shard results as ConfigMaps."""
    labels = {"app.kubernetes.io/part-of": "mcp-operator", LABEL_COMPONENT: COMPONENT_SHARD}
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
