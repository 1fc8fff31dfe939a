"""MCPReadiness ``spec.checks``: each check is the engine's model (``mcp_checks.specs``) with the
API's rules on top, and the suite plans the validated models themselves, with no camelCase
round trip (a default read twice could differ)."""

from __future__ import annotations

from typing import Any

from mcp_checks import specs
from mcp_checks.defaults import ARGO_CD_NAMESPACE, CONFIG_TIMEOUT_S, DEFAULT_ANNOTATION, DEFAULT_THRESHOLD
from mcp_checks.suite import _entries, plan_checks
from mcp_operator.api.readiness import MCPReadinessSpec, WatchedApplication

CHECKS: dict[str, Any] = {
    "configConsistency": {
        "workload": {"name": "web"},
        "configMaps": ["web-config"],
        "application": {"name": "shop"},
    },
    "metricDrift": {"prometheusUrl": "http://prom:9090", "rules": [{"record": "job:up:sum", "expr": "up"}]},
}


def _spec(**checks: Any) -> MCPReadinessSpec:
    return MCPReadinessSpec.model_validate({"target": {"url": "http://svc:8000"}, "checks": checks})


def test_the_suite_plans_the_validated_models_themselves() -> None:
    spec = _spec(**CHECKS)
    entries = _entries(spec.checks)
    assert entries["configConsistency"] is spec.checks.config_consistency
    assert entries["metricDrift"] is spec.checks.metric_drift
    assert entries["healthProbe"] is spec.checks.health_probe
    names = [c.name for c in plan_checks(spec.checks)]
    assert names == ["health-probe", "config-consistency", "metric-drift"]


def test_a_null_probe_is_off_and_an_absent_check_does_not_run() -> None:
    spec = _spec(healthProbe=None, metricDrift=CHECKS["metricDrift"])
    assert [c.name for c in plan_checks(spec.checks)] == ["metric-drift"]


def test_the_defaults_are_the_engines_one_home() -> None:
    checks = _spec(**CHECKS).checks
    config, drift = checks.config_consistency, checks.metric_drift
    assert config is not None and drift is not None
    assert isinstance(config, specs.ConfigConsistency) and isinstance(drift, specs.MetricDrift)
    assert (config.annotation, config.timeout_seconds) == (DEFAULT_ANNOTATION, CONFIG_TIMEOUT_S)
    assert config.application is not None and config.application.namespace == ARGO_CD_NAMESPACE
    assert drift.threshold == DEFAULT_THRESHOLD
    assert issubclass(WatchedApplication, specs.ApplicationRef)
    assert WatchedApplication(name="shop").namespace == ARGO_CD_NAMESPACE
