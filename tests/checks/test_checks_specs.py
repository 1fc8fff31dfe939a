"""mcp_checks.specs: each check's typed spec, its defaults written once."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from mcp_checks.health import HealthProbeSpec
from mcp_checks.specs import HealthProbe, XdsProxies, XdsSync, default_of
from mcp_checks.suite import SpecError, health_probe, plan_checks

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
    [(HealthProbe, ("healthProbe",)), (XdsSync, ("xdsSync",)), (XdsProxies, ("xdsSync", "proxies"))],
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
