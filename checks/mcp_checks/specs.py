"""The typed specs of mcp_checks' checks and their defaults, written once.

The operator's CRD models (``mcp_operator.api.readiness``) derive from these and add only what
the API server enforces (CEL rules, credential rules); mcp_checks' planner reads a manifest's
check entries through them, so a default lives here and nowhere else. An unknown field is an
error, as the API server has it (a misspelt threshold must never fall back to its default).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from mcp_common.labels import LabelValue

from .defaults import (
    ARGO_CD_NAMESPACE,
    CONFIG_TIMEOUT_S,
    DEFAULT_ANNOTATION,
    DEFAULT_THRESHOLD,
    DRIFT_TIMEOUT_S,
    MAX_XDS_SOURCES,
    XDS_GRACE_S,
    XDS_TIMEOUT_S,
    XDS_TYPES,
)

__all__ = [
    "ApplicationRef",
    "ArgoApplication",
    "CheckSpec",
    "ConfigConsistency",
    "HealthProbe",
    "MetricDrift",
    "PrometheusRulesRef",
    "RecordingRuleRef",
    "RuleReference",
    "RulesConfigMapRef",
    "WorkloadRef",
    "XdsProxies",
    "XdsSourceRef",
    "XdsSync",
    "default_of",
]


class CheckSpec(BaseModel):
    """camelCase on the wire, snake_case in Python; unknown fields are errors, not dropped."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True
    )


class HealthProbe(CheckSpec):
    """An HTTP health probe round: success ratio and latency percentiles against thresholds."""

    enabled: bool = Field(
        default=True, description="The probe runs unless this is false (it is on by default for every gate)."
    )
    path: str = Field(
        default="/health",
        description="Path probed on the target; its query must not carry credentials (CredentialsInUrl).",
        pattern=r"^/",
        max_length=1024,
    )
    requests: int = Field(
        default=10000,
        ge=1,
        le=100000,
        description="Probe requests in one round; enough to verify minSuccessRatio (1/(1-ratio)).",
    )
    concurrency: int = Field(default=8, ge=1, le=256, description="Requests in flight at once.")
    timeout_ms: int = Field(default=1000, ge=1, le=60000, description="Per-request timeout.")
    expected_status: list[Annotated[int, Field(ge=100, le=599)]] = Field(
        default_factory=lambda: [200],
        description="HTTP status codes that count as success (100-599).",
        min_length=1,
        max_length=32,
    )
    min_success_ratio: float = Field(
        default=0.9999,
        ge=0.5,
        le=1.0,
        description="Lowest acceptable share of successful probes, at least 0.5 (below, a failing server "
        "passes). It must be verifiable: requests >= 1/(1-ratio), so 1.0 never is (ImpossibleThreshold).",
    )
    max_p50_ms: float | None = Field(default=None, gt=0, description="Highest acceptable median latency.")
    max_p99_ms: float | None = Field(default=500.0, gt=0, description="Highest acceptable P99 latency.")
    max_round_ms: float | None = Field(
        default=None, gt=0, description="Highest acceptable wall time of the whole probe round."
    )
    warn_success_ratio: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Warn band: a success share at or above minSuccessRatio but below this is Warn "
        "(Ready stays True, with the reason NearThreshold).",
    )
    warn_p99_ms: float | None = Field(
        default=None, gt=0, description="Warn band: a P99 at or below maxP99Ms but above this is Warn."
    )
    max_prober_lag_ms: float | None = Field(
        default=None,
        gt=0,
        le=10000,
        description="The prober's own event-loop lag (P99) above which a breach it saw is no evidence: "
        "Inconclusive (ProberOverloaded), never Fail (a pass stands: lag only inflates figures). Default: a "
        "tenth of the tightest latency limit, at least 10 ms (50 ms for the default maxP99Ms of 500).",
    )


class XdsSourceRef(CheckSpec):
    kind: Literal["csds", "syncz", "envoyAdmin"] = Field(
        description="csds: a control plane's or client's CSDS gRPC service (host:port, plaintext); syncz: "
        "istiod's debug endpoint (http://istiod:15014); envoyAdmin: an Envoy admin endpoint (http://pod:15000)."
    )
    address: str = Field(
        description="host:port for csds, a base URL otherwise; without credentials (CredentialsInUrl).",
        min_length=1,
        max_length=2048,
    )


