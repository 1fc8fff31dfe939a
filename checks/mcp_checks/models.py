"""The checks' spec and status models, the face the operator's API models derive from: pydantic
and the standard library only (``mcp_checks.api`` brings the Kubernetes client, which the API
models must not import). Each field is declared once, in the module behind this face."""

from __future__ import annotations

from mcp_checks.defaults import DEFAULT_ANNOTATION, MAX_XDS_SOURCES
from mcp_checks.specs import (
    ApplicationRef,
    ConfigConsistency,
    HealthProbe,
    MetricDrift,
    PrometheusRulesRef,
    RuleReference,
    XdsProxies,
    XdsSourceRef,
    XdsSync,
    default_of,
)
from mcp_checks.status import (
    MAX_CHECK_HISTORY,
    MAX_FINDINGS,
    MAX_HISTORY,
    CheckRow,
    ConditionRow,
    FindingRow,
    ReadinessStatusView,
    ReleaseRow,
    RetryRow,
    StatusPart,
)
from mcp_checks.verdict import Verdict

__all__ = [
    "DEFAULT_ANNOTATION",
    "MAX_CHECK_HISTORY",
    "MAX_FINDINGS",
    "MAX_HISTORY",
    "MAX_XDS_SOURCES",
    "ApplicationRef",
    "CheckRow",
    "ConditionRow",
    "ConfigConsistency",
    "FindingRow",
    "HealthProbe",
    "MetricDrift",
    "PrometheusRulesRef",
    "ReadinessStatusView",
    "ReleaseRow",
    "RetryRow",
    "RuleReference",
    "StatusPart",
    "Verdict",
    "XdsProxies",
    "XdsSourceRef",
    "XdsSync",
    "default_of",
]
