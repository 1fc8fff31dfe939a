"""MCPReadiness status: the API models of what the operator writes.

The fields the release gate reads (the check rows, the release record, the retry, the
conditions, the verdict fields) are declared once, in ``mcp_checks.status``; the models here
derive from those and add what the API server enforces (an unknown field is refused) and the
types of the parts only the operator interprets.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from mcp_checks.models import (
    MAX_CHECK_HISTORY,
    MAX_FINDINGS,
    MAX_HISTORY,
    CheckRow,
    FindingRow,
    ReleaseRow,
    RetryRow,
    StatusPart,
)
from mcp_checks.models import ReadinessStatusView as StatusView
from mcp_common.tolerant import status_in, tolerant

from .common import ApiModel, Condition, Verdict, condition_rows, field_of
from .drill import FaultRecord, KpiRow, Stage, StageSummary

# the phases of an evaluation that completed: Ready, not Ready on a verdict, and not Ready because
# nothing could be decided (an Inconclusive verdict is no failure of the release)
DECIDED_PHASES = ("Succeeded", "Failed", "Inconclusive")

__all__ = [
    "DECIDED_PHASES",
    "MAX_CHECK_HISTORY",
    "MAX_FINDINGS",
    "MAX_HISTORY",
    "XDS_REMEMBERED",
    "CheckResult",
    "EvaluationMarker",
    "EvaluationRecord",
    "Finding",
    "MCPReadinessStatus",
    "ProxySighting",
    "ReleaseRecord",
    "RetryRecord",
    "StaleSighting",
    "StatusGlance",
    "VerdictEventRecord",
    "XdsMemoryStatus",
    "glance",
    "read_status",
    "status_of",
]


class ReleaseRecord(ReleaseRow, ApiModel):
    __doc__ = ReleaseRow.__doc__


class RetryRecord(RetryRow, ApiModel):
    __doc__ = RetryRow.__doc__


class EvaluationRecord(ApiModel):
    """One past evaluation, kept so a flapping gate is visible without a metrics stack."""

    completed_at: str = Field(description="When the evaluation finished (RFC 3339).")
    verdict: Verdict = Field(description="The verdict of that evaluation.")
    score: int = Field(ge=0, le=100, description="Its score.")
    reason: str = Field(description="Reason of its Ready condition.")
    started_at: str | None = Field(default=None, description="When it started (RFC 3339, milliseconds).")
    revision: str | None = Field(default=None, description="The release revision it judged.")
    workload_template_hash: str | None = Field(default=None, description="The pod template it judged.")
    trigger: str | None = Field(default=None, description="Spec, Watch or Recheck.")


class Finding(FindingRow, ApiModel):
    __doc__ = FindingRow.__doc__


class EvaluationMarker(ApiModel):
    """Written before a round starts, so that exactly one round runs per generation (or due
    recheck) even when the operator sees an older copy of the object again or restarts."""

    generation: int = Field(ge=0, description="Spec generation the round evaluates.")
    id: str = Field(description="Identifies the round.")
    instance: str = Field(description="The operator process that runs it.")
    started_at: str = Field(description="When the round was claimed (RFC 3339).")
    fingerprint: str | None = Field(
        default=None, description="The watched fingerprint the round was claimed for (spec.watch)."
    )


class CheckResult(CheckRow, ApiModel):
    __doc__ = CheckRow.__doc__

    findings: list[Finding] = field_of(CheckRow, "findings")  # type: ignore[assignment]


# a schema bound only: the xDS memory keeps the newest sightings within 8 KiB of JSON, far fewer
XDS_REMEMBERED = 1000


class ProxySighting(ApiModel):
    node_id: str = Field(description="The proxy's node ID.", max_length=1024)
    at: float = Field(description="When a source last reported it (Unix seconds).")


class StaleSighting(ApiModel):
    subject: str = Field(description="proxy/type first seen stale.", max_length=1024)
    at: float = Field(description="When this gate first saw it stale (Unix seconds).")


class XdsMemoryStatus(ApiModel):
    """What the xDS check's earlier rounds saw, kept here so a restarted or new leader judges
    as the last one did: a proxy that was there and is gone fails (ProxyDisappeared), and a new
    expectedVersion's staleness counts from when it became expected."""

    proxies_seen: list[ProxySighting] = Field(
        default_factory=list, description="Proxies reported so far.", max_length=XDS_REMEMBERED
    )
    stale_since: list[StaleSighting] = Field(
        default_factory=list,
        description="Stale states first seen, for sources that give no time.",
        max_length=XDS_REMEMBERED,
    )
    expected_version: str | None = Field(
        default=None, description="The expectedVersion last judged.", max_length=512
    )
    expected_version_since: float | None = Field(
        default=None, description="When that version became expected to this gate (Unix seconds)."
    )


