"""MCPReadiness status, built through the API's status model (every field one the CRD declares)
by pure functions that are handed the time instead of reading the clock.

Bounded in bytes, not only in rows: every string copied from a check (messages, findings,
sources, figures) is clipped, and the verdict's status is built at tighter bounds until it fits
``bounded.STATUS_BUDGET``, however long the addresses and messages a spec leads to.

Redacted, not only bounded: the target URL and every string a check row copies go through
``redact`` (the CRD and ``semantic_problems`` refuse a URL with credentials; this is for one
that reached a check some other way, or an answer that quotes one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp_checks.api import SEVERITY, CheckOutcome, RunVerdict, Verdict, decide

from ..api.readiness import MAX_CHECK_HISTORY, MAX_FINDINGS, MAX_HISTORY, MCPReadinessStatus
from ..api.readinessstatus import read_status
from ..bounded import MAX_URL, TIERS, Bounds, clip, clip_map, clip_strings, fit, json_size
from ..conditions import condition, set_condition
from ..redact import redact_text, redact_url
from ..rejection import rejected_fields
from ..targets import SpecProblem

STATUS_TOO_LARGE = "StatusTooLarge"
MAX_RELEASE_FIELD = 512  # spec.release is at most 256 characters: never cut


def worst_kept(outcomes: list[CheckOutcome], limit: int) -> list[CheckOutcome]:
    """All rows in their order when they fit; else the ``limit`` worst, still in their order (the
    verdict is decided over all of them before this)."""
    if len(outcomes) <= limit:
        return outcomes
    keep = sorted(range(len(outcomes)), key=lambda i: -SEVERITY[outcomes[i].outcome])[:limit]
    return [outcomes[i] for i in sorted(keep)]


def shown(text: str, limit: int) -> str:
    """``text`` as status may hold it: redacted first, so a clip never leaves half a credential."""
    return clip(redact_text(text), limit)


def shown_map(values: Mapping[str, str], bounds: Bounds) -> dict[str, str]:
    """A map of figures as status may hold it (a figure may quote an address)."""
    return clip_map({k: redact_text(v) for k, v in values.items()}, bounds)


def check_row(outcome: CheckOutcome, bounds: Bounds = TIERS[0]) -> dict[str, Any]:
    """One row of the verdict table; findings are kept worst first and bounded, in number and in
    the length of every string."""
    kept = min(MAX_FINDINGS, bounds.items)
    findings = sorted(outcome.findings, key=lambda f: -SEVERITY[f.outcome])[:kept]
    row: dict[str, Any] = {
        "name": clip(outcome.name, bounds.field),
        "verdict": outcome.outcome.value,
        "reason": clip(outcome.reason, bounds.field),
        "message": shown(outcome.message, bounds.text),
        "observed": shown_map(outcome.observed, bounds),
        "thresholds": shown_map(outcome.thresholds, bounds),
        "measuredAt": outcome.measured_at,
    }
    if outcome.duration_s is not None:
        row["durationMs"] = round(outcome.duration_s * 1000)
    if outcome.source:
        row["source"] = shown(outcome.source, bounds.field)
    if findings:
        row["findings"] = [
            {
                "subject": shown(f.subject, bounds.field),
                "verdict": f.outcome.value,
                "reason": clip(f.reason, bounds.field),
                "observed": shown(f.observed, bounds.field),
                "threshold": shown(f.threshold, bounds.field),
                "source": shown(f.source, bounds.field),
            }
            for f in findings
        ]
    if outcome.findings:
        row["findingsTotal"] = len(outcome.findings)
    return row


def _release(release: Mapping[str, Any]) -> dict[str, Any]:
    return {k: clip_strings(v, MAX_RELEASE_FIELD) for k, v in release.items()}


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
    ``release`` is what it judged (``status.release``), also kept in its history entry. The
    widest bounds whose status fits the budget are taken."""
    verdict, before = decide(outcomes), read_status(previous)

    def build(bounds: Bounds) -> dict[str, Any]:
        return _verdict_fields(
            before, generation, base_url, started_at, outcomes, now, release, verdict, bounds
        )

    status = fit(build, json_size)
    return MCPReadinessStatus.model_validate(status).to_patch(), verdict


