"""spec.load.connections and spec.load.rampSeconds reach the plan every shard runs; an external
engine that cannot honour them is refused before any Job exists."""

from __future__ import annotations

from typing import Any

from mcp_bench.engines import plan_feature_problem
from mcp_operator.api.benchmark import MCPBenchmarkSpec
from mcp_operator.benchmark.plan import plan_from_spec


def _spec(**load: Any) -> MCPBenchmarkSpec:
    return MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": "http://svc.ml.svc:8000/", "path": "/health"},
            "load": {"concurrency": [8], "durationSeconds": 30, **load},
        }
    )


def test_connections_and_ramp_are_carried_to_the_shard_plan() -> None:
    plan = plan_from_spec(_spec(connections="per-request", rampSeconds=5), "http://svc.ml.svc:8000", "b")
    assert plan.levels.connections == "per-request" and plan.levels.ramp_s == 5.0
    default = plan_from_spec(_spec(), "http://svc.ml.svc:8000", "b")
    assert default.levels.connections is None and default.levels.ramp_s == 0.0


def test_an_external_engine_refuses_a_ramp_with_its_reason() -> None:
    plan = plan_from_spec(_spec(engine="locust", rampSeconds=5), "http://svc.ml.svc:8000", "b")
    problem = plan_feature_problem(plan)
    assert problem is not None and "levels.ramp_s" in problem and "locust" in problem
    warm = plan_from_spec(_spec(engine="locust", connections="warm"), "http://svc.ml.svc:8000", "b")
    assert "cold" in (plan_feature_problem(warm) or "")
