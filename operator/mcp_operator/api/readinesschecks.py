"""MCPReadiness ``spec.checks``: the API models of the checks a gate runs.

Fields and defaults are ``mcp_checks.specs``' (the models mcp-check reads a manifest with);
these add only what the API server enforces: CEL rules across fields, and the credential and
port rules on URLs and addresses.
"""

from __future__ import annotations

from pydantic import Field

from mcp_checks.models import (
    MAX_XDS_SOURCES,
    ConfigConsistency,
    HealthProbe,
    MetricDrift,
    XdsSync,
    default_of,
)
from mcp_checks.models import PrometheusRulesRef as PrometheusRules
from mcp_checks.models import RuleReference as RuleRef
from mcp_checks.models import XdsProxies as Proxies
from mcp_checks.models import XdsSourceRef as XdsSource

from .common import ApiModel, cel, with_rules
from .credentials import no_credentials, no_credentials_in_query, rules_extra
from .ports import port_in_range

__all__ = [
    "ConfigConsistencyCheck",
    "HealthProbeCheck",
    "MetricDriftCheck",
    "PrometheusRulesRef",
    "ReadinessChecks",
    "RuleReference",
    "XdsProxies",
    "XdsSourceRef",
    "XdsSyncCheck",
]


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
        description=XdsSync.model_fields["sources"].description,
        min_length=1,
        max_length=MAX_XDS_SOURCES,
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
