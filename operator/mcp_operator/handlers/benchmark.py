"""kopf handlers for MCPBenchmark: parse, call the benchmark package, write status.

Creation is edge-triggered (create, spec update, resume); collection is level-triggered by a
timer that compares the Job's actual state with the status, so a restarted operator picks up
where it was.
"""

from __future__ import annotations

from typing import Any

import kopf
from pydantic import ValidationError

from mcp_bench.plan import format_validation_error

from .. import events, kube, metrics
from ..api.benchmark import KIND, PLURAL, MCPBenchmarkSpec, MCPBenchmarkStatus
from ..api.common import GROUP, VERSION
from ..benchmark import reconcile
from ..benchmark.barrier import min_overlap, with_run_state_env
from ..benchmark.gpusampler_kube import delete_samplers, with_gpu_samplers
from ..benchmark.job import run_job_name, shard_job, spec_digest
from ..benchmark.plan import prepare_plan, runner_problem
from ..benchmark.preflight import (
    preflight_fields,
    scheduling_conditions,
    stopped_fields,
    unschedulable_message,
)
from ..benchmark.preflight_read import check as preflight_check
from ..benchmark.progress import run_progress
from ..benchmark.run import new_run_key, run_objects
from ..benchmark.status import (
    child_rejected_status,
    job_missing_status,
    merged_status,
    rejected_status,
    report_rejected_status,
    shard_progress,
    started_status,
)
from ..conditions import condition, utc_now
from ..policy import UNRESOLVED
from ..redact import redact_text, redact_url
from ..settings import OperatorSettings
from ..targets import SpecProblem
from .common import about_object, reject, wait_for_names

ACTIVE_PHASES = ("Pending", "Running", "Suspended")
CHILD_REJECTED = "ChildRejected"


def _already_refused(status: kopf.Status, generation: int) -> bool:
    """This generation was refused (its spec, the target policy, a strict preflight) or its
    children were refused by the API server: a refusal stands for its generation, recorded once
    and not judged again when the operator restarts (21 restarts gave 21 events, and a restart
    with a wider policy ran what had been refused) until the spec changes."""
    conditions = list(status.get("conditions") or [])
    ready = condition(conditions, "Ready") or {}
    accepted = condition(conditions, "Accepted") or {}
    if ready.get("reason") == CHILD_REJECTED and ready.get("observedGeneration") == generation:
        return True
    return accepted.get("status") == "False" and accepted.get("observedGeneration") == generation


def _reject(
    body: kopf.Body, patch: kopf.Patch, status: kopf.Status, generation: int, problem: SpecProblem
) -> None:
    conditions = list(status.get("conditions") or [])
    problem = SpecProblem(problem.reason, redact_text(problem.message))
    reject(body, patch, KIND, rejected_status(conditions, generation, [problem], utc_now()), [problem])


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL, field="spec")
@metrics.counted_errors("start_benchmark")
@about_object
async def start_benchmark(
    spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta, body: kopf.Body, patch: kopf.Patch, **_: Any
) -> None:
    generation = int(meta["generation"])
    namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
    if _already_refused(status, generation):
        return
    try:
        parsed = MCPBenchmarkSpec.model_validate(spec)
    except ValidationError as exc:
        _reject(
            body,
            patch,
            status,
            generation,
            SpecProblem("InvalidSpec", f"spec: {format_validation_error(exc)}"),
        )
        return
    job = run_job_name(name, parsed, generation, status)
    if status.get("jobName") == job:
        # only suspend changed (or the operator restarted): steer the existing Job
        await reconcile.set_suspended(namespace, job, parsed.suspend)
        if status.get("phase") in ACTIVE_PHASES:
            patch.status["phase"] = "Suspended" if parsed.suspend else "Running"
        patch.status["observedGeneration"] = generation
        return
    settings = OperatorSettings.from_env()
    plan = runner_problem(parsed.runner, settings) or await prepare_plan(
        parsed, namespace, name, kube.service_exists
    )
    if isinstance(plan, SpecProblem):
        if plan.reason == UNRESOLVED:  # not a refusal: DNS may be late; looked at again
            await wait_for_names(body, PLURAL, status, generation, [plan])
        _reject(body, patch, status, generation, plan)
        return
    conditions = list(status.get("conditions") or [])
    found, server = await preflight_check(
        parsed, plan, namespace, parsed.runner.image or settings.runner_image
    )
    block, conditions = preflight_fields(
        mode=parsed.preflight,
        found=found,
        server=server,
        conditions=conditions,
        generation=generation,
        now=utc_now(),
    )
    if found and parsed.preflight == "strict":
        fields = {**stopped_fields(conditions, generation, found, utc_now()), "preflight": block}
        reject(body, patch, KIND, MCPBenchmarkStatus.model_validate(fields).to_patch(), found)
        return
    patch.status["preflight"] = block.to_patch()
    if found:
        events.warning(body, found[0].reason, "; ".join(f.message for f in found))
    sampled = await with_gpu_samplers(
        plan,
        parsed,
        namespace=namespace,
        benchmark=name,
        uid=uid,
        job=job,
        image=parsed.runner.image or settings.runner_image,
    )
    if isinstance(sampled, SpecProblem):
        _reject(body, patch, status, generation, sampled)
        return
    plan = sampled
    manifest = with_run_state_env(
        shard_job(
            spec=parsed,
            name=name,
            job=job,
            uid=uid,
            plan=plan,
            command=settings.runner_command,
            default_image=settings.runner_image,
        ),
        parsed,
    )
    children = run_objects(spec=parsed, benchmark=name, uid=uid, job=job, key=new_run_key())
    try:
        created = await reconcile.create_run(namespace, children, manifest)
    except reconcile.ChildRejectedError as exc:
        problem = SpecProblem(CHILD_REJECTED, str(exc))
        patch.status.update(child_rejected_status(conditions, generation, problem, utc_now()))
        metrics.RECONCILIATIONS.labels(KIND, "child-rejected").inc()
        events.warning(body, CHILD_REJECTED, str(exc))
        return
    await reconcile.delete_older_jobs(namespace, uid, job)
    await delete_samplers(namespace, job, uid, replaced=True)  # the GPU samplers of replaced runs
    patch.status.update(
        started_status(
            conditions=conditions,
            generation=generation,
            job=job,
            digest=spec_digest(parsed),
            url=redact_url(plan.url),
            shards=parsed.shards,
            suspend=parsed.suspend,
            now=utc_now(),
        )
    )
    metrics.RECONCILIATIONS.labels(KIND, "job-created").inc()
    if created:
        events.normal(body, "JobCreated", f"created Job {job} with {parsed.shards} shard(s)")


