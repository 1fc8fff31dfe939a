"""MCPReadiness: a production readiness gate with a ``Ready`` condition others can wait on."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mcp_checks.models import ApplicationRef

from .common import ApiModel, LabelValue, TargetRef, cel, with_rules
from .credentials import no_credentials, rules_extra
from .drill import DrillSpec
from .ports import port_in_range
from .readinesschecks import (
    ConfigConsistencyCheck,
    HealthProbeCheck,
    MetricDriftCheck,
    PrometheusRulesRef,
    ReadinessChecks,
    RuleReference,
    XdsProxies,
    XdsSourceRef,
    XdsSyncCheck,
)
from .readinessstatus import (
    DECIDED_PHASES,
    MAX_CHECK_HISTORY,
    MAX_FINDINGS,
    MAX_HISTORY,
    XDS_REMEMBERED,
    CheckResult,
    EvaluationMarker,
    EvaluationRecord,
    Finding,
    MCPReadinessStatus,
    ProxySighting,
    ReleaseRecord,
    RetryRecord,
    StaleSighting,
    VerdictEventRecord,
    XdsMemoryStatus,
)

__all__ = [  # the spec here, its checks and status from the modules beside it
    "DECIDED_PHASES",
    "KIND",
    "MAX_CHECK_HISTORY",
    "MAX_FINDINGS",
    "MAX_HISTORY",
    "PLURAL",
    "XDS_REMEMBERED",
    "CheckResult",
    "ConfigConsistencyCheck",
    "EvaluationMarker",
    "EvaluationRecord",
    "Finding",
    "HealthProbeCheck",
    "MCPReadiness",
    "MCPReadinessSpec",
    "MCPReadinessStatus",
    "MetricDriftCheck",
    "PodReadinessGate",
    "PrometheusRulesRef",
    "ProxySighting",
    "ReadinessChecks",
    "ReadinessTarget",
    "ReleaseRecord",
    "ReleaseWatch",
    "RetryRecord",
    "RuleReference",
    "StaleSighting",
    "VerdictEventRecord",
    "WatchedApplication",
    "WatchedWorkload",
    "XdsMemoryStatus",
    "XdsProxies",
    "XdsSourceRef",
    "XdsSyncCheck",
]

KIND = "MCPReadiness"
PLURAL = "mcpreadinesses"


class ReadinessTarget(ApiModel):
    """What to assess: a base URL, or an in-cluster Service the operator resolves."""

    model_config = with_rules(
        cel("has(self.url) != has(self.serviceRef)", "set exactly one of url and serviceRef"),
    )

    url: str | None = Field(
        default=None,
        description="Base URL of the inference service, e.g. http://triton.default.svc:8000. It must not "
        "carry credentials (user:password@, or a token-like or percent-encoded query parameter name): such a "
        "URL is refused (CredentialsInUrl).",
        pattern=r"^https?://[^\s/]+(/.*)?$",
        max_length=2048,
        json_schema_extra=rules_extra(no_credentials("url"), port_in_range("url")),
    )
    service_ref: TargetRef | None = Field(default=None, description="In-cluster Service to assess.")


class PodReadinessGate(ApiModel):
    """Mirror the verdict into a condition of matching pods, so a Pod ``readinessGates`` entry
    holds those pods out of Service endpoints (and a rollout) until the gate passes."""

    match_labels: dict[str, LabelValue] = Field(
        description="Pods in this resource's namespace with all of these labels get the condition.",
        min_length=1,
    )
    condition_type: str = Field(
        default="mcp2026.io/ready",
        description="Condition type written on the pods; name it in the pods' spec.readinessGates.",
        pattern=r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$",
        max_length=316,
    )


class WatchedWorkload(ApiModel):
    kind: Literal["Deployment"] = Field(default="Deployment", description="Workload kind.")
    name: str = Field(
        description="Deployment name, in this resource's namespace.", min_length=1, max_length=253
    )


class WatchedApplication(ApplicationRef, ApiModel):
    pass


class ReleaseWatch(ApiModel):
    """What the gate gates: when the workload's pod template or the Application's synced
    revision changes, a new evaluation starts (Ready is Unknown until it has a verdict), and
    every evaluation first waits for the workload's rollout to settle, so the checks judge the
    pods of the release they are recorded for."""

    model_config = with_rules(
        cel(
            "has(self.workload) || has(self.application)",
            "watch at least one of workload and application",
        ),
    )

    workload: WatchedWorkload | None = Field(
        default=None,
        description="The Deployment whose pod template (hashed) makes a release; its rollout is awaited.",
    )
    application: WatchedApplication | None = Field(
        default=None,
        description="An Argo CD Application whose status.sync.revision makes a release; awaited until "
        "Synced.",
    )
    settle_timeout_seconds: int = Field(
        default=300,
        ge=0,
        le=3600,
        description="How long an evaluation waits for the rollout (and the Application's Synced) before "
        "it runs the checks anyway, with a rollout row that is Inconclusive (RolloutNotSettled).",
    )

    @model_validator(mode="after")
    def _something_watched(self) -> ReleaseWatch:
        if self.workload is None and self.application is None:
            raise ValueError("watch at least one of workload and application")
        return self


class MCPReadinessSpec(ApiModel):
    model_config = with_rules(
        cel("!has(self.watch) || !has(self.drill)", "watch cannot be combined with drill", ".watch"),
    )

    target: ReadinessTarget = Field(description="The service under assessment.")
    checks: ReadinessChecks = Field(default_factory=ReadinessChecks, description="Assertions to run.")
    suspend: bool = Field(default=False, description="When true, nothing runs and the verdict is left as is.")
    recheck_interval_seconds: int | None = Field(
        default=None,
        ge=10,
        le=86400,
        description="Evaluate again this long after the last verdict (a standing gate); unset evaluates "
        "once per spec generation.",
    )
    pod_readiness_gate: PodReadinessGate | None = Field(
        default=None, description="Pods whose readiness follows this gate's verdict."
    )
    drill: DrillSpec | None = Field(
        default=None,
        description="Staged load and fault drills judged on a KPI board; the checks run after the last "
        "stage.",
    )
    release: str | None = Field(
        default=None,
        description="The release this gate judges, set by the GitOps tool per sync (e.g. the Argo CD "
        "revision through a Helm or kustomize value); a change is a spec change, so it is evaluated "
        "again. Recorded in status.release.revision, which `mcp-check gate --release` waits for.",
        max_length=256,
    )
    watch: ReleaseWatch | None = Field(
        default=None,
        description="Evaluate again when the gated workload's pod template or an Argo CD Application's "
        "synced revision changes, even when this resource does not.",
    )

    @model_validator(mode="after")
    def _watch_without_drill(self) -> MCPReadinessSpec:
        if self.watch is not None and self.drill is not None:
            raise ValueError("watch cannot be combined with drill")
        return self


class MCPReadiness(ApiModel):
    """A whole MCPReadiness as a manifest holds it, for checking manifest files offline."""

    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: dict[str, object]
    spec: MCPReadinessSpec
    status: MCPReadinessStatus | None = None
