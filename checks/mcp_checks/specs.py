"""The typed specs of mcp_checks' checks and their defaults, written once.

The operator's CRD models (``mcp_operator.api.readiness``) derive from these and add only what
the API server enforces (CEL rules, credential rules); mcp_checks' planner reads a manifest's
check entries through them, so a default lives here and nowhere else.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

__all__ = ["CheckSpec", "HealthProbe", "XdsProxies", "XdsSourceRef", "XdsSync", "default_of"]


class CheckSpec(BaseModel):
    """camelCase on the wire, snake_case in Python."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)


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
    match_labels: dict[str, str] | None = Field(default=None, description="Pods of the target, by label.")
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
    stale within graceSeconds warns and fails after, no answer is Inconclusive."""

    # at least one in the CRD (``mcp_operator.api``); mcp-check takes a manifest without
    sources: list[XdsSourceRef] = Field(description="Where to read sync state.", max_length=16)
    proxies: XdsProxies | None = Field(
        default=None, description="Proxies that must be synced; unset: every proxy the sources report."
    )
    types: list[Literal["LDS", "RDS", "CDS", "EDS"]] = Field(
        default_factory=lambda: ["LDS", "RDS", "CDS", "EDS"],  # type: ignore[arg-type]
        description="xDS types that must be synced.",
        min_length=1,
    )
    expected_version: str | None = Field(
        default=None, description="When set, a proxy ACKed on another version counts as stale."
    )
    grace_seconds: float = Field(default=30.0, ge=0, le=3600, description="Stale for less than this is Warn.")
    timeout_seconds: float = Field(default=5.0, gt=0, le=300, description="Per source call.")


def default_of(model: type[BaseModel], field: str) -> object:
    """A field's one default (its factory called, for list defaults)."""
    return model.model_fields[field].get_default(call_default_factory=True)
