"""Starting an MCPBenchmark's run, what ``handlers.benchmark.start_benchmark`` asks for once the
spec parsed: steer the Job of this spec that already exists (only ``suspend`` changed, or the
operator restarted), or plan the run, preflight it, place the serving GPUs' samplers, create the
run's children and its Job, and record it in status.

No kopf here: the status fields go into the mapping the handler hands in (kopf's
``patch.status``), events through its ``announce`` callable, and a refusal comes back as
:class:`Refused` for the handler to record once (a name that does not resolve yet is not a
refusal: ``Refused.wait``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

from .. import kube, metrics
from ..api.benchmark import KIND, MCPBenchmarkSpec, MCPBenchmarkStatus
from ..api.common import condition_rows
from ..conditions import condition, utc_now
from ..redact import redact_text, redact_url
from ..rejection import Refused
from ..settings import OperatorSettings
from ..targets import SpecProblem
from . import reconcile
from .barrier import with_run_state_env
from .gpusampler_kube import delete_samplers, with_gpu_samplers
from .job import shard_job, spec_digest
from .plan import RunPlan, prepare_plan, runner_problem
from .preflight import preflight_fields, stopped_fields
from .preflight_read import check as preflight_check
from .run import new_run_key, run_objects
from .status import child_rejected_status, rejected_status, start_failed_status, started_status

log = logging.getLogger(__name__)
ACTIVE_PHASES = ("Pending", "Running", "Suspended")
CHILD_REJECTED = "ChildRejected"
INTERNAL_ERROR = "InternalError"  # starting the run raised what the operator did not expect
Announce = Callable[[bool, str, str], None]  # (warning, reason, message): an event on the object
Status = MutableMapping[str, Any]


@dataclass(frozen=True)
class Run:
    """The benchmark a run is started for, and the Job this spec's run has."""

    namespace: str
    name: str
    uid: str
    generation: int
    job: str


def already_refused(status: MCPBenchmarkStatus, generation: int) -> bool:
    """This generation was refused (its spec, the target policy, a strict preflight) or its
    children were refused by the API server: a refusal stands for its generation, recorded once
    and not judged again when the operator restarts (21 restarts gave 21 events, and a restart
    with a wider policy ran what had been refused) until the spec changes."""
    ready = condition(status.conditions, "Ready")
    accepted = condition(status.conditions, "Accepted")
    stands = (CHILD_REJECTED, INTERNAL_ERROR)
    if ready is not None and ready.reason in stands and ready.observed_generation == generation:
        return True
    return accepted is not None and accepted.status == "False" and accepted.observed_generation == generation


def refused(status: MCPBenchmarkStatus, generation: int, problem: SpecProblem, now: str) -> Refused:
    """A refused spec's status (Accepted and Ready False), its message redacted."""
    conditions = condition_rows(status.conditions)
    problem = SpecProblem(problem.reason, redact_text(problem.message))
    return Refused(rejected_status(conditions, generation, [problem], now), [problem])


async def steer(run: Run, parsed: MCPBenchmarkSpec, status: MCPBenchmarkStatus, out: Status) -> None:
    """The Job of this spec exists: only ``suspend`` changed (or the operator restarted)."""
    await reconcile.set_suspended(run.namespace, run.job, parsed.suspend)
    if status.phase in ACTIVE_PHASES:
        out.update(MCPBenchmarkStatus(phase="Suspended" if parsed.suspend else "Running").to_patch())
    out.update(MCPBenchmarkStatus(observed_generation=run.generation).to_patch())


async def start_run(
    run: Run, parsed: MCPBenchmarkSpec, status: MCPBenchmarkStatus, out: Status, announce: Announce
) -> Refused | None:
    """Plan, preflight, samplers, children and the Job; the started status into ``out``. Whatever
    that raises, other than a transient API failure (kopf tries again), ends the run once for its
    generation (Failed, Ready False with InternalError, a Warning event), where kopf would retry it
    every 60 s forever and the object would get no status at all."""
    try:
        return await _start_run(run, parsed, status, out, announce)
    except Exception as exc:
        if kube.transient(exc):
            raise
        log.exception("%s/%s: starting the run failed; written as its end", run.namespace, run.name)
        message = (
            f"the operator failed while starting the run: {type(exc).__name__}: {exc} (its log has the "
            "traceback); started again when the spec changes"
        )
        conditions = condition_rows(status.conditions)
        out.update(start_failed_status(conditions, run.generation, INTERNAL_ERROR, message, utc_now()))
        metrics.ERRORS.labels("start").inc()
        announce(True, INTERNAL_ERROR, message)
        return None


