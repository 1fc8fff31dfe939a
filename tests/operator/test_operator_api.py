"""API models: camelCase on the wire, unknown fields and out-of-range values rejected by path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from mcp_operator.api import (
    API_VERSION,
    Condition,
    MCPBenchmarkSpec,
    MCPBenchmarkStatus,
    MCPReadinessSpec,
    MCPReadinessStatus,
)
from mcp_operator.api.readiness import MCPReadiness

BENCH: dict[str, Any] = {"target": {"url": "http://svc:8000"}, "load": {"concurrency": [4], "requests": 10}}
READY: dict[str, Any] = {"target": {"url": "http://svc:8000"}}
CONFIG: dict[str, Any] = {"workload": {"name": "web"}, "configMaps": ["web-config"]}
DRIFT: dict[str, Any] = {
    "prometheusUrl": "http://prom:9090",
    "rules": [{"record": "job:up:sum"}],
    "reference": {"configMap": {"name": "rules", "key": "rules.yaml"}},
}


def _error_paths(model: type[BaseModel], data: dict[str, Any]) -> dict[str, str]:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return {".".join(str(p) for p in e["loc"]): e["type"] for e in info.value.errors()}


def _with(base: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with ``value`` set at the dotted ``path``."""
    out = copy.deepcopy(base)
    node = out
    *parents, leaf = path.split(".")
    for key in parents:
        node = node.setdefault(key, {})
    node[leaf] = value
    return out


@pytest.mark.parametrize(
    ("model", "base", "path"),
    [
        (MCPBenchmarkSpec, BENCH, "target.servceRef"),
        (MCPBenchmarkSpec, BENCH, "load.concurency"),
        (MCPBenchmarkSpec, BENCH, "runner.gpu"),
        (MCPBenchmarkSpec, BENCH, "slo.p99"),
        (MCPReadinessSpec, READY, "checks.healthProbe.maxP999Ms"),
        (
            MCPReadinessSpec,
            READY | {"checks": {"configConsistency": CONFIG}},
            "checks.configConsistency.timeoutSecond",
        ),
        (
            MCPReadinessSpec,
            READY | {"checks": {"metricDrift": DRIFT}},
            "checks.metricDrift.reference.configMap.namespce",
        ),
        (MCPReadinessSpec, READY, "extra"),
    ],
)
def test_unknown_fields_are_rejected_by_path(model: type[BaseModel], base: dict[str, Any], path: str) -> None:
    assert _error_paths(model, _with(base, path, 1)) == {path: "extra_forbidden"}


@pytest.mark.parametrize(
    ("model", "base", "path", "value"),
    [
        (MCPBenchmarkSpec, BENCH, "shards", 0),
        (MCPBenchmarkSpec, BENCH, "shards", 257),
        (MCPBenchmarkSpec, BENCH, "runner.gpus", 17),
        (MCPBenchmarkSpec, BENCH, "runner.gpus", -1),
        (MCPBenchmarkSpec, BENCH, "runner.backoffLimit", 11),
        (MCPBenchmarkSpec, BENCH, "load.durationSeconds", 0),
        (MCPBenchmarkSpec, BENCH, "load.requestTimeoutSeconds", 0),
        (MCPBenchmarkSpec, BENCH, "load.warmupSeconds", -0.5),
        (MCPBenchmarkSpec, BENCH, "slo.maxErrorRate", 1.5),
        (MCPBenchmarkSpec, BENCH, "slo.latencyP99Ms", 0),
        (MCPBenchmarkSpec, BENCH, "target.path", "no-slash"),
        (MCPBenchmarkSpec, BENCH, "target.serviceRef.port", 70000),
        # what a child object would be refused for is refused up front, by path
        (MCPBenchmarkSpec, BENCH, "runner.cpu", "lots"),
        (MCPBenchmarkSpec, BENCH, "runner.cpu", "-1"),
        (MCPBenchmarkSpec, BENCH, "runner.memory", "-1Gi"),
        (MCPBenchmarkSpec, BENCH, "runner.memory", "1 Gi"),
        (MCPBenchmarkSpec, BENCH, "runner.memory", "1GB"),
        (MCPBenchmarkSpec, BENCH, "runner.serviceAccountName", "Bad_Name"),
        (MCPBenchmarkSpec, BENCH, "runner.serviceAccountName", "a" * 254),
        (MCPBenchmarkSpec, BENCH, "runner.runtimeClassName", "NVIDIA!"),
        (MCPBenchmarkSpec, BENCH, "runner.image", "has space:1"),
        (MCPBenchmarkSpec, BENCH, "runner.nodeSelector", {"bad key!": "x"}),
        (MCPBenchmarkSpec, BENCH, "runner.nodeSelector", {"-lead": "x"}),
        (MCPBenchmarkSpec, BENCH, "runner.nodeSelector", {"a/" + "b" * 64: "x"}),
        (MCPBenchmarkSpec, BENCH, "runner.activeDeadlineSeconds", 2**31),
        (MCPBenchmarkSpec, BENCH, "ttlSecondsAfterFinished", 2**31),
        (MCPReadinessSpec, READY, "target.url", "ftp://svc"),
        (MCPReadinessSpec, READY, "checks.healthProbe.requests", 0),
        (MCPReadinessSpec, READY, "checks.healthProbe.requests", 100001),
        (MCPReadinessSpec, READY, "checks.healthProbe.minSuccessRatio", 1.01),
        (MCPReadinessSpec, READY, "checks.healthProbe.timeoutMs", 0),
        (MCPReadinessSpec, READY, "checks.healthProbe.maxP99Ms", -1),
        (MCPReadinessSpec, READY, "checks.healthProbe.expectedStatus", []),
        (MCPReadinessSpec, READY, "checks.healthProbe.path", "health"),
    ],
)
def test_out_of_range_values_name_the_camelcase_path(
    model: type[BaseModel], base: dict[str, Any], path: str, value: Any
) -> None:
    paths = _error_paths(model, _with(base, path, value))
    assert path in paths, paths


