"""A benchmark's target and spec.observe's sources are dialled by its shards, pods in the cluster:
an operator outside the cluster leaves a cluster Service name to them (no ``TargetUnresolvable``,
no waiting); in the cluster an unresolved name is waited for as before."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from mcp_bench.plan import RunPlan
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.benchmark.plan import MAX_WORKERS, prepare_plan, workers_for_cpu
from mcp_operator.targets import SpecProblem
from mcp_operator.targets.policy import TargetPolicy

pytestmark = pytest.mark.usefixtures("without_cluster_dns")


def _spec(url: str, prometheus: str) -> MCPBenchmarkSpec:
    return MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": url, "backend": "http", "path": "/health"},
            "load": {"concurrency": [1], "requests": 10},
            "observe": {"prometheus": {"url": prometheus, "queries": [{"name": "q", "query": "up"}]}},
        }
    )


async def _exists(namespace: str, name: str) -> bool:
    return True


async def test_outside_the_cluster_service_names_are_left_to_the_shards() -> None:
    spec = _spec("http://triton.ml.svc:8000", "http://prometheus.monitoring.svc.cluster.local:9090")
    plan = await prepare_plan(spec, "ml", "bench", _exists, TargetPolicy(in_cluster=False))
    assert isinstance(plan, RunPlan) and plan.url == "http://triton.ml.svc:8000/health"


@pytest.mark.parametrize(
    ("policy", "url", "prometheus", "field"),
    [
        (
            TargetPolicy(in_cluster=True),
            "http://triton.ml.svc:8000",
            "http://127.0.0.1:9090",
            "spec.target.url",
        ),
        (
            TargetPolicy(in_cluster=True),
            "http://127.0.0.1:8000",
            "http://prom.monitoring.svc:9090",
            "spec.observe",
        ),
        (
            TargetPolicy(in_cluster=False),
            "http://triton.nowhere.invalid:8000",
            "http://127.0.0.1:9090",
            "spec.target.url",
        ),
    ],
)
async def test_a_name_that_may_still_resolve_is_waited_for(
    policy: TargetPolicy, url: str, prometheus: str, field: str
) -> None:
    got = await prepare_plan(_spec(url, prometheus), "ml", "bench", _exists, policy)
    assert isinstance(got, SpecProblem) and got.reason == "TargetUnresolved" and got.message.startswith(field)


@pytest.mark.parametrize(
    ("cpu", "workers"),
    [
        ("500m", 1),
        ("2", 2),
        ("3500m", 3),
        ("1k", MAX_WORKERS),
        ("9e999999", MAX_WORKERS),
        ("9e999999k", MAX_WORKERS),
        ("0.1", 1),
    ],
)
def test_workers_follow_the_cpu_request_whatever_its_size(cpu: str, workers: int) -> None:
    """A generated spec found it: a CPU request past Decimal's range ("9e999999k", which the
    quantity pattern admits) raised Overflow and the run ended InternalError (issue 35, item 8)."""
    assert workers_for_cpu(cpu, "builtin") == workers
    assert workers_for_cpu(cpu, "locust") == 1


@pytest.mark.parametrize("cpu", ["9e999999", "1e100", "2E-123"])
def test_a_quantity_past_any_machine_is_refused_at_apply(cpu: str) -> None:
    """The generated specs found the preflight's quota sum overflow on such a request, so the
    schema bounds the exponent to two digits (the CRD's pattern is the model's)."""
    base = {"target": {"url": "http://h:8000"}, "load": {"concurrency": [1], "requests": 1}}
    with pytest.raises(ValidationError, match=r"runner\.cpu"):
        MCPBenchmarkSpec.model_validate({**base, "runner": {"cpu": cpu}})
    assert MCPBenchmarkSpec.model_validate({**base, "runner": {"cpu": "1e99"}}).runner.cpu == "1e99"