async def _start_run(
    run: Run, parsed: MCPBenchmarkSpec, status: MCPBenchmarkStatus, out: Status, announce: Announce
) -> Refused | None:
    settings = OperatorSettings.from_env()
    image = parsed.runner.image or settings.runner_image
    plan = runner_problem(parsed.runner, settings) or await prepare_plan(
        parsed, run.namespace, run.name, kube.service_exists
    )
    if isinstance(plan, SpecProblem):
        return refused(status, run.generation, plan, utc_now())
    conditions = await _preflight(run, parsed, plan, image, status, out, announce)
    if isinstance(conditions, Refused):
        return conditions
    sampled = await with_gpu_samplers(
        plan, parsed, namespace=run.namespace, benchmark=run.name, uid=run.uid, job=run.job, image=image
    )
    if isinstance(sampled, SpecProblem):
        return refused(status, run.generation, sampled, utc_now())
    manifest = with_run_state_env(
        shard_job(
            spec=parsed,
            name=run.name,
            job=run.job,
            uid=run.uid,
            command=settings.runner_command,
            default_image=settings.runner_image,
        ),
        parsed,
    )
    await _create(run, parsed, sampled, manifest, conditions, out, announce)
    return None


async def _preflight(
    run: Run,
    parsed: MCPBenchmarkSpec,
    plan: RunPlan,
    image: str,
    status: MCPBenchmarkStatus,
    out: Status,
    announce: Announce,
) -> list[dict[str, Any]] | Refused:
    """``spec.preflight``: its block and condition; ``strict`` and a finding stop the run
    (no Job), ``warn`` says so in an event and goes on. Returns the conditions so far."""
    found, server = await preflight_check(parsed, plan, run.namespace, image)
    block, conditions = preflight_fields(
        mode=parsed.preflight,
        found=found,
        server=server,
        conditions=condition_rows(status.conditions),
        generation=run.generation,
        now=utc_now(),
    )
    if found and parsed.preflight == "strict":
        fields = {**stopped_fields(conditions, run.generation, found, utc_now()), "preflight": block}
        return Refused(MCPBenchmarkStatus.model_validate(fields).to_patch(), found)
    out["preflight"] = block.to_patch()
    if found:
        announce(True, found[0].reason, "; ".join(f.message for f in found))
    return conditions


async def _create(
    run: Run,
    parsed: MCPBenchmarkSpec,
    plan: RunPlan,
    manifest: dict[str, Any],
    conditions: list[dict[str, Any]],
    out: Status,
    announce: Announce,
) -> None:
    """The run's children and its Job (a refused child fails the run, once), the Jobs and GPU
    samplers of runs this spec replaced deleted, and the started status."""
    children = run_objects(
        spec=parsed, benchmark=run.name, uid=run.uid, job=run.job, key=new_run_key(), plan=plan
    )
    try:
        created = await reconcile.create_run(run.namespace, children, manifest)
    except reconcile.ChildRejectedError as exc:
        problem = SpecProblem(CHILD_REJECTED, str(exc))
        out.update(child_rejected_status(conditions, run.generation, problem, utc_now()))
        metrics.RECONCILIATIONS.labels(KIND, "child-rejected").inc()
        announce(True, CHILD_REJECTED, str(exc))
        return
    await reconcile.delete_older_jobs(run.namespace, run.uid, run.job)
    await delete_samplers(run.namespace, run.job, run.uid, replaced=True)  # of replaced runs
    out.update(
        started_status(
            conditions=conditions,
            generation=run.generation,
            job=run.job,
            digest=spec_digest(parsed),
            url=redact_url(plan.url),
            shards=parsed.shards,
            suspend=parsed.suspend,
            now=utc_now(),
        )
    )
    metrics.RECONCILIATIONS.labels(KIND, "job-created").inc()
    if created:
        announce(False, "JobCreated", f"created Job {run.job} with {parsed.shards} shard(s)")
