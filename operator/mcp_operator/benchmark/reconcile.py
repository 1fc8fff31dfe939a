"""What the MCPBenchmark handlers ask of the API server: create the run's children, steer or
replace its Job, and read back what the shards published. Thin wrappers over ``kube``, kept
here so the handlers only wire kopf to them."""

from __future__ import annotations

import asyncio
import base64
import logging
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException

from mcp_bench.api import ResultDocument, dumps_within

from .. import kube
from ..redact import redact_text
from .barrier import parse_starts, starts_text
from .collect import (
    PodFailure,
    PublishedObject,
    RunIdentity,
    ShardReadout,
    pod_failures,
    pod_indices,
    read_shards,
)
from .contract import (
    KEY_SECRET_KEY,
    LABEL_BENCHMARK_UID,
    LABEL_JOB,
    LABEL_RUN_STATE,
    PROGRESS_KEY,
    RESULT_KEY,
    RESULT_LIMIT_BYTES,
    START_KEY,
    progress_object_name,
    report_name,
    report_object,
    run_key_name,
    run_state_object,
    start_object_name,
)
from .podlogs import read_pod_logs

TRANSIENT = frozenset({408, 409, 429})  # timeout, conflict (a retried create), throttling

log = logging.getLogger(__name__)


class ChildRejectedError(Exception):
    """The API server refused to create one of the run's children (a 4xx): retrying cannot help."""

    def __init__(self, kind: str, name: str, status: int, message: str) -> None:
        super().__init__(f"{kind} {name} was refused by the API server ({status}): {message}")
        self.kind, self.name, self.status = kind, name, status


def _api_message(exc: ApiException) -> str:
    """The API server's own message (its Status object), redacted."""
    return redact_text(kube.api_message(exc))


def _refused(exc: ApiException) -> bool:
    """A 4xx other than a timeout, a conflict or throttling: retrying cannot help."""
    return exc.status is not None and 400 <= exc.status < 500 and exc.status not in TRANSIENT


def _creator(kind: str) -> Any:
    creators = {
        "Secret": kube.core().create_namespaced_secret,
        "ServiceAccount": kube.core().create_namespaced_service_account,
        "ConfigMap": kube.core().create_namespaced_config_map,
        "Role": kube.rbac().create_namespaced_role,
        "RoleBinding": kube.rbac().create_namespaced_role_binding,
        "Job": kube.batch().create_namespaced_job,
    }
    return creators[kind]


async def create_child(namespace: str, manifest: dict[str, Any]) -> bool:
    """Create one child; True when this call made it, False when it already existed. A 4xx other
    than a conflict or throttling is a ``ChildRejectedError``; anything else propagates (retried)."""
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    try:
        return await kube.create_or_exists(_creator(kind), namespace, manifest)
    except ApiException as exc:
        if _refused(exc):
            raise ChildRejectedError(kind, name, exc.status or 0, _api_message(exc)) from exc
        raise


async def replace_config_map(namespace: str, manifest: dict[str, Any]) -> None:
    """Replace a child ConfigMap that exists (a report of an earlier generation or attempt); a
    refusal is a ``ChildRejectedError`` as for a create."""
    name = manifest["metadata"]["name"]
    try:
        await kube.call(kube.core().replace_namespaced_config_map, name, namespace, manifest)
    except ApiException as exc:
        if _refused(exc):
            raise ChildRejectedError("ConfigMap", name, exc.status or 0, _api_message(exc)) from exc
        raise


async def create_run(namespace: str, children: list[dict[str, Any]], job: dict[str, Any]) -> bool:
    """The run's children, then its Job; True when this call created the Job. A key Secret that
    is there already before the Job is made again, never adopted: it would hand whoever made it
    the key the run's results are signed with and the plan its shards dial (an
    ``ownerReference`` proves nothing: whoever may create the Secret may write one). Once the
    Job exists (a retry of this call after its answer was lost), the Secret is the one its pods
    read, made by the call that created the Job, and stays."""
    for child in children:
        if await create_child(namespace, child) or child["kind"] != "Secret":
            continue
        if not await kube.exists(kube.batch().read_namespaced_job, job["metadata"]["name"], namespace):
            await _make_secret_again(namespace, child)
    return await create_child(namespace, job)


