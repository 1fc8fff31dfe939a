"""Read shard results back, verify them, merge them, and turn the merge into status.

A shard result whose checksum or shape is wrong is rejected and reported, never merged;
a Job that finished with fewer valid results than shards says so instead of pretending.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mcp_bench.report import gpu_memory_peak_pct
from mcp_bench.results.document import (
    ChecksumMismatchError,
    DocumentFormatError,
    LevelResult,
    ResultDocument,
    loads_document,
)
from mcp_bench.results.merge import MergeError, merge_documents

from .conditions import set_condition, utc_now


@dataclass
class ShardReadout:
    documents: list[ResultDocument] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # object name -> why


def read_shards(objects: list[tuple[str, str | None]]) -> ShardReadout:
    """Parse every published shard (name, text); bad ones land in ``rejected`` with a reason."""
    readout = ShardReadout()
    for name, text in objects:
        if not text:
            readout.rejected[name] = "empty result"
            continue
        try:
            readout.documents.append(loads_document(text))
        except ChecksumMismatchError as exc:
            readout.rejected[name] = f"checksum: {exc}"
        except DocumentFormatError as exc:
            readout.rejected[name] = f"format: {exc}"
    return readout


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def gpu_memory_peak_percent(level: LevelResult) -> str:
    value = gpu_memory_peak_pct(level.telemetry)
    return "unavailable" if value is None else f"{value:.1f}"


def level_row(level: LevelResult) -> dict[str, Any]:
    e2e = level.latency.get("e2e_from_schedule") if level.mode == "open" else None
    if e2e is None or not e2e.count:
        e2e = level.latency.get("e2e")
    slo = "" if level.slo.passed is None else ("Pass" if level.slo.passed else "Fail")
    return {
        "level": level.level_label,
        "requests": level.completed,
        "errors": level.failed,
        "throughputRps": _ms(level.throughput_rps),
        "meanMs": _ms(e2e.mean_ms if e2e else None),
        "p50Ms": _ms(e2e.p50_ms if e2e else None),
        "p95Ms": _ms(e2e.p95_ms if e2e else None),
        "p99Ms": _ms(e2e.p99_ms if e2e else None),
        "gpuMemoryPeakPercent": gpu_memory_peak_percent(level),
        "slo": slo,
    }


@dataclass(frozen=True)
class Collected:
    status: dict[str, Any]
    merged: ResultDocument | None
    ready: bool
    reason: str
    message: str


def merged_status(
    *,
    expected: int,
    succeeded: int,
    failed: int,
    readout: ShardReadout,
    conditions: list[dict[str, Any]],
    generation: int,
    pod_failures: list[str] | None = None,
) -> Collected:
    """Status once the Job is finished: verdict from the merged shards, or why there is none
    (``pod_failures``: what failed shard pods said in their termination messages)."""
    pod_failures = pod_failures or []
    shards = {
        "expected": expected,
        "reported": len(readout.documents),
        "rejected": len(readout.rejected),
        "succeeded": succeeded,
        "failed": failed,
    }
    status: dict[str, Any] = {"shards": shards, "completedAt": utc_now(), "observedGeneration": generation}
    merged: ResultDocument | None = None
    problem: tuple[str, str] | None = None
    if readout.rejected:
        names = ", ".join(f"{k} ({v})" for k, v in sorted(readout.rejected.items()))
        problem = ("ShardResultRejected", f"{len(readout.rejected)} shard result(s) rejected: {names}")
    elif len(readout.documents) < expected:
        why = "".join(f"; {text}" for text in pod_failures[:3])
        problem = (
            "ShardResultMissing",
            f"{len(readout.documents)} of {expected} shards published a result "
            f"({succeeded} pods succeeded, {failed} failed){why}",
        )
    if readout.documents:
        try:
            merged = merge_documents(readout.documents)
        except MergeError as exc:
            problem = problem or ("ShardMergeFailed", str(exc))
    if merged is not None and not merged.measured_anything:
        problem = problem or ("NothingMeasured", "no request completed in any shard")
    if merged is not None:
        rows = [level_row(level) for level in merged.levels]
        status["results"] = rows[-32:]
        if rows:
            status["p99Ms"] = rows[-1]["p99Ms"]
            status["throughputRps"] = rows[-1]["throughputRps"]
        status["engine"] = {k: str(v) for k, v in merged.engine.model_dump().items() if v}
    if problem is not None:
        reason, message = problem
        verdict, ready, phase = "Error", False, "Failed"
    elif merged is not None and merged.slo_passed is False:
        failing = [r["level"] for r in status["results"] if r["slo"] == "Fail"]
        reason, message = "SloMissed", f"SLO missed at {', '.join(failing) or 'some level'}"
        verdict, ready, phase = "Fail", False, "Succeeded"
    else:
        reason = "SloMet" if merged is not None and merged.slo_passed else "Measured"
        message = f"{shards['reported']} shard(s) merged; " + (
            "every SLO met" if reason == "SloMet" else "no SLO declared"
        )
        verdict, ready, phase = "Pass", True, "Succeeded"
    conds = set_condition(conditions, "Complete", True, "JobFinished", "all shards finished", generation)
    conds = set_condition(conds, "Ready", ready, reason, message, generation)
    status.update({"phase": phase, "verdict": verdict, "conditions": conds})
    return Collected(status, merged, ready, reason, message)


def pod_failure_messages(pods: list[Any]) -> list[str]:
    """``pod: message`` for every failed shard pod, from its termination message (the shard
    writes why it failed there; the kubelet falls back to the log tail)."""
    messages = []
    for pod in pods:
        if pod.status.phase != "Failed":
            continue
        for container in pod.status.container_statuses or []:
            terminated = container.state.terminated if container.state else None
            if terminated is not None and terminated.exit_code:
                text = (terminated.message or terminated.reason or "").strip().splitlines()
                detail = text[-1] if text else f"exit code {terminated.exit_code}"
                messages.append(f"{pod.metadata.name}: {detail[:300]}")
    return messages
