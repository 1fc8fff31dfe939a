"""What the MCPBenchmark handlers ask of the API server: create the run's children, steer or
replace its Job, and read back what the shards published. Thin wrappers over ``kube``, kept
here so the handlers only wire kopf to them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from mcp_bench.results.document import ResultDocument, dumps_document

from .. import kube
from .collect import ShardReadout, pod_failure_messages, read_shards
from .contract import LABEL_BENCHMARK_UID, LABEL_JOB, RESULT_KEY, report_name, report_object
from .job import shard_rbac


async def ensure_shard_account(namespace: str) -> None:
    """The default shard service account, Role and RoleBinding (shared by the namespace's runs)."""
    account, role, binding = shard_rbac()
    await kube.create_or_exists(kube.core().create_namespaced_service_account, namespace, account)
    await kube.create_or_exists(kube.rbac().create_namespaced_role, namespace, role)
    await kube.create_or_exists(kube.rbac().create_namespaced_role_binding, namespace, binding)


async def create_job(namespace: str, manifest: dict[str, Any]) -> bool:
    """True when this call created the Job, False when a retry had already made it."""
    return await kube.create_or_exists(kube.batch().create_namespaced_job, namespace, manifest)


async def set_suspended(namespace: str, job: str, suspend: bool) -> None:
    try:
        await kube.call(kube.batch().patch_namespaced_job, job, namespace, {"spec": {"suspend": suspend}})
    except ApiException as exc:
        if exc.status != 404:
            raise


async def delete_older_jobs(namespace: str, uid: str, current: str) -> None:
    """A new spec generation supersedes the Job of the previous one."""
    jobs = await kube.call(
        kube.batch().list_namespaced_job, namespace, label_selector=f"{LABEL_BENCHMARK_UID}={uid}"
    )
    for item in jobs.items:
        if item.metadata.name == current:
            continue
        try:
            await kube.call(
                kube.batch().delete_namespaced_job,
                item.metadata.name,
                namespace,
                propagation_policy="Background",
            )
        except ApiException as exc:
            if exc.status != 404:
                raise


@dataclass(frozen=True)
class JobState:
    finished: bool
    succeeded: int
    failed: int


async def read_job(namespace: str, job: str) -> JobState | None:
    """The Job's progress, or None when it no longer exists."""
    try:
        obj = await kube.call(kube.batch().read_namespaced_job, job, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None
    finished = any(
        cond.type in ("Complete", "Failed") and cond.status == "True" for cond in obj.status.conditions or []
    )
    return JobState(finished, obj.status.succeeded or 0, obj.status.failed or 0)


async def read_results(namespace: str, job: str) -> tuple[ShardReadout, list[str]]:
    """Every shard result the run published, verified, and what failed shard pods said."""
    maps = await kube.call(
        kube.core().list_namespaced_config_map, namespace, label_selector=f"{LABEL_JOB}={job}"
    )
    readout = read_shards([(m.metadata.name, (m.data or {}).get(RESULT_KEY)) for m in maps.items])
    pods = await kube.call(kube.core().list_namespaced_pod, namespace, label_selector=f"job-name={job}")
    return readout, pod_failure_messages(pods.items)


async def write_report(namespace: str, name: str, uid: str, merged: ResultDocument) -> str:
    """The merged document in its own ConfigMap (never in the CR); returns its name."""
    body = report_object(benchmark=name, uid=uid, document_text=dumps_document(merged))
    if not await kube.create_or_exists(kube.core().create_namespaced_config_map, namespace, body):
        await kube.call(kube.core().replace_namespaced_config_map, report_name(name), namespace, body)
    return report_name(name)
