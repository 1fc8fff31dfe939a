"""mcp_checks.specs: each check's typed spec, its defaults written once."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from pydantic import BaseModel

from mcp_checks.config import DEFAULT_ANNOTATION
from mcp_checks.drift import DEFAULT_THRESHOLD
from mcp_checks.health import HealthProbeSpec
from mcp_checks.manifest import ReadinessSpec
from mcp_checks.specs import (
    ArgoApplication,
    ConfigConsistency,
    HealthProbe,
    MetricDrift,
    PrometheusRulesRef,
    RecordingRuleRef,
    RulesConfigMapRef,
    WorkloadRef,
    XdsProxies,
    XdsSync,
    default_of,
)
from mcp_checks.suite import SpecError, config_consistency, health_probe, metric_drift, plan_checks

CRD = Path(__file__).resolve().parents[2] / "crds" / "mcp2026.io_mcpreadinesses.yaml"


def test_camel_case_on_the_wire_snake_case_in_python() -> None:
    probe = HealthProbe.model_validate({"maxP99Ms": 250, "timeoutMs": 2000})
    assert (probe.max_p99_ms, probe.timeout_ms) == (250.0, 2000)
    assert HealthProbe(max_p99_ms=250).max_p99_ms == 250.0


def test_the_probe_round_takes_its_defaults_from_the_spec() -> None:
    spec = HealthProbeSpec(url="http://x/health")
    assert spec == HealthProbeSpec.from_spec(HealthProbe(), "http://x/health")
    assert spec.max_p99_ms == default_of(HealthProbe, "max_p99_ms") == 500.0
    assert spec.timeout_s * 1000 == default_of(HealthProbe, "timeout_ms")
    assert list(spec.expected_status) == default_of(HealthProbe, "expected_status")


def _props(*path: str) -> dict[str, dict[str, object]]:
    crd = yaml.safe_load(CRD.read_text())
    node = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    for key in ("checks", *path):
        node = node["properties"][key]
    return dict(node["properties"])


@pytest.mark.parametrize(
    ("model", "path"),
    [
        (HealthProbe, ("healthProbe",)),
        (XdsSync, ("xdsSync",)),
        (XdsProxies, ("xdsSync", "proxies")),
        (ConfigConsistency, ("configConsistency",)),
        (WorkloadRef, ("configConsistency", "workload")),
        (ArgoApplication, ("configConsistency", "application")),
        (MetricDrift, ("metricDrift",)),
        (PrometheusRulesRef, ("metricDrift", "reference", "prometheusRules")),
        (RulesConfigMapRef, ("metricDrift", "reference", "configMap")),
    ],
)
def test_the_crd_schema_carries_the_same_defaults(model: type[BaseModel], path: tuple[str, ...]) -> None:
    props = _props(*path)
    for name, field in model.model_fields.items():
        wire = field.alias or name
        default = default_of(model, name)
        # a list default (a factory) is applied by the model, not the schema
        if field.is_required() or field.default_factory is not None or default is None:
            assert "default" not in props[wire], wire
        else:
            assert props[wire]["default"] == default, wire
        assert props[wire].get("description") == field.description, wire


def test_an_invalid_entry_is_a_spec_error() -> None:
    with pytest.raises(SpecError, match="healthProbe"):
        health_probe({"requests": 0})


def test_the_planner_takes_a_typed_spec_or_a_mapping() -> None:
    assert [c.name for c in plan_checks({"healthProbe": HealthProbe(enabled=False)})] == []
    assert [c.name for c in plan_checks({"healthProbe": HealthProbe()})] == ["health-probe"]
    assert [c.name for c in plan_checks({"healthProbe": None})] == []


def test_recording_rules_carry_the_crds_schema_too() -> None:
    props = _props("metricDrift")["rules"]["items"]["properties"]  # type: ignore[index]
    for name, field in RecordingRuleRef.model_fields.items():
        assert props[field.alias or name].get("description") == field.description


def test_the_engines_defaults_are_the_specs() -> None:
    assert default_of(MetricDrift, "threshold") == DEFAULT_THRESHOLD
    assert default_of(ConfigConsistency, "annotation") == DEFAULT_ANNOTATION


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds: itself, optional, or in a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for arg in get_args(annotation) if (m := _model_in(arg)) is not None), None)


def _mismatches(model: type[BaseModel], schema: dict[str, Any], path: str) -> list[str]:
    props = schema["properties"]
    wire = {field.alias or name: field for name, field in model.model_fields.items()}
    out = [f"{path}: {sorted(set(wire) ^ set(props))}"] if set(wire) != set(props) else []
    for key, field in wire.items():
        inner = _model_in(field.annotation)
        if inner is not None and key in props:
            node = props[key]
            out += _mismatches(inner, node.get("items", node), f"{path}.{key}")
    return out


def test_mcp_check_reads_a_manifest_with_the_crds_fields_exactly() -> None:
    """The strict manifest model knows every field the API server does, and no other, in each
    object it validates: not stricter (a valid manifest refused), not laxer (a typo taken)."""
    crd = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert _mismatches(ReadinessSpec, spec, "spec") == []


def test_an_unknown_field_is_a_spec_error_naming_its_path() -> None:
    with pytest.raises(SpecError, match=r"checks\.healthProbe\.minSucessRatio: unknown field"):
        health_probe({"minSucessRatio": 0.99})
    with pytest.raises(SpecError, match=r"checks\.configConsistency\.workload\.nmae: unknown field"):
        config_consistency({"workload": {"name": "w", "nmae": "x"}, "configMaps": ["c"]})
    with pytest.raises(SpecError, match=r"checks\.metricDrift\.warnThreshhold: unknown field"):
        metric_drift({"prometheusUrl": "http://p", "rules": [{"record": "r"}], "warnThreshhold": 0.1})


def test_config_and_drift_are_built_from_their_typed_specs() -> None:
    config = ConfigConsistency.model_validate({"workload": {"name": "web"}, "secrets": ["s"]})
    assert (config.annotation, config.timeout_seconds) == (DEFAULT_ANNOTATION, 30.0)
    assert config_consistency(config).timeout_s == 30.0 + 5.0
    drift = MetricDrift(
        prometheus_url="http://p", rules=[RecordingRuleRef(record="r")], points=3, window_seconds=60
    )
    assert metric_drift(drift).timeout_s == 10.0 * (3 + 4) + 5.0
    assert [c.name for c in plan_checks({"healthProbe": None, "metricDrift": drift})] == ["metric-drift"]
    with pytest.raises(SpecError, match="ConfigMap or Secret"):
        config_consistency({"workload": {"name": "web"}})
