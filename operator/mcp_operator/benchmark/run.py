"""Pure builders of a run's children besides the Job, created before it and owned by the
MCPBenchmark (so they go with it): the Secret with the run's signing key and the plan its shards
run (what they dial, read by reference: the Job and its pods carry none of it), the run's own
ServiceAccount, a Role that lets it fill in this run's result ConfigMaps and nothing else,
its RoleBinding, and those result ConfigMaps, created empty.

Kubernetes RBAC cannot limit ``create`` by name, so the operator creates every result object
itself and the shards may only ``get``/``update``/``patch`` exactly those names.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

from mcp_bench.api import RunPlan

from ..api.benchmark import MCPBenchmarkSpec
from .barrier import barrier_on, state_objects
from .contract import (
    COMPONENT_SHARD,
    KEY_SECRET_KEY,
    LABEL_COMPONENT,
    LABEL_JOB,
    PLAN_SECRET_KEY,
    benchmark_labels,
    benchmark_owner,
    progress_object_name,
    run_account_name,
    run_key_name,
    shard_object_name,
    shard_result_object,
    start_object_name,
)
from .job import pod_account

SHARD_VERBS = ["get", "update", "patch"]


def new_run_key() -> str:
    """256 random bits, hex: the HMAC key one run's shards sign their documents with."""
    return secrets.token_hex(32)


def _metadata(name: str, benchmark: str, uid: str, job: str) -> dict[str, Any]:
    labels = {**benchmark_labels(benchmark, uid), LABEL_JOB: job, LABEL_COMPONENT: COMPONENT_SHARD}
    return {"name": name, "labels": labels, "ownerReferences": [benchmark_owner(benchmark, uid)]}


def key_secret(*, benchmark: str, uid: str, job: str, key: str, plan: RunPlan) -> dict[str, Any]:
    """Immutable, so neither the key nor the plan can be swapped under a running Job."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _metadata(run_key_name(job), benchmark, uid, job),
        "type": "Opaque",
        "immutable": True,
        "stringData": {
            KEY_SECRET_KEY: key,
            PLAN_SECRET_KEY: json.dumps(plan.model_dump(mode="json"), sort_keys=True),
        },
    }


def shard_role(*, benchmark: str, uid: str, job: str, shards: int, barrier: bool = False) -> dict[str, Any]:
    """Fill in this run's result and progress objects; with a barrier, read (only) its start
    object, which the operator alone writes."""
    names = [shard_object_name(job, index) for index in range(shards)]
    names += [progress_object_name(job, index) for index in range(shards)]
    rules: list[dict[str, Any]] = [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": names, "verbs": SHARD_VERBS}
    ]
    if barrier:
        start = [start_object_name(job)]
        rules.append(
            {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": start, "verbs": ["get"]}
        )
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": _metadata(run_account_name(job), benchmark, uid, job),
        "rules": rules,
    }


def run_objects(
    *, spec: MCPBenchmarkSpec, benchmark: str, uid: str, job: str, key: str, plan: RunPlan
) -> list[dict[str, Any]]:
    """Everything the Job's pods need, in the order to create it."""
    account = run_account_name(job)
    objects = [key_secret(benchmark=benchmark, uid=uid, job=job, key=key, plan=plan)]
    if spec.runner.service_account_name is None:
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": _metadata(account, benchmark, uid, job),
            }
        )
    objects.append(
        shard_role(benchmark=benchmark, uid=uid, job=job, shards=spec.shards, barrier=barrier_on(spec))
    )
    objects.append(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _metadata(account, benchmark, uid, job),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
            "subjects": [{"kind": "ServiceAccount", "name": pod_account(spec, job)}],
        }
    )
    objects.extend(
        shard_result_object(job=job, index=index, benchmark=benchmark, uid=uid)
        for index in range(spec.shards)
    )
    objects.extend(state_objects(spec=spec, benchmark=benchmark, uid=uid, job=job))
    return objects