class XdsProxies(CheckSpec):
    """Which proxies must have acknowledged the configuration: listed node IDs, or the Running
    pods of this namespace that the labels (or a Service's selector) select, named by
    nodeIdTemplate."""

    ids: list[str] | None = Field(default=None, description="Node IDs, as the control plane reports them.")
    match_labels: dict[str, LabelValue] | None = Field(
        default=None, description="Pods of the target, by label."
    )
    service: str | None = Field(
        default=None, description="Pods of the target, as this Service of the namespace selects them."
    )
    node_id_template: str = Field(
        default="{pod}.{namespace}",
        description="A selected pod's node ID from {pod}, {namespace} and {ip} (Istio: {pod}.{namespace}).",
        max_length=512,
    )


class XdsSync(CheckSpec):
    """Every proxy of the target acknowledged what its control plane last sent: a NACK fails,
    stale within graceSeconds has not converged yet (Inconclusive) and fails after, no answer is
    Inconclusive. Who should be there comes from proxies or minProxies, never from the answer
    judged: with neither, the check cannot pass (NoExpectedProxies)."""

    # at least one in the CRD (``mcp_operator.api``); mcp-check takes a manifest without
    sources: list[XdsSourceRef] = Field(description="Where to read sync state.", max_length=MAX_XDS_SOURCES)
    proxies: XdsProxies | None = Field(
        default=None,
        description="Proxies that must be synced: named, or the ready pods of the target. Unset: every proxy "
        "the sources report is judged, but only minProxies can let that pass.",
    )
    min_proxies: int | None = Field(
        default=None,
        ge=0,
        le=100000,
        description="At least this many proxies must be reported (TooFewProxies below it); 0 lets a source "
        "that reports none pass. Without proxies or minProxies nothing independent says who should be there, "
        "so the check is Inconclusive (NoExpectedProxies, or NoProxiesReported for none).",
    )
    types: list[Literal["LDS", "RDS", "CDS", "EDS"]] = Field(
        default_factory=lambda: list(XDS_TYPES),  # type: ignore[arg-type]
        description="xDS types that must be synced.",
        min_length=1,
    )
    expected_version: str | None = Field(
        default=None,
        max_length=512,
        description="When set, a proxy ACKed on another version counts as stale, and one that ACKed no "
        "version is Inconclusive (VersionNotReported); staleness counts from when this version became "
        "expected.",
    )
    grace_seconds: float = Field(
        default=XDS_GRACE_S,
        ge=0,
        le=3600,
        description="Stale for less than this has not converged yet (Inconclusive, never a Warn); longer "
        "fails.",
    )
    timeout_seconds: float = Field(default=XDS_TIMEOUT_S, gt=0, le=300, description="Per source call.")
    wait_seconds: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="Poll until every proxy is synced, any look fails, or this many seconds pass "
        "(ConvergenceTimeout); 0: one look per evaluation.",
    )


def default_of(model: type[BaseModel], field: str) -> object:
    """A field's one default (its factory called, for list defaults)."""
    return model.model_fields[field].get_default(call_default_factory=True)


class WorkloadRef(CheckSpec):
    kind: Literal["Deployment", "StatefulSet"] = Field(default="Deployment", description="Workload kind.")
    name: str = Field(
        description="Workload name, in this resource's namespace.", min_length=1, max_length=253
    )


class ApplicationRef(CheckSpec):
    # no docstring: a model's docstring is its schema description, and its subclasses have none
    name: str = Field(description="Argo CD Application name.", min_length=1, max_length=253)
    namespace: str = Field(
        default=ARGO_CD_NAMESPACE, description="Namespace of the Application.", max_length=63
    )


class ArgoApplication(ApplicationRef):
    expected_revision: str | None = Field(
        default=None, description="Revision that must be synced; default: the Application's full-SHA target."
    )
    gate_wave: int | None = Field(
        default=None,
        description="Sync wave of this gate: resources of earlier waves must be Synced and Healthy.",
    )
    gate_resource: str | None = Field(
        default=None,
        description="Kind/name of the gate itself in the Application (left out of the wave test).",
    )


