"""MCPReadiness status as its readers see it: the typed models of the parts the release gate
reads (the check rows, the release record, the retry, the conditions, the verdict fields).

Each status field is declared here once, with its description and bounds; the operator's API
models (``mcp_operator.api.readinessstatus``) derive from these and add only what the API
server enforces (unknown fields refused, the operator's own row types). A reader here is
tolerant: fields it does not know (a newer operator's) are ignored, and the parts of status it
does not interpret (a drill's board, the round marker) are carried as JSON. Standard library
and pydantic only: the API models import this module, and they must not import the
Kubernetes client.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from .verdict import CheckOutcome, Finding, Verdict

__all__ = [
    "MAX_CHECK_HISTORY",
    "MAX_FINDINGS",
    "MAX_HISTORY",
    "CheckRow",
    "ConditionRow",
    "FindingRow",
    "ObjectMetaView",
    "ReadinessObject",
    "ReadinessStatusView",
    "ReleaseRow",
    "RetryRow",
    "SpecView",
]

MAX_CHECK_HISTORY = 128  # checks, KPI rows (one recovery row per fault) and refused faults
MAX_HISTORY = 10
MAX_FINDINGS = 20
Json = Any  # a part of status the operator's API model types (JSON to this package)


class StatusPart(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are ignored (a newer writer's)."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )


class FindingRow(StatusPart):
    """One observation behind a check's verdict: a proxy out of sync, a pod on an old hash."""

    subject: str = Field(description="What the finding is about.")
    verdict: Verdict = Field(description="What it means for the check.")
    reason: str = Field(description="CamelCase reason.")
    observed: str = Field(description="The value observed.")
    threshold: str = Field(default="", description="The value required.")
    source: str = Field(default="", description="Where it was read.")

    def finding(self) -> Finding:
        return Finding(
            self.subject, Verdict(self.verdict), self.reason, self.observed, self.threshold, self.source
        )


class CheckRow(StatusPart):
    """One row of the verdict table."""

    name: str = Field(description="Check name, e.g. health-probe.")
    verdict: Verdict = Field(description="Pass, Warn, Inconclusive, Fail or Error.")
    reason: str = Field(description="CamelCase reason.")
    message: str = Field(default="", description="What was observed against what was required.")
    observed: dict[str, str] = Field(
        default_factory=dict, description="Measured figures, as strings with units."
    )
    thresholds: dict[str, str] = Field(default_factory=dict, description="Thresholds applied.")
    measured_at: str = Field(description="When the check finished (RFC 3339).")
    duration_ms: int | None = Field(default=None, ge=0, description="How long the check took.")
    source: str | None = Field(
        default=None,
        description="Where the check read its data (a URL with credentials redacted, an object).",
    )
    findings: list[FindingRow] = Field(
        default_factory=list,
        description=f"The observations behind the verdict, worst first (at most {MAX_FINDINGS}).",
        max_length=MAX_FINDINGS,
    )
    findings_total: int | None = Field(default=None, ge=0, description="Findings before the list was cut.")

    def outcome(self) -> CheckOutcome:
        """The row as the check outcome it was written from."""
        return CheckOutcome(
            name=self.name,
            outcome=Verdict(self.verdict),
            reason=self.reason,
            message=self.message,
            observed=dict(self.observed),
            thresholds=dict(self.thresholds),
            measured_at=self.measured_at,
            source=self.source or "",
            findings=[f.finding() for f in self.findings],
            duration_s=None if self.duration_ms is None else self.duration_ms / 1000,
        )


