"""MCPReadiness status, built through the API's status model (every field one the CRD declares)
by pure functions that are handed the time instead of reading the clock."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_checks.verdict import SEVERITY, CheckOutcome, RunVerdict, decide

from ..api.readiness import MAX_FINDINGS, MAX_HISTORY, MCPReadinessStatus
from ..conditions import set_condition
from ..rejection import rejected_fields
from ..targets import SpecProblem


def check_row(outcome: CheckOutcome) -> dict[str, Any]:
    """One row of the verdict table; findings are kept worst first and bounded."""
    findings = sorted(outcome.findings, key=lambda f: -SEVERITY[f.outcome])[:MAX_FINDINGS]
    row: dict[str, Any] = {
        "name": outcome.name,
        "verdict": outcome.outcome.value,
        "reason": outcome.reason,
        "message": outcome.message,
        "observed": outcome.observed,
        "thresholds": outcome.thresholds,
        "measuredAt": outcome.measured_at,
    }
    if outcome.duration_s is not None:
        row["durationMs"] = round(outcome.duration_s * 1000)
    if outcome.source:
        row["source"] = outcome.source
    if findings:
        row["findings"] = [
            {
                "subject": f.subject,
                "verdict": f.outcome.value,
                "reason": f.reason,
                "observed": f.observed,
                "threshold": f.threshold,
                "source": f.source,
            }
            for f in findings
        ]
        row["findingsTotal"] = len(outcome.findings)
    return row


def verdict_status(
    previous: Mapping[str, Any],
    generation: int,
    base_url: str,
    started_at: str,
    outcomes: list[CheckOutcome],
    now: str,
    release: Mapping[str, Any] | None = None,
) -> tuple[dict[str, Any], RunVerdict]:
    """Status after an evaluation; ``previous`` is the status before it (conditions, history);
    ``release`` is what it judged (``status.release``), also kept in its history entry."""
    verdict = decide(outcomes)
    completed = now
    conds = set_condition(
        list(previous.get("conditions") or []),
        "Accepted",
        True,
        "SpecAccepted",
        "spec is valid",
        generation,
        now,
    )
    conds = set_condition(conds, "Ready", verdict.ready, verdict.reason, verdict.message, generation, now)
    record = {
        "completedAt": completed,
        "verdict": verdict.outcome.value,
        "score": verdict.score,
        "reason": verdict.reason,
    }
    if release is not None:
        record.update(
            {
                key: release[key]
                for key in ("startedAt", "revision", "workloadTemplateHash", "trigger")
                if release.get(key) is not None
            }
        )
    history = [*list(previous.get("history") or []), record][-MAX_HISTORY:]
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "phase": "Succeeded" if verdict.ready else "Failed",
        "verdict": verdict.outcome.value,
        "score": verdict.score,
        "targetUrl": base_url,
        "startedAt": started_at,
        "completedAt": completed,
        "checks": [check_row(o) for o in outcomes],
        "evaluations": int(previous.get("evaluations") or 0) + 1,
        "history": history,
        "conditions": conds,
    }
    if release is not None:
        status["release"] = {**release, "completedAt": completed}
    return MCPReadinessStatus.model_validate(status).to_patch(), verdict


def rejected_status(
    conditions: list[dict[str, Any]],
    generation: int,
    problems: list[SpecProblem],
    now: str,
    release: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Status for a spec that cannot run: Accepted and Ready both False, with the first reason
    (and the release it was meant to judge, so a gate command waiting for it stops at once)."""
    fields = {**rejected_fields(conditions, generation, problems, now), "score": 0, "checks": []}
    if release is not None:
        fields["release"] = {**release, "completedAt": now}
    return MCPReadinessStatus.model_validate(fields).to_patch()


def running_status(
    conditions: list[dict[str, Any]],
    generation: int,
    base_url: str,
    now: str,
    message: str = "checks are running",
) -> dict[str, Any]:
    conds = set_condition(conditions, "Accepted", True, "SpecAccepted", "spec is valid", generation, now)
    conds = set_condition(conds, "Ready", None, "Evaluating", message, generation, now)
    fields = {"phase": "Running", "targetUrl": base_url, "startedAt": now, "conditions": conds}
    return MCPReadinessStatus.model_validate(fields).to_patch()


def faults_reverted(
    conditions: list[dict[str, Any]], reverted: bool, generation: int, now: str
) -> list[dict[str, Any]]:
    """The FaultsReverted condition: True only when every journaled fault is undone."""
    return set_condition(
        conditions,
        "FaultsReverted",
        reverted,
        "Reverted" if reverted else "RevertFailed",
        "every injected fault is reverted"
        if reverted
        else "a fault could not be reverted: see status.faults",
        generation,
        now,
    )


def drill_status(drill: Any, conditions: list[dict[str, Any]], generation: int, now: str) -> dict[str, Any]:
    """The drill's part of the final status: stages, the KPI board, the journal, and the
    FaultsReverted and Complete conditions (``drill`` is a ``DrillOutcome``)."""
    conds = faults_reverted(conditions, bool(drill.reverted), generation, now)
    conds = set_condition(conds, "Complete", True, "DrillFinished", "every stage ran", generation, now)
    fields = {
        "stage": f"{len(drill.stages)}/{len(drill.stages)}",
        "stages": drill.stages,
        "kpis": drill.kpis,
        "faults": drill.journal[-64:],
        "conditions": conds,
    }
    return MCPReadinessStatus.model_validate(fields).to_patch()