async def _make_secret_again(namespace: str, manifest: dict[str, Any]) -> None:
    name = manifest["metadata"]["name"]
    try:
        await kube.call(kube.core().delete_namespaced_secret, name, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
    log.info("%s/%s: a Secret of the run key's name was there already; made again", namespace, name)
    if not await create_child(namespace, manifest):
        raise ChildRejectedError("Secret", name, 409, "it was made again by someone else as it was replaced")


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
    uid: str = ""
    completions: int = 1


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
    return JobState(
        finished,
        obj.status.succeeded or 0,
        obj.status.failed or 0,
        obj.metadata.uid,
        obj.spec.completions or 1,
    )


def settled_by_pods(state: JobState, pods: list[Any]) -> JobState:
    """The Job finished when each completion index has a Succeeded pod the Job owns: the fact
    the Job controller's own Complete is made of, read from the pods the kubelet reports. After
    an API-server outage the controller's informers relist with backoff and its Complete came
    25 s after the last shard ended; the verdict need not wait for that."""
    if state.finished or not state.uid:
        return state
    succeeded = [p for p in pods if p.status is not None and p.status.phase == "Succeeded"]
    if set(range(state.completions)) <= set(pod_indices(succeeded, state.uid).values()):
        return JobState(True, state.completions, state.failed, state.uid, state.completions)
    return state


async def run_pods(namespace: str, job: str) -> list[Any]:
    """The shard pods of a running Job (their scheduling is watched while it runs)."""
    pods = await kube.call(kube.core().list_namespaced_pod, namespace, label_selector=f"job-name={job}")
    return list(pods.items)


async def read_run_key(namespace: str, job: str) -> bytes | None:
    """The run's signing key, from the Secret the operator created; None when it is gone."""
    try:
        secret = await kube.call(kube.core().read_namespaced_secret, run_key_name(job), namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None
    encoded = (secret.data or {}).get(KEY_SECRET_KEY)
    return base64.b64decode(encoded) if encoded else None


async def read_results(
    namespace: str, uid: str, job: str, state: JobState, key: bytes | None, pods: list[Any]
) -> tuple[ShardReadout, list[PodFailure]]:
    """Every result object of the run, verified against the run's ``key`` (see ``collect``;
    ``read_run_key``) and its writer pod's log (``podlogs``), and why shard pods failed (what
    they said, or that they were OOM-killed; ``pods``: the Job's pods, ``run_pods``)."""
    maps = await kube.call(
        kube.core().list_namespaced_config_map, namespace, label_selector=f"{LABEL_JOB}={job}"
    )
    indices = pod_indices(pods, state.uid)
    logs = await read_pod_logs(namespace, pods, set(indices))  # where each shard attests
    run = RunIdentity(uid=uid, job=job, shards=state.completions, key=key, pods=indices, logs=logs)
    objects = [
        PublishedObject(
            name=m.metadata.name,
            owners=frozenset(o.uid for o in m.metadata.owner_references or []),
            text=(m.data or {}).get(RESULT_KEY),
        )
        for m in maps.items
    ]
    return read_shards(run, objects), pod_failures(pods)


async def write_report(namespace: str, name: str, uid: str, merged: ResultDocument, key: bytes | None) -> str:
    """The merged document in its own ConfigMap (never in the CR), shrunk to fit it and signed
    with the run's key (``mcp-operator report`` checks it: a rewritten report is refused); returns
    its name. A child like any other: a refusal (a quota, an admission webhook) is a
    ``ChildRejectedError``, never an error retried forever."""
    text = await asyncio.to_thread(dumps_within, merged, RESULT_LIMIT_BYTES, key)
    body = report_object(benchmark=name, uid=uid, document_text=text)
    if not await create_child(namespace, body):
        await replace_config_map(namespace, body)
    return report_name(name)


@dataclass(frozen=True)
class RunState:
    """What the run's live-state objects hold: each shard's progress text (by index; only the
    objects the operator named count) and the level start times written so far."""

    progress: dict[int, str]
    starts: dict[int, int]
    start_object: bool = True  # whether the run's start object is there (someone may delete it)


async def read_run_state(namespace: str, job: str, shards: int, key: bytes | None) -> RunState:
    maps = await kube.call(
        kube.core().list_namespaced_config_map, namespace, label_selector=f"{LABEL_RUN_STATE}={job}"
    )
    by_name = {m.metadata.name: m for m in maps.items}
    progress = {}
    for index in range(shards):
        found = by_name.get(progress_object_name(job, index))
        text = (found.data or {}).get(PROGRESS_KEY) if found is not None else None
        if text:
            progress[index] = text
    start = by_name.get(start_object_name(job))
    starts = parse_starts((start.data or {}).get(START_KEY), key) if start is not None else {}
    return RunState(progress, starts, start is not None)


async def write_starts(
    namespace: str, job: str, starts: dict[int, int], key: bytes, owner: tuple[str, str] | None = None
) -> None:
    """The barrier's start times, signed, into the run's start object (which shards only read).
    With ``owner`` (the MCPBenchmark's name and uid), a start object someone deleted is made
    again, as the operator first made it, with these times in it."""
    data = {START_KEY: starts_text(starts, key)}
    if owner is not None:
        name, uid = owner
        body = run_state_object(name=start_object_name(job), job=job, benchmark=name, uid=uid)
        if await create_child(namespace, {**body, "data": data}):
            return
    await kube.call(
        kube.core().patch_namespaced_config_map, start_object_name(job), namespace, {"data": data}
    )
