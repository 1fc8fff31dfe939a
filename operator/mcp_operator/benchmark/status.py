"""MCPBenchmark status, built through the API's status model (every field one the CRD
declares) by pure functions that are handed the time instead of reading the clock.

Bounded in bytes: what comes from the shards (the engine fingerprint a server announced, the
findings' texts and figures, why results were rejected) is clipped, and the collected status is
built at tighter bounds until it fits ``bounded.STATUS_BUDGET``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic.alias_generators import to_camel

from mcp_bench.api import (
    MIN_OVERLAP,
    DiagnoseInputs,
    Finding,
    LevelResult,
    LevelSummary,
    MergeError,
    ResultDocument,
    diagnose,
    merge_documents,
    summarize,
)
from mcp_common.tolerant import held

from ..api.benchmark import MCPBenchmarkStatus, benchmark_status
from ..api.common import condition_rows
from ..api.results import MAX_DIAGNOSTICS, MAX_RESULT_ROWS, DiagnosticFinding, LevelRow, ShardSummary
from ..bounded import MAX_URL, TIERS, Bounds, clip, clip_map, fit, json_size
from ..conditions import condition, set_condition
from ..rejection import rejected_fields
from ..targets import SpecProblem
from .collect import PodFailure, ShardReadout
from .gpusampler import serving_columns
from .search import search_message, search_status

Conditions = list[dict[str, Any]]
OVERLAPPED = "ShardsOverlapped"
SHARD_FAILED = "ShardFailed"  # a shard pod was OOM-killed before it published
NOT_CONCURRENT = "ShardsNotConcurrent"


def ended(
    conditions: Conditions, *, failed: bool, reason: str, message: str, generation: int, now: str
) -> Conditions:
    """Complete and Failed as a batch Job has them: exactly one is True once the run is over,
    so ``kubectl wait --for=condition=Complete`` (or ``Failed``) returns either way."""
    conds = set_condition(conditions, "Complete", not failed, reason, message, generation, now)
    return set_condition(conds, "Failed", failed, reason, message, generation, now)


def _with_failed(fields: dict[str, Any], generation: int, now: str) -> dict[str, Any]:
    """A run that will not produce figures (its Ready reason says why): Failed True."""
    found = benchmark_status(fields).conditions
    ready = condition(found, "Ready")
    conds = ended(
        condition_rows(found),
        failed=True,
        reason=ready.reason if ready is not None and ready.reason else "Failed",
        message="" if ready is None else ready.message,
        generation=generation,
        now=now,
    )
    return {**fields, "conditions": conds}


def _figure(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def level_row(summary: LevelSummary, bounds: Bounds = TIERS[0], level: LevelResult | None = None) -> LevelRow:
    """A status row from the level's one summary: the same errors, latency and SLO spelling as
    ``mcp-bench show`` prints for the same document; with the merged ``level``, how far its
    shards overlapped and whether it is a cluster-wide figure."""
    overlap = None if level is None else level.overlap
    gpu = summary.gpu_memory_peak_pct
    return LevelRow(
        level=clip(summary.level, bounds.field),
        requests=summary.completed,
        completed=summary.completed,
        offered=summary.completed + summary.errors,
        errors=summary.errors,
        error_percent=_percent(summary.errors, summary.completed + summary.errors),
        latency=clip(summary.latency_basis, bounds.field),
        throughput_rps=_figure(summary.throughput_rps),
        mean_ms=_figure(summary.mean_ms),
        p50_ms=_figure(summary.p50_ms),
        p95_ms=_figure(summary.p95_ms),
        p99_ms=_figure(summary.p99_ms),
        gpu_memory_peak_percent="unavailable" if gpu is None else f"{gpu:.1f}",
        slo=clip(summary.slo or "", bounds.field),
        **serving_columns(summary.serving, min(512, bounds.text)),
        server_metrics=clip_map(summary.server_figures, bounds),
        output_consistency=None if summary.consistency is None else clip(summary.consistency, bounds.field),
        overlap_percent="n/a" if overlap is None else f"{overlap * 100:.1f}",
        cluster_wide=level is None or level.not_concurrent is None,
        client_bound=None
        if level is None or not level.client_bound
        else clip("; ".join(level.client_bound), min(1024, bounds.text)),
    )


def result_rows(
    doc: ResultDocument, bounds: Bounds = TIERS[0], summaries: Sequence[LevelSummary] | None = None
) -> list[LevelRow]:
    """``status.results`` for the merged document: a row for each of its last ``MAX_RESULT_ROWS``
    levels (``summaries``: the levels' summaries when the caller has them already). The report's
    figures are held to these (``report.disagreements``)."""
    if summaries is None:
        summaries = [summarize(doc, level) for level in doc.levels]
    pairs = list(zip(summaries, doc.levels, strict=True))[-MAX_RESULT_ROWS:]
    return [level_row(summary, bounds, level) for summary, level in pairs]


def _percent(part: int, whole: int) -> str:
    """``part`` of ``whole`` in percent, two decimals: 50 failed of 100 offered is 50.00, whatever
    completed; n/a when nothing was offered."""
    return "n/a" if whole <= 0 else f"{100 * part / whole:.2f}"


def _value(value: float | int | str | None) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def diagnostic_row(f: Finding, bounds: Bounds = TIERS[0]) -> DiagnosticFinding:
    """A finding in the API's shape: figures as strings, camelCase keys, texts cut to their bounds
    (the CRD's, and ``bounds`` within them)."""
    values = {to_camel(k): _value(v) for k, v in f.values.items() if v is not None}
    return DiagnosticFinding(
        trap=f.trap,
        key=f.key,
        name=f.name,
        state=f.state,
        summary=clip(f.summary, bounds.text),
        level=None if f.level is None else clip(f.level, bounds.field),
        values=clip_map(values, bounds),
        thresholds=clip_map({to_camel(k): _value(v) for k, v in f.thresholds.items()}, bounds),
        source=clip(f.source, min(512, bounds.text)),
        advice=clip(f.advice, min(512, bounds.text)),
        needs=clip(f.needs, min(512, bounds.text)),
    )


def findings(doc: ResultDocument) -> list[Finding]:
    """The trap detectors over the merged document: one finding per detector, bounded."""
    return diagnose(DiagnoseInputs(document=doc))[:MAX_DIAGNOSTICS]


def diagnostics(doc: ResultDocument, bounds: Bounds = TIERS[0]) -> list[DiagnosticFinding]:
    """The detectors' findings in the API's shape."""
    return [diagnostic_row(f, bounds) for f in findings(doc)]


def engine_fingerprint(fields: dict[str, Any], bounds: Bounds = TIERS[0]) -> dict[str, str]:
    """The engine fingerprint in the API's camelCase (serverName, engineVersion, ...); its values
    come from the shards (a server's own headers), so they are clipped."""
    return clip_map({to_camel(key): str(value) for key, value in fields.items() if value}, bounds)


def rejected_status(
    conditions: Conditions, generation: int, problems: list[SpecProblem], now: str
) -> dict[str, Any]:
    """The first tier of the preflight, schema and semantics, failed: PreflightPassed says so too."""
    fields = rejected_fields(conditions, generation, problems, now)
    first = problems[0]
    fields["conditions"] = set_condition(
        fields["conditions"], "PreflightPassed", False, first.reason, first.message, generation, now
    )
    return MCPBenchmarkStatus.model_validate(_with_failed(fields, generation, now)).to_patch()


def child_rejected_status(
    conditions: Conditions, generation: int, problem: SpecProblem, now: str
) -> dict[str, Any]:
    """The API server refused one of the run's children: Failed, with its message, once."""
    fields = rejected_fields(conditions, generation, [problem], now)
    fields = _with_failed({**fields, "phase": "Failed"}, generation, now)
    return MCPBenchmarkStatus.model_validate(fields).to_patch()


def start_failed_status(
    conditions: Conditions, generation: int, reason: str, message: str, now: str
) -> dict[str, Any]:
    """Starting the run raised: Failed and Error with the reason, once for the generation; the
    spec was accepted, so Accepted stays as it was."""
    conds = set_condition(conditions, "Ready", False, reason, message, generation, now)
    fields = {
        "observedGeneration": generation,
        "phase": "Failed",
        "verdict": "Error",
        "completedAt": now,
        "conditions": conds,
    }
    return MCPBenchmarkStatus.model_validate(_with_failed(fields, generation, now)).to_patch()


def report_rejected_status(
    collected: dict[str, Any], generation: int, message: str, now: str
) -> dict[str, Any]:
    """The shards were merged but the API server refused the report (a quota, an admission
    webhook): Failed with ChildRejected and its message, once, as for any child; the figures the
    collected status holds stay."""
    conditions = condition_rows(benchmark_status(collected).conditions)
    conds = set_condition(conditions, "Ready", False, "ChildRejected", message, generation, now)
    fields = {**collected, "phase": "Failed", "verdict": "Error", "conditions": conds}
    return MCPBenchmarkStatus.model_validate(_with_failed(fields, generation, now)).to_patch()


def started_status(
    *,
    conditions: Conditions,
    generation: int,
    job: str,
    digest: str,
    url: str,
    shards: int,
    suspend: bool,
    now: str,
) -> dict[str, Any]:
    """Status once the Job exists: Accepted, Complete False, Ready Unknown until the merge."""
    conds = set_condition(
        conditions, "Accepted", True, "JobCreated", f"Job {job} runs {shards} shard(s)", generation, now
    )
    conds = set_condition(conds, "Complete", False, "Running", "shards are running", generation, now)
    conds = set_condition(conds, "Failed", False, "Running", "shards are running", generation, now)
    conds = set_condition(conds, "Ready", None, "Running", "waiting for shard results", generation, now)
    return MCPBenchmarkStatus.model_validate(
        {
            "phase": "Suspended" if suspend else "Running",
            "observed_generation": generation,
            "job_name": job,
            "spec_digest": digest,
            "target_url": clip(url, MAX_URL),
            "started_at": now,
            "shards": ShardSummary(expected=shards),
            "conditions": conds,
        }
    ).to_patch()


def job_missing_status(conditions: Conditions, generation: int, job: str, now: str) -> dict[str, Any]:
    conds = set_condition(
        conditions, "Ready", False, "JobMissing", f"Job {job} no longer exists", generation, now
    )
    fields = _with_failed({"phase": "Failed", "verdict": "Error", "conditions": conds}, generation, now)
    return MCPBenchmarkStatus.model_validate(fields).to_patch()


def shard_progress(shards: ShardSummary | None, succeeded: int, failed: int) -> dict[str, Any] | None:
    """The shard counts while the Job runs, or None when they have not changed."""
    if shards is not None and (held(shards, "succeeded"), held(shards, "failed")) == (succeeded, failed):
        return None  # what the status holds, not the model's default: a first count is written
    wire = {} if shards is None else shards.to_patch()
    summary = ShardSummary.model_validate({**wire, "succeeded": succeeded, "failed": failed})
    return MCPBenchmarkStatus(shards=summary).to_patch()


@dataclass(frozen=True)
class Collected:
    status: dict[str, Any]
    merged: ResultDocument | None
    ready: bool
    reason: str
    message: str


def _problem(
    readout: ShardReadout, expected: int, succeeded: int, failed: int, pod_failures: Sequence[PodFailure]
) -> tuple[str, str] | None:
    """Why the run has no verdict: a result rejected; else a result missing, ``ShardFailed`` when
    the pod of a missing index was OOM-killed (named first), else ``ShardResultMissing``."""
    if readout.rejected:
        names = ", ".join(f"{k} ({v})" for k, v in sorted(readout.rejected.items()))
        return "ShardResultRejected", f"{len(readout.rejected)} shard result(s) rejected: {names}"
    if len(readout.documents) < expected:
        published = {doc.shard_index for doc in readout.documents}
        killed = [f for f in pod_failures if f.oom_killed and f.index not in published]
        others = [f for f in pod_failures if not (f.oom_killed and f.index not in published)]
        why = "".join(f"; {f.text}" for f in [*killed, *others][:3])
        return (
            SHARD_FAILED if killed else "ShardResultMissing",
            f"{len(readout.documents)} of {expected} shards published a result "
            f"({succeeded} pods succeeded, {failed} failed){why}",
        )
    return None


def merged_status(
    *,
    expected: int,
    succeeded: int,
    failed: int,
    readout: ShardReadout,
    conditions: Conditions,
    generation: int,
    now: str,
    pod_failures: Sequence[PodFailure] | None = None,
    min_overlap: float = MIN_OVERLAP,
) -> Collected:
    """Status once the Job is finished: the verdict from the merged shards, or why there is none
    (``pod_failures``: why shard pods failed, ``collect.pod_failures``). A level whose
    shards did not overlap for ``min_overlap`` of its time is no cluster-wide figure: its row
    says so, the printer columns skip it, ShardsOverlapped is False and the verdict is
    Inconclusive (never a Pass on figures that were not measured together)."""
    problem = _problem(readout, expected, succeeded, failed, pod_failures or [])
    merged = None
    if readout.documents:
        try:
            merged = merge_documents(readout.documents, min_overlap=min_overlap)
        except MergeError as exc:
            problem = problem or ("ShardMergeFailed", str(exc))
    if merged is not None and not merged.measured_anything:
        problem = problem or ("NothingMeasured", "no request completed in any shard")
    summaries = [] if merged is None else [summarize(merged, level) for level in merged.levels]
    apart = [] if merged is None else [lv for lv in merged.levels if lv.not_concurrent]
    found = [] if merged is None else findings(merged)
    if problem is not None:
        reason, message = problem
        verdict, ready, phase = "Error", False, "Failed"
    elif apart:
        reason = NOT_CONCURRENT
        message = "; ".join(f"{lv.level_label}: {lv.not_concurrent}" for lv in apart)
        verdict, ready, phase = "Inconclusive", False, "Succeeded"
    elif merged is not None and merged.slo_passed is False:
        failing = [s.level for s in summaries if s.slo == "Fail"]
        reason, message = "SloMissed", f"SLO missed at {', '.join(failing) or 'some level'}"
        verdict, ready, phase = "Fail", False, "Succeeded"
    else:
        reason = "SloMet" if merged is not None and merged.slo_passed else "Measured"
        message = f"{len(readout.documents)} shard(s) merged; " + (
            "every SLO met" if reason == "SloMet" else "no SLO declared"
        )
        verdict, ready, phase = "Pass", True, "Succeeded"
    if problem is None and merged is not None and merged.search is not None:
        message = search_message(merged.search)  # the search's answer, not its probes' misses
    bound = [] if merged is None else [lv.level_label for lv in merged.levels if lv.client_bound]
    if bound:  # said where everyone reads: the figures there measured the client as well
        message += f"; client-bound at {', '.join(bound)} (results[].clientBound)"

    def build(bounds: Bounds) -> dict[str, Any]:
        fields: dict[str, Any] = {
            "observed_generation": generation,
            "completed_at": now,
            "phase": phase,
            "verdict": verdict,
            "shards": ShardSummary(
                expected=expected,
                reported=len(readout.documents),
                rejected=len(readout.rejected),
                succeeded=succeeded,
                failed=failed,
            ),
        }
        if merged is not None and merged.search is not None:
            fields["search"] = search_status(merged.search, bounds)
        conds = list(conditions)
        if merged is not None:
            rows = result_rows(merged, bounds, summaries)
            fields["results"] = rows
            wide = [row for row in rows if row.cluster_wide]
            if wide:  # the printer columns show a cluster-wide figure or none
                fields["p99_ms"], fields["throughput_rps"] = wide[-1].p99_ms, wide[-1].throughput_rps
            elif rows:
                fields["p99_ms"] = fields["throughput_rps"] = "n/a"
            measured = [lv for lv in merged.levels if lv.overlap is not None]
            if measured:
                conds = overlap_condition(conds, measured, apart, min_overlap, generation, now, bounds)
            fields["engine"] = engine_fingerprint(merged.engine.model_dump(), bounds)
            fields["diagnostics"] = [diagnostic_row(f, bounds) for f in found]
        text = clip(message, bounds.text)
        if phase == "Failed":
            conds = ended(conds, failed=True, reason=reason, message=text, generation=generation, now=now)
        else:
            conds = ended(
                conds,
                failed=False,
                reason="JobFinished",
                message="all shards finished",
                generation=generation,
                now=now,
            )
        conds = set_condition(conds, "Ready", ready, reason, text, generation, now)
        fields["conditions"] = conds
        return MCPBenchmarkStatus.model_validate(fields).to_patch()

    return Collected(fit(build, json_size), merged, ready, reason, message)


def overlap_condition(
    conditions: Conditions,
    measured: list[LevelResult],
    apart: list[LevelResult],
    min_overlap: float,
    generation: int,
    now: str,
    bounds: Bounds = TIERS[0],
) -> Conditions:
    """ShardsOverlapped: True when every level's shards measured together for at least
    ``min_overlap`` of its time, False (ShardWindowsApart) naming the levels that did not."""
    if apart:
        text = "; ".join(f"{lv.level_label}: {lv.not_concurrent}" for lv in apart)
        return set_condition(
            conditions, OVERLAPPED, False, "ShardWindowsApart", clip(text, bounds.text), generation, now
        )
    least = min(lv.overlap or 0.0 for lv in measured)
    message = f"every level's shards overlapped for at least {least:.1%} of it (minimum {min_overlap:.0%})"
    return set_condition(conditions, OVERLAPPED, True, "ShardsRanTogether", message, generation, now)