def test_kubernetes_values_that_are_valid_are_accepted() -> None:
    runner = {
        "cpu": "500m",
        "memory": "512Mi",
        "serviceAccountName": "team.runner-1",
        "runtimeClassName": "nvidia",
        "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200", "kubernetes.io/hostname": "n1", "zone": ""},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "activeDeadlineSeconds": 2**31 - 1,
    }
    spec = MCPBenchmarkSpec.model_validate({**BENCH, "runner": runner, "ttlSecondsAfterFinished": 2**31 - 1})
    assert spec.runner.node_selector["nvidia.com/gpu.product"] == "NVIDIA-H200"
    for quantity in ("2", "0.5", ".5", "1e3", "8Gi", "100M", "250m"):
        assert MCPBenchmarkSpec.model_validate({**BENCH, "runner": {"cpu": quantity, "memory": quantity}})
    header = {"name": "Authorization", "valueFrom": {"secretKeyRef": {"name": "api", "key": "token"}}}
    target = MCPBenchmarkSpec.model_validate(
        {**BENCH, "target": {"url": "http://svc", "headers": [header]}}
    ).target
    assert target.headers[0].value_from is not None and target.headers[0].to_wire() == header


@pytest.mark.parametrize(
    ("header", "path"),
    [
        (
            {"name": "A", "value": "b", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            "target.headers.0",
        ),
        ({"name": "A"}, "target.headers.0"),
        ({"name": "Bad Name", "value": "b"}, "target.headers.0.name"),
        (
            {"name": "A", "valueFrom": {"secretKeyRef": {"name": "Not_A_Name", "key": "k"}}},
            "target.headers.0",
        ),
    ],
)
def test_headers_take_exactly_one_value_source(header: dict[str, Any], path: str) -> None:
    paths = _error_paths(MCPBenchmarkSpec, _with(BENCH, "target.headers", [header]))
    assert any(p.startswith(path) for p in paths), paths


def test_benchmark_load_levels_reject_empty_and_oversized_sweeps() -> None:
    assert "load.concurrency" in _error_paths(MCPBenchmarkSpec, _with(BENCH, "load.concurrency", []))
    assert "load.rate" in _error_paths(MCPBenchmarkSpec, _with(BENCH, "load.rate", [1.0] * 17))


def test_missing_required_fields_are_reported() -> None:
    assert _error_paths(MCPBenchmarkSpec, {"target": {"url": "http://x"}}) == {"load": "missing"}
    assert _error_paths(MCPReadinessSpec, {}) == {"target": "missing"}
    assert "target.serviceRef.name" in _error_paths(
        MCPReadinessSpec, {"target": {"serviceRef": {"port": 80}}}
    )


def test_benchmark_defaults() -> None:
    spec = MCPBenchmarkSpec.model_validate(BENCH)
    assert spec.shards == 1 and spec.suspend is False
    assert spec.ttl_seconds_after_finished == 3600
    assert spec.target.backend == "http" and spec.target.path == "/"
    assert spec.load.arrival == "poisson" and spec.load.warmup_seconds == 0
    assert spec.load.request_timeout_seconds == 30
    runner = spec.runner
    assert runner.gpus == 0 and runner.node_selector == {} and runner.tolerations == []
    assert runner.service_account_name is None and runner.runtime_class_name is None
    assert runner.backoff_limit == 0 and runner.active_deadline_seconds == 3600
    assert spec.slo.model_dump(exclude_none=True) == {}


def test_readiness_defaults_follow_the_reference_figures() -> None:
    """Health-check success >= 99.99% and a probe P99 under 500 ms are the shipped defaults."""
    probe = MCPReadinessSpec.model_validate(READY).checks.health_probe
    assert probe is not None
    assert probe.min_success_ratio == 0.9999 and probe.max_p99_ms == 500.0
    assert probe.requests == 10000 and probe.path == "/health"
    assert probe.expected_status == [200] and probe.max_p50_ms is None


def test_camel_case_on_the_wire_and_round_trip() -> None:
    data = {
        "target": {"serviceRef": {"name": "triton", "namespace": "ml", "port": 8000}},
        "checks": {"healthProbe": {"minSuccessRatio": 0.99, "requests": 200, "maxP50Ms": 5}},
    }
    spec = MCPReadinessSpec.model_validate(data)
    assert spec.target.service_ref is not None and spec.target.service_ref.port == 8000
    wire = spec.to_wire()
    assert wire["checks"]["healthProbe"]["minSuccessRatio"] == 0.99
    assert "service_ref" not in wire["target"] and wire["target"]["serviceRef"]["name"] == "triton"
    assert "url" not in wire["target"]  # None is left out, not sent as null
    assert MCPReadinessSpec.model_validate(wire) == spec

    bench = MCPBenchmarkSpec.model_validate(BENCH | {"runner": {"nodeSelector": {"gpu": "h200"}}})
    assert MCPBenchmarkSpec.model_validate(bench.to_wire()) == bench
    assert bench.to_wire()["runner"]["nodeSelector"] == {"gpu": "h200"}


def test_health_probe_can_be_switched_off() -> None:
    spec = MCPReadinessSpec.model_validate(READY | {"checks": {"healthProbe": None}})
    assert spec.checks.health_probe is None


def test_status_models_reject_undeclared_fields() -> None:
    """The API server prunes undeclared status fields silently; the models say it loudly."""
    assert _error_paths(MCPReadinessStatus, {"verdict": "Pass", "p99": "1ms"}) == {"p99": "extra_forbidden"}
    assert "score" in _error_paths(MCPReadinessStatus, {"score": 101})
    assert _error_paths(MCPBenchmarkStatus, {"shards": {"expected": 1, "lost": 0}}) == {
        "shards.lost": "extra_forbidden"
    }
    assert "verdict" in _error_paths(MCPBenchmarkStatus, {"verdict": "Maybe"})


def test_condition_wire_shape() -> None:
    cond = Condition.model_validate(
        {
            "type": "Ready",
            "status": "True",
            "reason": "ChecksPassed",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    )
    assert cond.to_wire() == {
        "type": "Ready",
        "status": "True",
        "reason": "ChecksPassed",
        "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


def test_whole_object_validation() -> None:
    obj = MCPReadiness.model_validate(
        {"apiVersion": API_VERSION, "kind": "MCPReadiness", "metadata": {"name": "r"}, "spec": READY}
    )
    assert obj.api_version == "mcp2026.io/v1alpha1"
    assert "spec.target" in _error_paths(
        MCPReadiness, {"apiVersion": API_VERSION, "kind": "MCPReadiness", "metadata": {}, "spec": {}}
    )


def test_config_and_drift_checks_are_the_engines_models_and_plan_as_stored() -> None:
    """configConsistency and metricDrift are mcp_checks.specs' models with the CRD's rules on top
    (one definition, one default), and what the API server stores plans through the suite's
    strict reading unchanged (no field the engine does not know)."""
    from mcp_checks.specs import ConfigConsistency, MetricDrift
    from mcp_checks.suite import plan_checks
    from mcp_operator.readiness.evaluate import suite_checks

    spec = MCPReadinessSpec.model_validate(
        READY | {"checks": {"configConsistency": CONFIG, "metricDrift": DRIFT}}
    )
    assert isinstance(spec.checks.config_consistency, ConfigConsistency)
    assert isinstance(spec.checks.metric_drift, MetricDrift)
    assert (
        spec.checks.metric_drift.threshold == 0.003
        and spec.checks.config_consistency.annotation == "checksum/config"
    )
    stored = MCPReadinessSpec.model_validate(spec.to_wire())  # as the API server returns it
    names = [c.name for c in plan_checks(suite_checks(stored))]
    assert names == ["health-probe", "config-consistency", "metric-drift"]
