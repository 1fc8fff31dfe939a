"""The serving GPUs' sampler end to end (spec.observe.gpuSampler): the operator finds the node
the target's pods run on from the Service's EndpointSlices, places one sampler pod there (node
affinity, no GPU request), the shards read it per level through its Service, and the sampler
and its Service are gone once the run is collected, or once the benchmark is deleted. This
machine has no GPU: every level must say ``unavailable`` with the sampler's own reason."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import yaml

from mcp_bench.results.document import loads_document
from mcp_devcluster import stack
from mcp_devcluster.cluster import ClusterState

APP = "served"
PORT = 8080
COMPONENT = "app.kubernetes.io/component=gpu-sampler"


def _serve(kube: Any, cluster: ClusterState) -> str:
    """The reference server as a Deployment on the local node behind a Service; its ClusterIP URL."""
    container = stack.refserver_container()
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": APP},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": APP}},
            "template": {
                "metadata": {"labels": {"app": APP}},
                "spec": {"nodeSelector": {"mcp2026.io/local-runner": "true"}, "containers": [container]},
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": APP},
        "spec": {"selector": {"app": APP}, "ports": [{"name": "http", "port": PORT, "targetPort": "http"}]},
    }
    kube.apply(yaml.safe_dump_all([deployment, service]))
    ip = kube.get("service", APP)["spec"]["clusterIP"]
    deadline = time.monotonic() + 90
    while True:  # the service proxy routes it once the pod is ready
        try:
            with urllib.request.urlopen(f"http://{ip}:{PORT}/health", timeout=2) as resp:
                if resp.status == 200:
                    return f"http://{ip}:{PORT}"
        except OSError:
            pass
        assert time.monotonic() < deadline, "the served reference server never answered"
        time.sleep(0.2)


def _samplers(kube: Any, kind: str = "pods") -> list[dict[str, Any]]:
    out = kube.run("get", kind, "-l", COMPONENT, "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def _watch_sampler(kube: Any, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        pods = _samplers(kube)
        if pods and pods[0]["spec"].get("nodeName"):
            return pods[0]
        assert time.monotonic() < deadline, "no sampler pod was placed"
        time.sleep(0.2)


def _gone(kube: Any, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while _samplers(kube) or _samplers(kube, "services"):
        assert time.monotonic() < deadline, "the sampler pod or its Service was never deleted"
        time.sleep(0.5)


def _bench(name: str, url: str, load: dict[str, Any], shards: int = 2) -> str:
    return stack.custom_resource(
        "MCPBenchmark",
        name,
        {
            "target": {"url": url, "backend": "http", "path": "/health"},
            "load": load,
            "shards": shards,
            "runner": {"nodeSelector": {"mcp2026.io/local-runner": "true"}},
            "observe": {
                "gpuSampler": {"serviceRef": {"name": APP, "port": PORT}, "intervalSeconds": 0.005},
                "serverMetrics": ["vllm"],  # the reference server's vLLM-named /metrics
            },
        },
    )


def test_the_sampler_runs_on_the_servers_node_reports_unavailable_and_is_cleaned_up(
    kube: Any, cluster: ClusterState
) -> None:
    url = _serve(kube, cluster)
    server_node = json.loads(kube.run("get", "pods", "-l", f"app={APP}", "-o", "json").stdout)["items"][0][
        "spec"
    ]["nodeName"]
    kube.apply(_bench("sampled", url, {"concurrency": [2, 4], "durationSeconds": 2}))
    pod = _watch_sampler(kube)
    obj = kube.get("mcpbenchmark", "sampled")

    # placed on the node that runs the target's pod, by affinity to that node, asking for no GPU
    assert pod["spec"]["nodeName"] == server_node
    terms = pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchFields"][0]["values"] == [server_node]
    for container in pod["spec"]["containers"]:
        for part in (container.get("resources") or {}).values():
            assert "nvidia.com/gpu" not in part
    assert [o["uid"] for o in pod["metadata"]["ownerReferences"]] == [obj["metadata"]["uid"]]
    (service,) = _samplers(kube, "services")
    assert [o["uid"] for o in service["metadata"]["ownerReferences"]] == [obj["metadata"]["uid"]]
    # a Service that only carries the sampler's labels: the operator must not delete what it does
    # not own
    decoy = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "decoy-sampler", "labels": service["metadata"]["labels"]},
        "spec": {"ports": [{"port": PORT}]},
    }
    kube.apply(json.dumps(decoy))

    waited = kube.wait("mcpbenchmark/sampled", "condition=Complete", timeout_s=180)
    assert waited.returncode == 0, waited.stderr
    status = kube.get("mcpbenchmark", "sampled")["status"]
    assert status["shards"]["reported"] == 2 and status["reportName"]
    for row in status["results"]:
        # the serving GPUs: honestly unavailable, with the sampler's reason; never a zero
        assert row["servingGpuMemoryPeakPercent"] == "unavailable"
        assert row["servingGpuUtilPercent"] == "unavailable"
        assert row["servingGpuSource"].startswith(f"unavailable: gpu-sampler:{server_node}: ")
        assert "NVML" in row["servingGpuSource"] or "pynvml" in row["servingGpuSource"]
        # the server's side over the level, one figure per metric: a gauge's largest reading
        assert row["serverMetrics"]["vllm-metrics/vllm:num_requests_running"].startswith("max ")
    merged = loads_document(kube.get("configmap", status["reportName"])["data"]["result.json"])
    for level in merged.levels:
        entry = (level.server_metrics or {})[f"gpu-sampler:{server_node}"]
        assert entry["role"] == "serving" and entry["status"] == "unavailable" and "gpus" not in entry
        assert isinstance(level.telemetry, dict) and level.telemetry.get("role") == "load-generator"
    deadline = time.monotonic() + 60
    while _samplers(kube) or [x["metadata"]["name"] for x in _samplers(kube, "services")] != [
        "decoy-sampler"
    ]:
        assert time.monotonic() < deadline, "the sampler pod or its Service was never deleted"
        time.sleep(0.5)  # deleted once the run was collected; the decoy, labelled alike, is not
    kube.run("delete", "service", "decoy-sampler")
    _gone(kube)


def test_deleting_the_benchmark_takes_its_samplers_with_it(kube: Any, cluster: ClusterState) -> None:
    url = _serve(kube, cluster)
    kube.apply(_bench("deleted", url, {"concurrency": [1], "durationSeconds": 120}, shards=1))
    _watch_sampler(kube)
    assert _samplers(kube, "services")
    kube.run("delete", "mcpbenchmark", "deleted", "--wait=false")
    _gone(kube, timeout_s=90)  # owner references: the garbage collector deletes them


def test_a_new_spec_replaces_the_samplers_of_the_run_it_replaced(kube: Any, cluster: ClusterState) -> None:
    url = _serve(kube, cluster)
    kube.apply(_bench("changed", url, {"concurrency": [1], "durationSeconds": 120}, shards=1))
    old = _watch_sampler(kube)["metadata"]["name"]
    kube.apply(_bench("changed", url, {"concurrency": [2], "durationSeconds": 120}, shards=1))
    deadline = time.monotonic() + 60
    while True:  # the new run's sampler only: the old one and its Service are deleted
        pods = [p["metadata"]["name"] for p in _samplers(kube) if not p["metadata"].get("deletionTimestamp")]
        services = [s["metadata"]["name"] for s in _samplers(kube, "services")]
        if pods and old not in pods and old not in services and services == pods:
            break
        assert time.monotonic() < deadline, f"old sampler {old} still there: pods {pods}, services {services}"
        time.sleep(0.5)
    kube.run("delete", "mcpbenchmark", "changed", "--wait=false")
    _gone(kube, timeout_s=90)