class VerdictEventRecord(ApiModel):
    """The event a verdict that is news announces, written in the verdict's own status patch: the
    operator posts it after the write, and a new leader adopting the gate posts it again only if
    it is missing (``readiness.verdictevents``), so a verdict and its event are never apart."""

    type: Literal["Normal", "Warning"] = Field(description="The event's type.")
    reason: str = Field(description="The event's reason (Ready, or the verdict's reason).", max_length=1024)
    message: str = Field(description="The event's message, redacted and cut as posted.", max_length=1024)
    time: str = Field(description="When the verdict was decided (RFC 3339): the event's timestamp.")


class MCPReadinessStatus(StatusView, ApiModel):
    checks: list[CheckResult] = field_of(StatusView, "checks")  # type: ignore[assignment]
    plan: list[Stage] = field_of(StatusView, "plan")
    stages: list[StageSummary] = field_of(StatusView, "stages")
    faults: list[FaultRecord] = field_of(StatusView, "faults")
    kpis: list[KpiRow] = field_of(StatusView, "kpis")
    evaluation: EvaluationMarker | None = field_of(StatusView, "evaluation")
    release: ReleaseRecord | None = field_of(StatusView, "release")
    retry: RetryRecord | None = field_of(StatusView, "retry")
    history: list[EvaluationRecord] = field_of(StatusView, "history")
    xds_memory: XdsMemoryStatus | None = field_of(StatusView, "xds_memory")
    verdict_event: VerdictEventRecord | None = field_of(StatusView, "verdict_event")
    conditions: list[Condition] = field_of(StatusView, "conditions")  # type: ignore[assignment]

    # the parts the status builders extend, as the status held them (``conditions``, the journal)
    def condition_rows(self) -> list[dict[str, Any]]:
        return condition_rows(self.conditions)

    def fault_rows(self) -> list[dict[str, Any]]:
        return [f.to_patch() for f in self.faults]

    def stage_rows(self) -> list[dict[str, Any]]:
        return [s.to_patch() for s in self.stages]


class StatusGlance(StatusPart):
    """The fields the handlers' filters read on every event of every gate, declared as
    ``MCPReadinessStatus`` declares them; nothing else of the status is parsed (cheap at scale)."""

    phase: str | None = field_of(StatusView, "phase")
    retry: RetryRecord | None = field_of(StatusView, "retry")
    faults: list[FaultRecord] = field_of(StatusView, "faults")

    @property
    def retry_pending(self) -> bool:
        """A decided verdict has a retry scheduled (``readiness.retry``)."""
        return self.retry is not None and bool(self.retry.next_at) and self.phase in DECIDED_PHASES

    @property
    def revert_failed(self) -> bool:
        return any(f.phase == "RevertFailed" for f in self.faults)


def glance(status: Mapping[str, Any]) -> StatusGlance:
    """``StatusGlance`` of kopf's ``status``: what a filter may look at (tolerant, as ``read_status``)."""
    return tolerant(StatusGlance, status)


def status_of(obj: Mapping[str, Any]) -> MCPReadinessStatus:
    """A gate's status as the API server returned the object, read through its model: tolerant
    of what an older or newer operator wrote (``tolerant``), empty where there is none yet."""
    return status_in(obj, MCPReadinessStatus)


def read_status(status: Mapping[str, Any]) -> MCPReadinessStatus:
    """A gate's status (kopf's ``status``, or a status a round is building) through its model."""
    return tolerant(MCPReadinessStatus, status)
