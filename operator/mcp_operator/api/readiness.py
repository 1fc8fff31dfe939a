"""MCPReadiness: a production readiness gate with a ``Ready`` condition others can wait on."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from mcp_checks.specs import ConfigConsistency, HealthProbe, MetricDrift, XdsSync, default_of
from mcp_checks.specs import PrometheusRulesRef as PrometheusRules
from mcp_checks.specs import RuleReference as RuleRef
from mcp_checks.specs import XdsProxies as Proxies
from mcp_checks.specs import XdsSourceRef as XdsSource

from .common import ApiModel, Condition, LabelValue, TargetRef, Verdict, cel, with_rules
from .credentials import no_credentials, no_credentials_in_query, rules_extra
from .drill import DrillSpec, FaultRecord, KpiRow, Stage, StageSummary
from .ports import port_in_range

KIND = "MCPReadiness"
PLURAL = "mcpreadinesses"
MAX_CHECK_HISTORY = 128  # checks, KPI rows (one recovery row per fault) and refused faults
MAX_HISTORY = 10
# the phases of an evaluation that completed: Ready, not Ready on a verdict, and not Ready because
# nothing could be decided (an Inconclusive verdict is no failure of the release)
DECIDED_PHASES = ("Succeeded", "Failed", "Inconclusive")
MAX_FINDINGS = 20


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


class HealthProbeCheck(HealthProbe, ApiModel):
    """An HTTP health probe round (fields and defaults: ``mcp_checks.specs.HealthProbe``), plus the
    rules the API server enforces."""

    model_config = with_rules(
        cel(
            "!has(self.maxP50Ms) || !has(self.maxP99Ms) || self.maxP50Ms <= self.maxP99Ms",
            "maxP50Ms must not exceed maxP99Ms",
            ".maxP50Ms",
        ),
        cel(
            "!has(self.maxP99Ms) || self.maxP99Ms <= double(self.timeoutMs)",
            "maxP99Ms must not exceed timeoutMs (a request slower than the timeout fails anyway)",
            ".maxP99Ms",
        ),
    )

    path: str = Field(
        default=str(default_of(HealthProbe, "path")),
        description=HealthProbe.model_fields["path"].description,
        pattern=r"^/",
        max_length=1024,
        json_schema_extra=rules_extra(no_credentials_in_query("healthProbe path")),
    )


class XdsSourceRef(XdsSource, ApiModel):
    address: str = Field(
        description=XdsSource.model_fields["address"].description,
        min_length=1,
        max_length=2048,
        json_schema_extra=rules_extra(
            no_credentials("xDS source address"), port_in_range("xDS source address")
        ),
    )


class XdsProxies(Proxies, ApiModel):
    __doc__ = Proxies.__doc__


class XdsSyncCheck(XdsSync, ApiModel):
    __doc__ = XdsSync.__doc__

    sources: list[XdsSourceRef] = Field(  # type: ignore[assignment]
        description=XdsSync.model_fields["sources"].description, min_length=1, max_length=16
    )
    proxies: XdsProxies | None = Field(default=None, description=XdsSync.model_fields["proxies"].description)


class ConfigConsistencyCheck(ConfigConsistency, ApiModel):
    __doc__ = ConfigConsistency.__doc__

    model_config = with_rules(
        cel(
            "(has(self.configMaps) && size(self.configMaps) > 0) || "
            "(has(self.secrets) && size(self.secrets) > 0)",
            "name at least one ConfigMap or Secret to hash",
        ),
    )


class PrometheusRulesRef(PrometheusRules, ApiModel):
    __doc__ = PrometheusRules.__doc__

    model_config = with_rules(
        cel("!has(self.name) || !has(self.selector)", "set at most one of name and selector"),
    )


class RuleReference(RuleRef, ApiModel):
    __doc__ = RuleRef.__doc__

    model_config = with_rules(
        cel(
            "has(self.prometheusRules) != has(self.configMap)",
            "set exactly one of prometheusRules and configMap",
        ),
    )

    prometheus_rules: PrometheusRulesRef | None = Field(
        default=None, description=RuleRef.model_fields["prometheus_rules"].description
    )


class MetricDriftCheck(MetricDrift, ApiModel):
    __doc__ = MetricDrift.__doc__

    model_config = with_rules(
        cel(
            "!has(self.warnThreshold) || self.warnThreshold < self.threshold",
            "warnThreshold must be below threshold",
            ".warnThreshold",
        ),
    )

    prometheus_url: str = Field(
        description=MetricDrift.model_fields["prometheus_url"].description,
        pattern=r"^https?://[^\s/]+(/.*)?$",
        max_length=2048,
        json_schema_extra=rules_extra(no_credentials("prometheusUrl"), port_in_range("prometheusUrl")),
    )
    reference: RuleReference | None = Field(
        default=None, description=MetricDrift.model_fields["reference"].description
    )


class ReadinessChecks(ApiModel):
    """The assertions of one evaluation; they run concurrently, each within its own timeout,
    and the verdict is the worst of them."""

    health_probe: HealthProbeCheck | None = Field(
        default_factory=HealthProbeCheck, description="HTTP health probe; on by default."
    )
    xds_sync: XdsSyncCheck | None = Field(default=None, description="Envoy xDS sync of the target's proxies.")
    config_consistency: ConfigConsistencyCheck | None = Field(
        default=None, description="Config hash against what runs and what Argo CD synced."
    )
    metric_drift: MetricDriftCheck | None = Field(
        default=None, description="Prometheus recording-rule drift against the raw expressions."
    )


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


class WatchedApplication(ApiModel):
    name: str = Field(description="Argo CD Application name.", min_length=1, max_length=253)
    namespace: str = Field(default="argocd", description="Namespace of the Application.", max_length=63)


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


class ReleaseRecord(ApiModel):
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


class RetryRecord(ApiModel):
    """A verdict that was the operator's own doing (its prober overloaded, a probe round timed
    out in its queue) is evaluated again after a bounded backoff (``readiness.retry``)."""

    attempts: int = Field(ge=0, description="Rounds evaluated again so far for this verdict's cause.")
    next_at: str | None = Field(
        default=None, description="When the next one is due (RFC 3339); absent: no more, the verdict stands."
    )
    reason: str = Field(default="", description="Why it is (or was) evaluated again, e.g. ProberOverloaded.")


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


class Finding(ApiModel):
    """One observation behind a check's verdict: a proxy out of sync, a pod on an old hash."""

    subject: str = Field(description="What the finding is about.")
    verdict: Verdict = Field(description="What it means for the check.")
    reason: str = Field(description="CamelCase reason.")
    observed: str = Field(description="The value observed.")
    threshold: str = Field(default="", description="The value required.")
    source: str = Field(default="", description="Where it was read.")


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


