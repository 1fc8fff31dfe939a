"""spec.observe's server side: PromQL through a named Prometheus and the serving GPUs' samplers
(pure builders, checks before any Job, and the status columns from a merged level)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from mcp_bench.cli_observers import build_observers
from mcp_bench.plan import RunPlan
from mcp_bench.results import EngineFingerprint, ResultDocument
from mcp_bench.results.document import LevelResult
from mcp_bench.results.serving import serving_gpus
from mcp_bench.results.summary import summarize
from mcp_bench.servermetrics.observer import ServerMetricsObserver
from mcp_bench.servermetrics.probes import PrometheusQueryProbe
from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.api.observe import GpuSamplerSpec
from mcp_operator.benchmark.gpusampler import (
    SAMPLER_PORT,
    node_gpus,
    sampler_name,
    sampler_pod,
    sampler_service,
    sampler_url,
    serving_columns,
    serving_nodes,
)
from mcp_operator.benchmark.plan import plan_from_spec, prepare_plan
from mcp_operator.benchmark.status import level_row
from mcp_operator.targets import SpecProblem
from mcp_operator.targets.policy import TargetPolicy

UID, JOB = "uid-1", "bench-0a1b2c3d"


def spec(target: dict[str, Any] | None = None, **extra: Any) -> MCPBenchmarkSpec:
    return MCPBenchmarkSpec.model_validate(
        {
            "target": target
            or {"serviceRef": {"name": "vllm", "port": 8000}, "backend": "openai", "model": "m"},
            "load": {"concurrency": [1], "requests": 10},
            **extra,
        }
    )


def _pod(node: str = "gpu-node-1", gpus: int = 8, **sampler: Any) -> dict[str, Any]:
    return sampler_pod(
        benchmark="b",
        uid=UID,
        job=JOB,
        node=node,
        gpus=gpus,
        spec=GpuSamplerSpec.model_validate(sampler),
        image="runner:1",
        clients=3,
        deadline_s=600,
    )


def test_the_sampler_lands_on_its_node_asks_for_no_gpu_and_reads_the_hosts_devices() -> None:
    pod = _pod(intervalSeconds=0.005)
    spec_ = pod["spec"]
    term = spec_["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-1"]}]}]
    assert spec_["tolerations"] == [{"operator": "Exists"}]  # wherever the server runs, tainted or not
    (container,) = spec_["containers"]
    resources = container["resources"]
    assert not any("nvidia.com/gpu" in part for part in resources.values())  # takes none of the server's
    paths = {v["hostPath"]["path"]: v["hostPath"]["type"] for v in spec_["volumes"]}
    assert paths == {
        "/dev/nvidiactl": "CharDevice",
        **{f"/dev/nvidia{i}": "CharDevice" for i in range(8)},
        "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1": "File",
    }
    assert {m["mountPath"] for m in container["volumeMounts"]} >= {
        "/dev/nvidia7",
        "/run/mcp-nvml/libnvidia-ml.so.1",
    }
    assert {"name": "LD_LIBRARY_PATH", "value": "/run/mcp-nvml"} in container["env"]
    assert container["securityContext"]["privileged"] is True  # the device cgroup, for unallocated GPUs
    cmd = container["command"]
    assert cmd[:2] == ["mcp-bench", "gpu-sampler"]
    assert cmd[cmd.index("--interval") + 1] == "0.005" and cmd[cmd.index("--clients") + 1] == "3"
    assert spec_["activeDeadlineSeconds"] > int(cmd[cmd.index("--deadline") + 1]) > 600
    assert spec_["restartPolicy"] == "Never" and spec_["automountServiceAccountToken"] is False
    owner = pod["metadata"]["ownerReferences"][0]
    assert owner["uid"] == UID and owner["kind"] == "MCPBenchmark" and owner["controller"] is True


def test_a_node_without_gpus_gets_a_locked_down_sampler_that_mounts_nothing() -> None:
    pod = _pod(gpus=0)
    (container,) = pod["spec"]["containers"]
    assert pod["spec"]["volumes"] == [] and container["volumeMounts"] == []
    assert "privileged" not in container["securityContext"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_names_are_dns_labels_unique_per_node_and_the_service_selects_its_pod_alone() -> None:
    long_job = "a" * 59
    names = {sampler_name(long_job, f"node-{i}") for i in range(50)}
    assert len(names) == 50 and all(len(n) <= 63 for n in names)
    pod = _pod(node="n1")
    svc = sampler_service(benchmark="b", uid=UID, job=JOB, node="n1")
    assert svc["metadata"]["name"] == pod["metadata"]["name"] == sampler_name(JOB, "n1")
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert svc["spec"]["ports"][0]["port"] == SAMPLER_PORT
    assert sampler_url({"metadata": {"name": "s"}, "spec": {"clusterIP": "10.96.0.7"}}, "ns") == (
        f"http://10.96.0.7:{SAMPLER_PORT}"
    )
    assert sampler_url({"metadata": {"name": "s"}, "spec": {}}, "ns") == f"http://s.ns.svc:{SAMPLER_PORT}"


def test_serving_nodes_come_from_the_endpoints_and_gpus_from_the_node() -> None:
    slices: list[dict[str, Any]] = [
        {"endpoints": [{"nodeName": "b"}, {"nodeName": "a"}, {"addresses": ["10.0.0.1"]}]},
        {"endpoints": [{"nodeName": "a"}]},
        {"endpoints": None},
    ]
    assert serving_nodes(slices) == ["a", "b"]
    assert node_gpus({"status": {"capacity": {"nvidia.com/gpu": "8", "cpu": "64"}}}) == 8
    assert node_gpus({"status": {"capacity": {"cpu": "2"}}}) == 0


def test_promql_through_a_named_prometheus_becomes_the_plan_and_its_probe() -> None:
    s = spec(
        observe={
            "prometheus": {
                "serviceRef": {"name": "prometheus", "namespace": "monitoring", "port": 9090},
                "queries": [
                    {"name": "gpu_util", "query": "avg(DCGM_FI_DEV_GPU_UTIL)"},
                    {"name": "requests", "query": "sum(vllm:request_success_total)", "type": "counter"},
                ],
            }
        }
    )
    plan = plan_from_spec(s, "http://vllm.ml.svc:8000", "b")
    assert plan.observe.prometheus == "http://prometheus.monitoring.svc:9090"
    assert plan.observe.promql == [
        "gpu_util=avg(DCGM_FI_DEV_GPU_UTIL)",
        "requests:counter=sum(vllm:request_success_total)",
    ]
    (observer,) = build_observers(plan)
    assert isinstance(observer, ServerMetricsObserver)
    (probe,) = observer.probes
    assert isinstance(probe, PrometheusQueryProbe) and [(q.name, q.type) for q in probe.queries] == [
        ("gpu_util", "gauge"),
        ("requests", "counter"),
    ]
    local = spec(
        observe={
            "prometheus": {
                "serviceRef": {"name": "prom", "port": 9090},
                "queries": [{"name": "q", "query": "up"}],
            }
        }
    )
    assert (
        plan_from_spec(local, "http://x", "b").observe.prometheus == "http://prom:9090"
    )  # the shards' namespace


def test_the_schema_refuses_a_prometheus_without_one_address_or_queries() -> None:
    q = [{"name": "q", "query": "up"}]
    for bad in (
        {"queries": q},
        {"url": "http://p:9090", "serviceRef": {"name": "p"}, "queries": q},
        {"url": "http://p:9090", "queries": []},
        {"url": "http://p:9090", "queries": [*q, *q]},
        {"url": "http://p:9090", "queries": [{"name": "a b", "query": "up"}]},
    ):
        with pytest.raises(ValidationError):
            spec(observe={"prometheus": bad})
    with pytest.raises(ValidationError):
        spec(observe={"gpuSampler": {"intervalSeconds": 0.001}})  # below 5 ms


async def _no_service(namespace: str, name: str) -> bool:
    return name != "missing"


@pytest.mark.parametrize(
    ("target", "observe", "reason"),
    [
        ({"url": "http://10.0.0.5:8000"}, {"gpuSampler": {}}, "GpuSamplerNeedsService"),
        (None, {"gpuSampler": {"serviceRef": {"name": "missing"}}}, "TargetNotFound"),
        (None, {"gpuSampler": {"serviceRef": {"name": "vllm", "namespace": "other"}}}, "TargetNotAllowed"),
        (
            None,
            {"prometheus": {"url": "http://169.254.169.254/api", "queries": [{"name": "q", "query": "up"}]}},
            "TargetNotAllowed",
        ),
        (
            None,
            {"prometheus": {"serviceRef": {"name": "missing"}, "queries": [{"name": "q", "query": "up"}]}},
            "TargetNotFound",
        ),
    ],
)
async def test_observe_sources_are_checked_before_any_job(
    target: dict[str, Any] | None, observe: dict[str, Any], reason: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        TargetPolicy,
        "from_env",
        classmethod(lambda cls: TargetPolicy(allow_cidrs=(), allow_namespaces=frozenset())),
    )
    if target is not None:
        target = {**target, "backend": "openai", "model": "m"}
    problem = await prepare_plan(spec(target, observe=observe), "ml", "b", _no_service)
    assert isinstance(problem, SpecProblem) and problem.reason == reason, problem


def test_status_columns_say_unavailable_and_why_never_zero() -> None:
    assert serving_columns(None) == {}
    nvml = "NVML could not be initialised: NVML Shared Library Not Found"
    down = serving_gpus({"gpu-sampler:node-a": {"role": "serving", "status": "unavailable", "reason": nvml}})
    cols = serving_columns(down)
    assert cols["serving_gpu_memory_peak_percent"] == "unavailable"
    assert (
        cols["serving_gpu_util_percent"] == "unavailable" and cols["serving_gpu_power_watts"] == "unavailable"
    )
    assert cols["serving_gpu_source"] == f"unavailable: gpu-sampler:node-a: {nvml}"
    up = serving_gpus(
        {
            "dcgm": {
                "status": "ok",
                "metrics": {"DCGM_FI_DEV_GPU_UTIL": {}},
                "gpus": [
                    {"fb_used_peak_pct": 40.0, "sm_util_pct": {"mean": 80.0}, "power_w": {"mean": 300.0}},
                    {"fb_used_peak_pct": 60.0, "sm_util_pct": {"mean": 60.0}},
                ],
            },
            "gpu-sampler:node-b": {
                "status": "ok",
                "gpus": [
                    {"memory_used_peak_pct": 55.0, "fields": {"sm_util_pct": {"status": "ok", "mean": 70.0}}}
                ],
            },
            "vllm-metrics": {"status": "ok", "metrics": {"vllm:num_requests_running": {}}},
        }
    )
    cols = serving_columns(up)
    assert cols["serving_gpu_memory_peak_percent"] == "60.0"  # the highest peak of the three GPUs
    assert cols["serving_gpu_util_percent"] == "70.0" and cols["serving_gpu_power_watts"] == "300.0"
    assert cols["serving_gpu_source"] == "dcgm, gpu-sampler:node-b (3 GPU(s))"
    assert serving_gpus({"vllm-metrics": {"status": "ok", "metrics": {}}}) is None


def test_a_status_row_carries_the_serving_gpus_and_the_servers_figures() -> None:
    plan = RunPlan.from_dict({"url": "http://x:1", "levels": {"concurrency": [1]}, "stage": {"requests": 1}})
    level = LevelResult(
        index=0,
        mode="closed",
        concurrency=1,
        server_metrics={
            "vllm-metrics": {
                "status": "ok",
                "metrics": {
                    "vllm:num_requests_running": {"type": "gauge", "status": "ok", "series": [{"max": 12.0}]},
                    "vllm:kv_cache_usage_perc": {"status": "missing"},
                },
            },
            "gpu-sampler:node-a": {"status": "unavailable", "reason": "no NVML"},
        },
    )
    now = datetime.now(UTC)
    doc = ResultDocument(started_at=now, ended_at=now, engine=EngineFingerprint(), plan=plan, levels=[level])
    row = level_row(summarize(doc, level)).to_wire()
    assert row["serverMetrics"] == {
        "vllm-metrics/vllm:kv_cache_usage_perc": "missing",
        "vllm-metrics/vllm:num_requests_running": "max 12",
    }
    assert row["servingGpuMemoryPeakPercent"] == "unavailable"
    assert row["servingGpuSource"] == "unavailable: gpu-sampler:node-a: no NVML"
    bare = level_row(summarize(doc, level.model_copy(update={"server_metrics": None}))).to_wire()
    assert "servingGpuSource" not in bare and not bare.get("serverMetrics")


async def test_samplers_wait_for_the_namespace_owners_grant_and_create_nothing(kube_fake: Any) -> None:
    from mcp_operator.benchmark.gpusampler_kube import place_samplers

    kube_fake.deny("create", "pods", "ml")
    problem = await place_samplers(
        spec=spec(target={"serviceRef": {"name": "vllm"}}, observe={"gpuSampler": {}}),
        namespace="ml",
        benchmark="b",
        uid="u",
        job="b-1",
        image="img",
    )
    assert isinstance(problem, SpecProblem) and problem.reason == "GpuSamplerNotPermitted", problem
    assert "create pods in ml" in problem.message and "mcp-operator-gpu-sampler" in problem.message
    assert not [c for c in kube_fake.calls if c.verb == "create" and c.kind in ("Pod", "Service")]