def verdict_phase(verdict: RunVerdict) -> str:
    """Succeeded when Ready; Inconclusive when nothing could be decided (no failure of the
    release: the machine, too few samples, a busy client); Failed otherwise."""
    if verdict.ready:
        return "Succeeded"
    return "Inconclusive" if verdict.outcome is Verdict.INCONCLUSIVE else "Failed"


def _verdict_fields(
    previous: MCPReadinessStatus,
    generation: int,
    base_url: str,
    started_at: str,
    outcomes: list[CheckOutcome],
    now: str,
    release: Mapping[str, Any] | None,
    verdict: RunVerdict,
    bounds: Bounds,
) -> dict[str, Any]:
    completed = now
    conds = set_condition(
        previous.condition_rows(),
        "Accepted",
        True,
        "SpecAccepted",
        "spec is valid",
        generation,
        now,
    )
    message = shown(verdict.message, bounds.text)
    conds = set_condition(conds, "Ready", verdict.ready, verdict.reason, message, generation, now)
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
    history = [*(h.to_patch() for h in previous.history), record][-MAX_HISTORY:]
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "phase": verdict_phase(verdict),
        "verdict": verdict.outcome.value,
        "score": verdict.score,
        "targetUrl": clip(redact_url(base_url), MAX_URL),
        "startedAt": started_at,
        "completedAt": completed,
        "checks": [check_row(o, bounds) for o in worst_kept(outcomes, MAX_CHECK_HISTORY)],
        "evaluations": previous.evaluations + 1,
        "history": [clip_strings(h, bounds.field) for h in history],
        "conditions": conds,
    }
    if release is not None:
        status["release"] = _release({**release, "completedAt": completed})
    return status


def too_large_status(full: Mapping[str, Any], generation: int, now: str, why: str) -> dict[str, Any]:
    """The verdict without its rows, for when the API server refused ``full`` (a verdict status)
    as too large: the spec leaves the object no room for them. Written once, instead of the
    whole evaluation being retried forever; Ready keeps the verdict's status, its reason says
    what happened and its message keeps the verdict's own reason. A drill's fault journal is kept."""
    kept = {
        "observed_generation",
        "phase",
        "verdict",
        "score",
        "started_at",
        "completed_at",
        "evaluations",
        "history",
        "release",
        "stage",
        "faults",  # a drill's journal: what a restarted operator must not revert again
        "retry",  # with its nextAt null once none is due: left out, an old one would stay due
        "verdict_event",  # the verdict's event, posted again by a new leader if it was lost
    }
    verdict = read_status(full)
    fields = verdict.model_dump(by_alias=True, exclude_unset=True, mode="json", include=kept)
    ready = condition(verdict.conditions, "Ready")
    status = None if ready is None else {"True": True, "False": False}.get(ready.status)
    reason, said = (None, "") if ready is None else (ready.reason, ready.message)
    message = (
        f"{reason}: {clip(said, 384)}; the check rows did not fit in the object and were left out "
        f"({clip(why, 256)})"
    )
    fields["conditions"] = set_condition(
        verdict.condition_rows(), "Ready", status, STATUS_TOO_LARGE, message, generation, now
    )
    fields["checks"] = []
    return MCPReadinessStatus.model_validate(fields).to_patch()


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
    """Status when an evaluation starts: Ready Unknown (Evaluating), and the verdict and score
    of the one before removed (null in the merge patch), so neither a printer column nor a
    ``jsonpath={.status.verdict}=Pass`` wait reads the previous release's verdict as this one's;
    ``status.history`` keeps it."""
    conds = set_condition(conditions, "Accepted", True, "SpecAccepted", "spec is valid", generation, now)
    conds = set_condition(conds, "Ready", None, "Evaluating", message, generation, now)
    fields = {
        "phase": "Running",
        "verdict": None,
        "score": None,
        "targetUrl": redact_url(base_url),
        "startedAt": now,
        "conditions": conds,
    }
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
        "kpis": [{k: redact_text(v) for k, v in row.items()} for row in drill.kpis],
        "faults": drill.journal[-64:],
        "conditions": conds,
    }
    return MCPReadinessStatus.model_validate(fields).to_patch()