class ConditionRow(StatusPart):
    """A Kubernetes-convention condition."""

    type: str = Field(description="Condition type, e.g. Ready or Accepted.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(description="CamelCase reason for the last transition.")
    message: str = Field(default="", description="Human readable explanation.")
    last_transition_time: str = Field(description="When status last changed (RFC 3339).")
    observed_generation: int | None = Field(default=None, description="Generation the condition reflects.")


class ReleaseRow(StatusPart):
    """What one evaluation judged, and when it started: written when the round is claimed and
    again with the verdict (then with what the settled rollout showed)."""

    revision: str | None = Field(
        default=None,
        description="spec.release, or else the watched Application's status.sync.revision.",
    )
    workload: str | None = Field(default=None, description="The watched workload, as Kind/name.")
    workload_template_hash: str | None = Field(
        default=None,
        description="sha256 (16 hex digits) of the workload's .spec.template; absent when it does not exist.",
    )
    application_revision: str | None = Field(
        default=None, description="The watched Application's status.sync.revision."
    )
    fingerprint: str | None = Field(
        default=None,
        description="Digest of what spec.watch observes; a change starts a new evaluation.",
    )
    trigger: str = Field(
        description="What started the evaluation: Spec (created, changed or resumed), Watch (the "
        "fingerprint changed) or Recheck (recheckIntervalSeconds)."
    )
    generation: int = Field(ge=0, description="Spec generation evaluated.")
    started_at: str = Field(description="When the evaluation started (RFC 3339, milliseconds).")
    completed_at: str | None = Field(
        default=None, description="When its verdict was written (RFC 3339); absent while it runs."
    )


class RetryRow(StatusPart):
    """A verdict that was the operator's own doing (its prober overloaded, a probe round timed
    out in its queue) is evaluated again after a bounded backoff (``readiness.retry``)."""

    attempts: int = Field(ge=0, description="Rounds evaluated again so far for this verdict's cause.")
    next_at: str | None = Field(
        default=None, description="When the next one is due (RFC 3339); absent: no more, the verdict stands."
    )
    reason: str = Field(default="", description="Why it is (or was) evaluated again, e.g. ProberOverloaded.")


class ReadinessStatusView(StatusPart):
    """``status`` of an MCPReadiness. The parts typed as JSON here (a drill's plan and board,
    the round marker, the history, the xDS memory, the verdict's event) are the operator's own:
    its API model types them, in the same place."""

    observed_generation: int | None = Field(default=None, description="Generation the verdict reflects.")
    phase: str | None = Field(
        default=None,
        description="Pending, Running, Succeeded, Failed, Inconclusive, Invalid, Suspended or Aborted.",
    )
    verdict: Verdict | None = Field(
        default=None,
        description="Worst verdict over all checks; absent while an evaluation that turned Ready Unknown "
        "runs (history keeps the previous one's).",
    )
    score: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Share of checks passed, 0-100; absent while such an evaluation runs.",
    )
    target_url: str | None = Field(default=None, description="URL the checks ran against.")
    started_at: str | None = Field(default=None, description="Start of the last evaluation.")
    completed_at: str | None = Field(default=None, description="End of the last evaluation.")
    checks: list[CheckRow] = Field(
        default_factory=list, description="One row per check.", max_length=MAX_CHECK_HISTORY
    )
    evaluations: int = Field(
        default=0, ge=0, description="Evaluations of this resource so far: every round that ran is counted."
    )
    stage: str | None = Field(default=None, description="The drill's stage now, as i/n (printer column).")
    plan: list[Json] = Field(
        default_factory=list, description="The drill's stages as they run (a profile expanded).", max_length=8
    )
    stages: list[Json] = Field(
        default_factory=list, description="Per-stage load figures of the drill.", max_length=8
    )
    faults: list[Json] = Field(
        default_factory=list,
        description="The fault journal: every fault, written before it is applied, and its revert.",
        max_length=64,
    )
    kpis: list[Json] = Field(
        default_factory=list, description="The KPI board (one recoverySeconds row per fault).", max_length=96
    )
    evaluation: Json | None = Field(
        default=None, description="The round claimed last (in progress while phase is Running)."
    )
    gated_pods: int | None = Field(
        default=None, ge=0, description="Pods that carry the gate condition (spec.podReadinessGate)."
    )
    release: ReleaseRow | None = Field(
        default=None, description="What the last evaluation judged (in progress while phase is Running)."
    )
    retry: RetryRow | None = Field(
        default=None,
        description="An operator-caused verdict evaluated again (ProberOverloaded, CheckTimedOut).",
    )
    history: list[Json] = Field(
        default_factory=list,
        description=f"The last {MAX_HISTORY} evaluations, newest last.",
        max_length=MAX_HISTORY,
    )
    xds_memory: Json | None = Field(
        default=None, description="What the xDS check saw in earlier rounds (spec.checks.xdsSync)."
    )
    verdict_event: Json | None = Field(
        default=None,
        description="The event the last verdict that was news announced (type, reason, message, time), "
        "written with the verdict: a new leader posts it if the operator died before it did.",
    )
    conditions: list[ConditionRow] = Field(default_factory=list, description="Ready and Accepted conditions.")

    def condition(self, kind: str) -> ConditionRow | None:
        """The condition of this type (Ready, Accepted), if written."""
        return next((c for c in self.conditions if c.type == kind), None)

    def outcomes(self) -> list[CheckOutcome]:
        """The verdict table's rows as the check outcomes they were written from."""
        return [row.outcome() for row in self.checks]

    @classmethod
    def read(cls, status: Mapping[str, Any] | None) -> Self:
        """``status`` as ``kubectl get -o json`` gives it (absent: nothing written yet). Strict, unlike
        the operator's own reads (``mcp_common.tolerant``): a row the gate cannot read is never left
        out, since the rows left would be judged as if they were all."""
        return cls.model_validate(status or {})


class ObjectMetaView(StatusPart):
    generation: int | None = None
    resource_version: str | None = None


class SpecView(StatusPart):
    """What a status reader needs of the spec: whether anything will evaluate it again. None:
    not set (the API model holds the defaults)."""

    suspend: bool | None = None
    watch: Json | None = None
    recheck_interval_seconds: int | None = None


class ReadinessObject(StatusPart):
    """An MCPReadiness as the API server returns it, read for its verdict. A status that does not
    read as one (not the schema this package knows) is left empty, with ``unreadable`` saying why,
    so a reader waits for the next write instead of failing."""

    metadata: ObjectMetaView = Field(default_factory=ObjectMetaView)
    spec: SpecView = Field(default_factory=SpecView)
    status: ReadinessStatusView = Field(default_factory=ReadinessStatusView)
    unreadable: str | None = Field(default=None, exclude=True)

    @classmethod
    def read(cls, obj: Mapping[str, Any]) -> ReadinessObject:
        meta = ObjectMetaView.model_validate(obj.get("metadata") or {})
        spec = SpecView.model_validate(obj.get("spec") or {})
        try:
            status = ReadinessStatusView.read(obj.get("status"))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:3]
            )
            return cls(metadata=meta, spec=spec, unreadable=f"status unreadable ({problems})")
        return cls(metadata=meta, spec=spec, status=status)
