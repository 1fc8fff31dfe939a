"""kopf handlers for MCPBenchmark: create the shard Job, then collect and merge its results.

Creation is edge-triggered (create, spec update, resume); collection is level-triggered by a
timer that compares the Job's actual state with the status, so a restarted operator picks up
where it was.
"""

from __future__ import annotations

from typing import Any

import kopf
from kubernetes.client.exceptions import ApiException
from pydantic import ValidationError

from mcp_bench.plan import format_validation_error
from mcp_bench.results.document import ResultDocument, dumps_document

from .. import events, kube, metrics
from ..api.benchmark import MCPBenchmarkSpec
from ..api.common import GROUP, VERSION
from ..benchcollect import merged_status, pod_failure_messages, read_shards
from ..benchjob import (
    LABEL_BENCHMARK_UID,
    LABEL_JOB,
    RESULT_KEY,
    benchmark_labels,
    job_name,
    owner_reference,
    prepare_plan,
    report_name,
    shard_job,
    shard_rbac,
)
from ..conditions import set_condition, utc_now
from ..settings import OperatorSettings
from ..targets import SpecProblem

PLURAL = "mcpbenchmarks"
KIND = "MCPBenchmark"
ACTIVE_PHASES = ("Pending", "Running", "Suspended")


def _reject(
    body: kopf.Body, patch: kopf.Patch, status: kopf.Status, generation: int, reason: str, msg: str
) -> None:
    conds = set_condition(list(status.get("conditions") or []), "Accepted", False, reason, msg, generation)
    conds = set_condition(conds, "Ready", False, reason, msg, generation)
    patch.status.update(
        {"phase": "Invalid", "verdict": "Error", "observedGeneration": generation, "conditions": conds}
    )
    metrics.RECONCILIATIONS.labels(KIND, "invalid").inc()
    events.warning(body, reason, msg)


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@metrics.counted_errors("start_benchmark")
async def start_benchmark(
    spec: kopf.Spec,
    status: kopf.Status,
    meta: kopf.Meta,
    body: kopf.Body,
    patch: kopf.Patch,
    **_: Any,
) -> None:
    generation = int(meta["generation"])
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    try:
        parsed = MCPBenchmarkSpec.model_validate(spec)
    except ValidationError as exc:
        _reject(body, patch, status, generation, "InvalidSpec", f"spec: {format_validation_error(exc)}")
        return
    job = job_name(name, parsed)
    if status.get("jobName") == job:
        # only suspend changed (or the operator restarted): steer the existing Job
        await _apply_suspend(namespace, job, parsed.suspend)
        if status.get("phase") in ACTIVE_PHASES:
            patch.status["phase"] = "Suspended" if parsed.suspend else "Running"
        patch.status["observedGeneration"] = generation
        return
    plan = await prepare_plan(parsed, namespace, name, kube.service_exists)
    if isinstance(plan, SpecProblem):
        _reject(body, patch, status, generation, plan.reason, plan.message)
        return
    settings = OperatorSettings.from_env()
    if parsed.runner.service_account_name is None:
        account, role, binding = shard_rbac()
        await kube.create_or_exists(kube.core().create_namespaced_service_account, namespace, account)
        await kube.create_or_exists(kube.rbac().create_namespaced_role, namespace, role)
        await kube.create_or_exists(kube.rbac().create_namespaced_role_binding, namespace, binding)
    manifest = shard_job(
        spec=parsed,
        name=name,
        uid=uid,
        plan=plan,
        command=settings.runner_command,
        default_image=settings.runner_image,
    )
    created = await kube.create_or_exists(kube.batch().create_namespaced_job, namespace, manifest)
    await _delete_older_jobs(namespace, uid, job)
    conds = set_condition(
        list(status.get("conditions") or []),
        "Accepted",
        True,
        "JobCreated",
        f"Job {job} runs {parsed.shards} shard(s)",
        generation,
    )
    conds = set_condition(conds, "Complete", False, "Running", "shards are running", generation)
    conds = set_condition(conds, "Ready", None, "Running", "waiting for shard results", generation)
    patch.status.update(
        {
            "phase": "Suspended" if parsed.suspend else "Running",
            "observedGeneration": generation,
            "jobName": job,
            "targetUrl": plan.url,
            "startedAt": utc_now(),
            "shards": {"expected": parsed.shards, "reported": 0, "rejected": 0, "succeeded": 0, "failed": 0},
            "conditions": conds,
        }
    )
    metrics.RECONCILIATIONS.labels(KIND, "job-created").inc()
    if created:
        events.normal(body, "JobCreated", f"created Job {job} with {parsed.shards} shard(s)")


