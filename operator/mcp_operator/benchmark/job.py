"""Pure builder of an MCPBenchmark's Indexed Job, with one completion per shard.

The Job is named from a digest of the spec, so a retried create answers 409 instead of making
a duplicate, ``suspend`` pauses and resumes the same Job, and a changed spec gets a new one.
Nothing secret is in it: the run's signing key and header values from Secrets reach the pods
by ``secretKeyRef``, read by the kubelet, never by value.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..api.benchmark import MAX_SHARDS, MCPBenchmarkSpec, MCPBenchmarkStatus
from ..api.common import TargetHeader
from ..children import MAX_DNS_LABEL, dns_label
from ..targets.guarded import pod_env
from .contract import (
    COMPONENT_SHARD,
    ENV_ACTIVE_DEADLINE,
    ENV_BENCHMARK_UID,
    ENV_HEADER_PREFIX,
    ENV_JOB_NAME,
    ENV_NAMESPACE,
    ENV_PLAN,
    ENV_POD_NAME,
    ENV_POD_UID,
    ENV_RESULT_KEY,
    ENV_SECRET_HEADERS,
    KEY_SECRET_KEY,
    LABEL_COMPONENT,
    LABEL_JOB,
    PLAN_SECRET_KEY,
    SHARD_CONTAINER,
    benchmark_labels,
    benchmark_owner,
    run_account_name,
    run_key_name,
)
from .workload import dataset_volume

CONTAINER_SECURITY: dict[str, Any] = {
    "allowPrivilegeEscalation": False,
    "readOnlyRootFilesystem": True,
    "capabilities": {"drop": ["ALL"]},
}

# an Indexed Job's pods get the hostname ``<job>-<index>``, a DNS label of at most 63 characters
MAX_JOB_NAME = MAX_DNS_LABEL - len(f"-{MAX_SHARDS - 1}")


def spec_digest(spec: MCPBenchmarkSpec) -> str:
    """Digest of everything that shapes the run; ``suspend`` is left out so that pausing and
    resuming keep the same Job, and ``preflight`` (checks before the Job, not the run's shape);
    an unset ``startBarrier``, ``startBarrier.everyLevel`` or ``runner.memoryLimit`` too (at their
    defaults), so specs written before they existed keep their Job's name."""
    left_out: dict[str, Any] = {"suspend": True, "preflight": True}
    if spec.start_barrier is None:
        left_out["start_barrier"] = True
    elif spec.start_barrier.every_level:
        left_out["start_barrier"] = {"every_level"}
    if spec.runner.memory_limit is None:
        left_out["runner"] = {"memory_limit"}
    canonical = json.dumps(spec.model_dump(mode="json", exclude=left_out), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:8]


def job_name(benchmark: str, spec: MCPBenchmarkSpec, run: int | None = None) -> str:
    """A DNS label short enough that every shard's hostname (``<job>-<index>``) fits, whatever
    the benchmark's name (up to 253 characters, dots included). ``run`` is the generation that
    started the run when it is not the object's first: a spec changed back to an earlier one
    then gets fresh children (a Job, key, result and start objects of its own), never the
    earlier run's."""
    digest = spec_digest(spec)
    if run is not None:
        digest = hashlib.sha256(f"{digest}/{run}".encode()).hexdigest()[:8]
    return dns_label(benchmark, MAX_JOB_NAME, f"-{digest}")


def run_job_name(benchmark: str, spec: MCPBenchmarkSpec, generation: int, status: MCPBenchmarkStatus) -> str:
    """The Job this generation's spec runs as: the one status records when only ``suspend``
    changed or the operator restarted (same spec digest), else a new one: the object's first run
    by the spec alone, a later one by the spec and this generation."""
    digest = spec_digest(spec)
    recorded, recorded_digest = status.job_name, status.spec_digest
    legacy = recorded_digest is None and recorded == job_name(benchmark, spec)  # before specDigest
    if recorded and (recorded_digest == digest or legacy):
        return str(recorded)  # the same run
    return job_name(benchmark, spec, None if not recorded else generation)


def pod_account(spec: MCPBenchmarkSpec, job: str) -> str:
    """The account the shard pods run as: the user's, or the run's own."""
    return spec.runner.service_account_name or run_account_name(job)


def _field(path: str) -> dict[str, Any]:
    return {"fieldRef": {"fieldPath": path}}


def _secret(name: str, key: str) -> dict[str, Any]:
    return {"secretKeyRef": {"name": name, "key": key}}


def header_env(headers: list[TargetHeader]) -> list[dict[str, Any]]:
    """Env vars for headers whose values come from Secrets: each value by reference, and one
    plain variable that maps header names to those variables (names only)."""
    env: list[dict[str, Any]] = []
    refs: dict[str, str] = {}
    for header in headers:
        if header.value_from is None:
            continue
        var = f"{ENV_HEADER_PREFIX}{len(env)}"
        ref = header.value_from.secret_key_ref
        env.append({"name": var, "valueFrom": _secret(ref.name, ref.key)})
        refs[header.name] = var
    if refs:
        env.append({"name": ENV_SECRET_HEADERS, "value": json.dumps(refs, sort_keys=True)})
    return env


def shard_job(
    *,
    spec: MCPBenchmarkSpec,
    name: str,
    job: str,
    uid: str,
    command: tuple[str, ...],
    default_image: str,
) -> dict[str, Any]:
    """An Indexed Job with one completion per shard, placed as the runner spec asks."""
    runner = spec.runner
    labels = {**benchmark_labels(name, uid), LABEL_JOB: job, LABEL_COMPONENT: COMPONENT_SHARD}
    resources: dict[str, dict[str, str]] = {"requests": {"cpu": runner.cpu, "memory": runner.memory}}
    limits: dict[str, str] = {}
    if runner.gpus:
        resources["requests"]["nvidia.com/gpu"] = str(runner.gpus)
        limits["nvidia.com/gpu"] = str(runner.gpus)
    if runner.memory_limit is not None:  # a shard killed at it is reported (ShardFailed, OOMKilled)
        limits["memory"] = runner.memory_limit
    if limits:
        resources["limits"] = limits
    env = [
        {"name": ENV_PLAN, "valueFrom": _secret(run_key_name(job), PLAN_SECRET_KEY)},  # what it dials
        {"name": ENV_BENCHMARK_UID, "value": uid},
        {"name": ENV_JOB_NAME, "value": job},
        {"name": ENV_ACTIVE_DEADLINE, "value": str(runner.active_deadline_seconds)},
        {"name": ENV_NAMESPACE, "valueFrom": _field("metadata.namespace")},
        {"name": ENV_POD_NAME, "valueFrom": _field("metadata.name")},
        {"name": ENV_POD_UID, "valueFrom": _field("metadata.uid")},
        {"name": ENV_RESULT_KEY, "valueFrom": _secret(run_key_name(job), KEY_SECRET_KEY)},
        *header_env(spec.target.headers),
        pod_env(),  # the target policy, on every address the shard connects to
    ]
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": pod_account(spec, job),
        "containers": [
            {
                "name": SHARD_CONTAINER,
                "image": runner.image or default_image,
                "command": list(command),
                "env": env,
                "resources": resources,
                "terminationMessagePolicy": "FallbackToLogsOnError",
                "securityContext": CONTAINER_SECURITY,
                "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
            }
        ],
        # non-root, nothing to escalate to: the image's user (65532) and a writable /tmp only
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}}],
    }
    if (dataset := dataset_volume(spec)) is not None:  # read-only, at the path the plan names
        pod_spec["volumes"].append(dataset[0])
        pod_spec["containers"][0]["volumeMounts"].append(dataset[1])
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