class ConfigConsistency(CheckSpec):
    """The content hash of the named ConfigMaps and Secrets equals the checksum annotation on
    the workload's pod template and on every ready pod of its current revision, no older
    revision still serves, and (when named) Argo CD synced the expected revision. Secret values
    are hashed, never copied: only a hash prefix appears anywhere."""

    workload: WorkloadRef = Field(description="The workload that mounts the config.")
    config_maps: list[str] = Field(
        default_factory=list, description="ConfigMaps hashed, by name.", max_length=64
    )
    secrets: list[str] = Field(default_factory=list, description="Secrets hashed, by name.", max_length=64)
    annotation: str = Field(
        default=DEFAULT_ANNOTATION,
        description="Pod-template annotation holding the hash (Helm convention).",
        min_length=1,
    )
    application: ArgoApplication | None = Field(default=None, description="Argo CD Application deploying it.")
    timeout_seconds: float = Field(default=CONFIG_TIMEOUT_S, gt=0, le=300, description="For all API reads.")


class RecordingRuleRef(CheckSpec):
    record: str = Field(description="The recording rule's record name.", min_length=1, max_length=512)
    expr: str | None = Field(
        default=None,
        description="What the rule should record: an independent reference for this rule (the recorded "
        "series are compared with this expression). Unset: the rule's definition in reference. With "
        "neither, the row is Inconclusive (NoIndependentReference): the expression Prometheus reports is "
        "the one under test, and comparing a rule with itself finds no drift.",
        max_length=8192,
    )


class PrometheusRulesRef(CheckSpec):
    """prometheus-operator PrometheusRule objects (monitoring.coreos.com/v1) holding the rules as
    they were reviewed and deployed."""

    namespace: str | None = Field(
        default=None, description="Their namespace; default: this resource's.", min_length=1, max_length=63
    )
    name: str | None = Field(
        default=None,
        description="One PrometheusRule by name; unset: every one the selector picks (all of the namespace "
        "without a selector).",
        min_length=1,
        max_length=253,
    )
    selector: dict[str, LabelValue] | None = Field(
        default=None, description="Labels each PrometheusRule read must carry."
    )


class RulesConfigMapRef(CheckSpec):
    """A Prometheus rules file (groups: [{name, interval, rules: [{record, expr, labels}]}]) held in
    one key of a ConfigMap."""

    namespace: str | None = Field(
        default=None, description="Its namespace; default: this resource's.", min_length=1, max_length=63
    )
    name: str = Field(description="The ConfigMap's name.", min_length=1, max_length=253)
    key: str = Field(description="The key holding the rules file.", min_length=1, max_length=253)


class RuleReference(CheckSpec):
    """Where the expected recording rules come from, independently of the Prometheus checked: the
    rules named without expr are compared with their definitions here (loaded at all, expression
    unchanged, healthy, evaluated within two intervals, no other definition of the record), and
    their recorded series with the expression defined here."""

    prometheus_rules: PrometheusRulesRef | None = Field(
        default=None, description="PrometheusRule objects (prometheus-operator)."
    )
    config_map: RulesConfigMapRef | None = Field(default=None, description="A rules file in a ConfigMap key.")


class MetricDrift(CheckSpec):
    """Each recording rule's series against an independent expression (its expr, or its definition
    in reference), evaluated at the same instant over the same label sets: relative drift below
    the threshold (0.3% by default) passes, at or above it fails; NaN or ±Inf on either side
    compares nothing (Inconclusive)."""

    prometheus_url: str = Field(
        description="Prometheus base URL, without credentials (CredentialsInUrl).",
        pattern=r"^https?://[^\s/]+(/.*)?$",
        max_length=2048,
    )
    rules: list[RecordingRuleRef] = Field(
        description="Recording rules to compare.", min_length=1, max_length=64
    )
    reference: RuleReference | None = Field(
        default=None,
        description="The expected rules, for the rules given without expr (the operator reads them: "
        "get/list on prometheusrules.monitoring.coreos.com, get on ConfigMaps).",
    )
    threshold: float = Field(
        default=DEFAULT_THRESHOLD,
        gt=0,
        le=1,
        description=f"A series drifting this much or more fails; less passes ({DEFAULT_THRESHOLD:g} = "
        f"{DEFAULT_THRESHOLD:.1%}).",
    )
    warn_threshold: float | None = Field(
        default=None, gt=0, le=1, description="A series drifting this much or more, below threshold, warns."
    )
    window_seconds: float = Field(
        default=0, ge=0, le=86400, description="Compare over this window before now."
    )
    points: int = Field(default=1, ge=1, le=60, description="Instants compared over the window.")
    timeout_seconds: float = Field(default=DRIFT_TIMEOUT_S, gt=0, le=300, description="Per Prometheus call.")