async def _apply_suspend(namespace: str, job: str, suspend: bool) -> None:
    try:
        await kube.call(kube.batch().patch_namespaced_job, job, namespace, {"spec": {"suspend": suspend}})
    except ApiException as exc:
        if exc.status != 404:
            raise


async def _delete_older_jobs(namespace: str, uid: str, current: str) -> None:
    """A new spec generation supersedes the Job of the previous one."""
    jobs = await kube.call(
        kube.batch().list_namespaced_job, namespace, label_selector=f"{LABEL_BENCHMARK_UID}={uid}"
    )
    for item in jobs.items:
        if item.metadata.name != current:
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


def _job_finished(job: Any) -> bool:
    for cond in job.status.conditions or []:
        if cond.type in ("Complete", "Failed") and cond.status == "True":
            return True
    return False


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=2.0,
    initial_delay=1.0,
    when=lambda status, **_: status.get("phase") == "Running" and bool(status.get("jobName")),
)
@metrics.counted_errors("collect_benchmark")
async def collect_benchmark(
    status: kopf.Status, meta: kopf.Meta, body: kopf.Body, patch: kopf.Patch, **_: Any
) -> None:
    namespace, name, generation = meta["namespace"], meta["name"], int(meta["generation"])
    job_name_ = status["jobName"]
    try:
        job = await kube.call(kube.batch().read_namespaced_job, job_name_, namespace)
    except ApiException as exc:
        if exc.status != 404:
            raise
        conds = set_condition(
            list(status.get("conditions") or []),
            "Ready",
            False,
            "JobMissing",
            f"Job {job_name_} no longer exists",
            generation,
        )
        patch.status.update({"phase": "Failed", "verdict": "Error", "conditions": conds})
        return
    succeeded, failed = job.status.succeeded or 0, job.status.failed or 0
    expected = int((status.get("shards") or {}).get("expected", 1))
    if not _job_finished(job):
        if (status.get("shards") or {}).get("succeeded") != succeeded or status["shards"].get(
            "failed"
        ) != failed:
            patch.status["shards"] = {**status["shards"], "succeeded": succeeded, "failed": failed}
        return
    maps = await kube.call(
        kube.core().list_namespaced_config_map, namespace, label_selector=f"{LABEL_JOB}={job_name_}"
    )
    readout = read_shards([(m.metadata.name, (m.data or {}).get(RESULT_KEY)) for m in maps.items])
    metrics.SHARD_RESULTS.labels("merged").inc(len(readout.documents))
    metrics.SHARD_RESULTS.labels("rejected").inc(len(readout.rejected))
    pods = await kube.call(kube.core().list_namespaced_pod, namespace, label_selector=f"job-name={job_name_}")
    collected = merged_status(
        expected=expected,
        succeeded=succeeded,
        failed=failed,
        readout=readout,
        conditions=list(status.get("conditions") or []),
        generation=generation,
        pod_failures=pod_failure_messages(pods.items),
    )
    if collected.merged is not None:
        await _write_report(namespace, name, meta["uid"], collected.merged)
        collected.status["reportName"] = report_name(name)
    patch.status.update(collected.status)
    metrics.VERDICTS.labels(KIND, collected.status["verdict"]).inc()
    for rejected, why in readout.rejected.items():
        events.warning(body, "ShardResultRejected", f"{rejected}: {why}")
    if collected.ready:
        events.normal(body, collected.reason, collected.message)
    else:
        events.warning(body, collected.reason, collected.message)


async def _write_report(namespace: str, name: str, uid: str, merged: ResultDocument) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": report_name(name),
            "labels": benchmark_labels(name, uid),
            "ownerReferences": [owner_reference(name, uid)],
        },
        "data": {RESULT_KEY: dumps_document(merged)},
    }
    if not await kube.create_or_exists(kube.core().create_namespaced_config_map, namespace, body):
        await kube.call(kube.core().replace_namespaced_config_map, report_name(name), namespace, body)
