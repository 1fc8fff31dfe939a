"""One tick of the collect timer of a running MCPBenchmark (``handlers.benchmark``): compare the
Job with the status. While it runs: the shards' counts, the live progress (which opens the start
barrier's levels) and a shard pod the scheduler cannot place. Once it is finished (its own
condition, or each index's pod Succeeded, ``reconcile.settled_by_pods``): read every shard
result and the Job's pods, merge what counts (``benchmark.collect``), write the report object and
the verdict, and delete the serving GPUs' samplers.

No kopf here: the status fields go into the mapping the handler hands in (kopf's
``patch.status``) and events through its ``announce`` callable.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any

from .. import metrics
from ..api.barrier import BenchmarkProgress
from ..api.benchmark import KIND, MCPBenchmarkSpec, MCPBenchmarkStatus, benchmark_status
from ..api.common import condition_rows
from ..conditions import utc_now
from ..redact import redact_text
from . import reconcile
from .barrier import min_overlap
from .gpusampler_kube import delete_samplers
from .preflight import scheduling_conditions, unschedulable_message
from .progress import run_progress
from .start import CHILD_REJECTED, Announce
from .status import job_missing_status, merged_status, report_rejected_status, shard_progress

Status = MutableMapping[str, Any]


@dataclass(frozen=True)
class Collecting:
    """The running benchmark a tick looks at."""

    namespace: str
    name: str
    uid: str
    generation: int
    spec: Mapping[str, Any]  # parsed only where a tick needs it (a Job gone needs nothing)

    def parsed(self) -> MCPBenchmarkSpec:
        return MCPBenchmarkSpec.model_validate(self.spec)


async def collect(run: Collecting, status: MCPBenchmarkStatus, out: Status, announce: Announce) -> None:
    job, conditions = str(status.job_name), condition_rows(status.conditions)
    state = await reconcile.read_job(run.namespace, job)
    if state is None:
        out.update(job_missing_status(conditions, run.generation, job, utc_now()))
        return
    pods = await reconcile.run_pods(run.namespace, job)
    state = reconcile.settled_by_pods(state, pods)
    live = await run_progress(run.namespace, job, state, pods, run.parsed(), (run.name, run.uid), announce)
    progress = None if live is None else BenchmarkProgress.model_validate(live)
    if progress is not None and progress != status.progress:
        out.update(
            MCPBenchmarkStatus(progress=progress).to_patch()
        )  # once finished: the shards' last reports
    if not state.finished:
        _running(run, status, state, pods, out, announce)
        return
    await _collected(run, job, conditions, state, pods, out, announce)


def _running(
    run: Collecting,
    status: MCPBenchmarkStatus,
    state: reconcile.JobState,
    pods: list[Any],
    out: Status,
    announce: Announce,
) -> None:
    """The shards' counts, and Unschedulable while a shard pod cannot be placed."""
    progress = shard_progress(status.shards, state.succeeded, state.failed)
    if progress is not None:
        out.update(progress)
    stuck = unschedulable_message(pods)
    conditions = condition_rows(status.conditions)
    placed = scheduling_conditions(conditions, run.generation, stuck, utc_now())
    if placed is not None:
        out.update(MCPBenchmarkStatus.model_validate({"conditions": placed}).to_patch())
        if stuck is not None:
            announce(True, "Unschedulable", redact_text(stuck))


async def _collected(
    run: Collecting,
    job: str,
    conditions: list[dict[str, Any]],
    state: reconcile.JobState,
    pods: list[Any],
    out: Status,
    announce: Announce,
) -> None:
    """The run is over: merge what counts, write the report and the verdict, once."""
    key = await reconcile.read_run_key(run.namespace, job)  # verifies the results, signs the report
    readout, pod_failures = await reconcile.read_results(run.namespace, run.uid, job, state, key, pods)
    metrics.SHARD_RESULTS.labels("merged").inc(len(readout.documents))
    metrics.SHARD_RESULTS.labels("rejected").inc(len(readout.rejected))
    collected = merged_status(
        expected=state.completions,
        succeeded=state.succeeded,
        failed=state.failed,
        readout=readout,
        conditions=conditions,
        generation=run.generation,
        now=utc_now(),
        pod_failures=pod_failures,
        min_overlap=min_overlap(run.parsed()),
    )
    refused = None
    if collected.merged is not None:
        try:
            report = await reconcile.write_report(run.namespace, run.name, run.uid, collected.merged, key)
            collected.status.update(MCPBenchmarkStatus(report_name=report).to_patch())
        except reconcile.ChildRejectedError as exc:  # once: the timer runs only while Running
            refused = str(exc)
    if refused is None:
        out.update(collected.status)
        metrics.VERDICTS.labels(KIND, benchmark_status(collected.status).verdict).inc()
    else:
        out.update(report_rejected_status(collected.status, run.generation, refused, utc_now()))
        metrics.RECONCILIATIONS.labels(KIND, "child-rejected").inc()
    for rejected, why in readout.rejected.items():
        announce(True, "ShardResultRejected", redact_text(f"{rejected}: {why}"))
    if refused is not None:
        announce(True, CHILD_REJECTED, refused)
    else:
        announce(not collected.ready, collected.reason, redact_text(collected.message))
    if (run.spec.get("observe") or {}).get("gpuSampler"):  # collected: the serving GPUs' samplers
        await delete_samplers(run.namespace, job, run.uid)  # are done with
