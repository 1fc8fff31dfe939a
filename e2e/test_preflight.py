"""MCPBenchmark preflight against the real scheduler and kwok GPU nodes (8 nvidia.com/gpu each,
tainted nvidia.com/gpu=present:NoSchedule): a run that cannot start is said within seconds, with
its own reason, before any Job in strict mode; in warn mode the run goes on and an unschedulable
shard is reported from its pod's PodScheduled condition, long before the Job's deadline."""

from __future__ import annotations

import time
from typing import Any

import yaml

from mcp_devcluster import stack

SAMPLE = "mcpbenchmark-refserver.yaml"
GPU_NODES = {
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}
LOCAL = {"mcp2026.io/local-runner": "true"}  # the node whose pods really run


def _bench(refserver: str, preflight: str, **runner: Any) -> dict[str, Any]:
    return {
        "target": {"url": refserver, "backend": "http", "path": "/health"},
        "load": {"concurrency": [1], "requests": 5},
        "shards": 2,
        "preflight": preflight,
        "runner": runner,
    }


def _ready_false(
    kube: Any, name: str, spec: dict[str, Any], timeout_s: float = 10
) -> tuple[dict[str, Any], float]:
    """Apply the benchmark; it once Ready is False, and how long after the apply began that was seen."""
    started = time.monotonic()
    kube.apply(stack.custom_resource("MCPBenchmark", name, spec))

    def ready_false() -> dict[str, Any] | None:
        obj = kube.get("mcpbenchmark", name)
        return obj if stack.condition_of(obj).get("status") == "False" else None

    obj = stack.until(
        ready_false, f"{name} is Ready False", timeout_s, lambda: kube.get("mcpbenchmark", name)
    )
    return obj, time.monotonic() - started


def _stopped(kube: Any, name: str, spec: dict[str, Any], reason: str) -> dict[str, Any]:
    """strict: the finding's reason on Ready and PreflightPassed, the run Failed, and no Job."""
    obj, took = _ready_false(kube, name, spec)
    print(f"{name}: Ready False {stack.condition_of(obj)['reason']} {took:.2f} s after apply")
    assert stack.condition_of(obj)["reason"] == reason, obj["status"]
    passed = stack.condition_of(obj, "PreflightPassed")
    assert (passed["status"], passed["reason"]) == ("False", reason)
    assert obj["status"]["phase"] == "Failed" and "jobName" not in obj["status"]
    assert obj["status"]["preflight"]["findings"][0]["reason"] == reason
    assert kube.run("get", "jobs", "-o", "name").stdout.strip() == ""
    assert reason in {e["reason"] for e in kube.events(name)}
    return obj


def test_strict_gpu_request_no_node_can_satisfy_stops_the_run_within_seconds(
    kube: Any, refserver: str
) -> None:
    obj = _stopped(kube, "too-many-gpus", _bench(refserver, "strict", gpus=9, **GPU_NODES), "InsufficientGpu")
    assert "asks for 9 nvidia.com/gpu" in stack.condition_of(obj)["message"]
    assert "the most any eligible node has allocatable is 8" in stack.condition_of(obj)["message"]


def test_strict_node_selector_matching_nothing(kube: Any, refserver: str) -> None:
    spec = _bench(refserver, "strict", nodeSelector={"pool": "nowhere"})
    obj = _stopped(kube, "no-pool", spec, "NoNodeMatchesSelector")
    assert "pool=nowhere" in stack.condition_of(obj)["message"]


def test_strict_missing_service_account(kube: Any, refserver: str) -> None:
    spec = _bench(refserver, "strict", serviceAccountName="bench-missing", nodeSelector=LOCAL)
    obj = _stopped(kube, "no-account", spec, "ServiceAccountMissing")
    assert "bench-missing" in stack.condition_of(obj)["message"]


def test_strict_quota_that_forbids_the_pods(kube: Any, refserver: str) -> None:
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "small"},
        "spec": {"hard": {"pods": "1", "requests.nvidia.com/gpu": "1"}},
    }
    kube.apply(yaml.safe_dump(quota))
    spec = _bench(refserver, "strict", gpus=1, **GPU_NODES)  # 2 shards: 2 pods, 2 GPUs
    obj = _stopped(kube, "over-quota", spec, "QuotaExceeded")
    message = stack.condition_of(obj)["message"]
    assert "small: pods needs 2" in message and "requests.nvidia.com/gpu needs 2" in message


def test_warn_records_the_finding_runs_on_and_reports_the_unschedulable_shard(
    kube: Any, refserver: str
) -> None:
    spec = _bench(refserver, "warn", gpus=9, **GPU_NODES)
    spec["runner"]["activeDeadlineSeconds"] = 600  # reported long before this
    obj, took = _ready_false(kube, "warned", spec)
    print(f"warned: Ready False {stack.condition_of(obj)['reason']} {took:.2f} s after apply")
    ready = stack.condition_of(obj)
    assert ready["reason"] == "Unschedulable", obj["status"]
    assert ready["message"].startswith("shard pod ") and "nvidia.com/gpu" in ready["message"]
    passed = stack.condition_of(obj, "PreflightPassed")
    assert (passed["status"], passed["reason"]) == ("False", "InsufficientGpu")
    assert "the run goes on" in passed["message"]
    assert obj["status"]["phase"] == "Running" and obj["status"]["jobName"]
    assert kube.get("job", obj["status"]["jobName"])["spec"]["completions"] == 2
    assert {"InsufficientGpu", "Unschedulable"} <= {e["reason"] for e in kube.events("warned")}


def test_off_skips_the_preflight(kube: Any, refserver: str) -> None:
    kube.apply(
        stack.custom_resource("MCPBenchmark", "unchecked", _bench(refserver, "off", nodeSelector=LOCAL))
    )
    assert kube.wait("mcpbenchmark/unchecked", "condition=Complete", timeout_s=120).returncode == 0
    obj = kube.get("mcpbenchmark", "unchecked")
    stack.passed_or_flagged_apart(obj)  # a busy host may start one shard late: flagged, not failed
    passed = stack.condition_of(obj, "PreflightPassed")
    assert (passed["status"], passed["reason"]) == ("Unknown", "PreflightSkipped")


def test_the_sample_passes_its_preflight_with_the_targets_fingerprint(
    kube: Any, refserver: str, sample: Any
) -> None:
    kube.apply(sample(SAMPLE, refserver))
    assert kube.wait("mcpbenchmark/refserver-bench", "condition=Complete", timeout_s=120).returncode == 0
    obj = kube.get("mcpbenchmark", "refserver-bench")
    stack.passed_or_flagged_apart(obj)
    passed = stack.condition_of(obj, "PreflightPassed")
    assert (passed["status"], passed["reason"]) == ("True", "PreflightPassed"), obj["status"]
    assert obj["status"]["preflight"]["findings"] == []
    assert obj["status"]["preflight"]["server"]["serverName"] == "mcp-refserver"
    assert obj["status"]["phase"] == "Succeeded"