class CheckResult(ApiModel):
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
    findings: list[Finding] = Field(
        default_factory=list,
        description=f"The observations behind the verdict, worst first (at most {MAX_FINDINGS}).",
        max_length=MAX_FINDINGS,
    )
    findings_total: int | None = Field(default=None, ge=0, description="Findings before the list was cut.")


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


class MCPReadinessStatus(ApiModel):
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
    checks: list[CheckResult] = Field(
        default_factory=list, description="One row per check.", max_length=MAX_CHECK_HISTORY
    )
    evaluations: int = Field(
        default=0, ge=0, description="Evaluations of this resource so far: every round that ran is counted."
    )
    stage: str | None = Field(default=None, description="The drill's stage now, as i/n (printer column).")
    plan: list[Stage] = Field(
        default_factory=list, description="The drill's stages as they run (a profile expanded).", max_length=8
    )
    stages: list[StageSummary] = Field(
        default_factory=list, description="Per-stage load figures of the drill.", max_length=8
    )
    faults: list[FaultRecord] = Field(
        default_factory=list,
        description="The fault journal: every fault, written before it is applied, and its revert.",
        max_length=64,
    )
    kpis: list[KpiRow] = Field(
        default_factory=list, description="The KPI board (one recoverySeconds row per fault).", max_length=96
    )
    evaluation: EvaluationMarker | None = Field(
        default=None, description="The round claimed last (in progress while phase is Running)."
    )
    gated_pods: int | None = Field(
        default=None, ge=0, description="Pods that carry the gate condition (spec.podReadinessGate)."
    )
    release: ReleaseRecord | None = Field(
        default=None, description="What the last evaluation judged (in progress while phase is Running)."
    )
    retry: RetryRecord | None = Field(
        default=None,
        description="An operator-caused verdict evaluated again (ProberOverloaded, CheckTimedOut).",
    )
    history: list[EvaluationRecord] = Field(
        default_factory=list,
        description=f"The last {MAX_HISTORY} evaluations, newest last.",
        max_length=MAX_HISTORY,
    )
    xds_memory: XdsMemoryStatus | None = Field(
        default=None, description="What the xDS check saw in earlier rounds (spec.checks.xdsSync)."
    )
    conditions: list[Condition] = Field(default_factory=list, description="Ready and Accepted conditions.")


class MCPReadiness(ApiModel):
    """A whole MCPReadiness as a manifest holds it, for checking manifest files offline."""

    api_version: str = Field(alias="apiVersion")
    kind: str
    metadata: dict[str, object]
    spec: MCPReadinessSpec
    status: MCPReadinessStatus | None = None