@kopf.timer(
    GROUP,
    VERSION,
    PLURAL,
    interval=2.0,
    initial_delay=1.0,
    backoff=2.0,  # after a failure kopf would wait 60 s; the next tick is the retry
    when=lambda status, **_: status.get("phase") == "Running" and bool(status.get("jobName")),
)
@metrics.counted_errors("collect_benchmark")
@about_object
async def collect_benchmark(
    spec: kopf.Spec, status: kopf.Status, meta: kopf.Meta, body: kopf.Body, patch: kopf.Patch, **_: Any
) -> None:
    namespace, name, generation = meta["namespace"], meta["name"], int(meta["generation"])
    job, conditions = str(status["jobName"]), list(status.get("conditions") or [])
    state = await reconcile.read_job(namespace, job)
    if state is None:
        patch.status.update(job_missing_status(conditions, generation, job, utc_now()))
        return
    shards = dict(status.get("shards") or {})
    pods = await reconcile.run_pods(namespace, job)
    state = reconcile.settled_by_pods(state, pods)
    if not state.finished:
        progress = shard_progress(shards, state.succeeded, state.failed)
        if progress is not None:
            patch.status.update(progress)
        live = await run_progress(namespace, job, state, pods, MCPBenchmarkSpec.model_validate(spec))
        if live is not None and live != status.get("progress"):
            patch.status["progress"] = live
        stuck = unschedulable_message(pods)
        placed = scheduling_conditions(conditions, generation, stuck, utc_now())
        if placed is not None:
            patch.status["conditions"] = placed
            if stuck is not None:
                events.warning(body, "Unschedulable", redact_text(stuck))
        return
    final = await run_progress(namespace, job, state, pods, MCPBenchmarkSpec.model_validate(spec))
    if final is not None and final != status.get("progress"):
        patch.status["progress"] = final  # the shards' last reports
    key = await reconcile.read_run_key(namespace, job)  # verifies the results, signs the report
    readout, pod_failures = await reconcile.read_results(namespace, meta["uid"], job, state, key, pods)
    metrics.SHARD_RESULTS.labels("merged").inc(len(readout.documents))
    metrics.SHARD_RESULTS.labels("rejected").inc(len(readout.rejected))
    collected = merged_status(
        expected=state.completions,
        succeeded=state.succeeded,
        failed=state.failed,
        readout=readout,
        conditions=conditions,
        generation=generation,
        now=utc_now(),
        pod_failures=pod_failures,
        min_overlap=min_overlap(MCPBenchmarkSpec.model_validate(spec)),
    )
    refused = None
    if collected.merged is not None:
        try:
            collected.status["reportName"] = await reconcile.write_report(
                namespace, name, meta["uid"], collected.merged, key
            )
        except reconcile.ChildRejectedError as exc:  # once: the timer runs only while Running
            refused = str(exc)
    if refused is None:
        patch.status.update(collected.status)
        metrics.VERDICTS.labels(KIND, collected.status["verdict"]).inc()
    else:
        patch.status.update(report_rejected_status(collected.status, generation, refused, utc_now()))
        metrics.RECONCILIATIONS.labels(KIND, "child-rejected").inc()
    for rejected, why in readout.rejected.items():
        events.warning(body, "ShardResultRejected", redact_text(f"{rejected}: {why}"))
    if refused is not None:
        events.warning(body, CHILD_REJECTED, refused)
    elif collected.ready:
        events.normal(body, collected.reason, redact_text(collected.message))
    else:
        events.warning(body, collected.reason, redact_text(collected.message))
    if (body.get("spec") or {}).get("observe", {}).get("gpuSampler"):
        # collected: the serving GPUs' samplers are done with
        await delete_samplers(namespace, job, body["metadata"]["uid"])
