"""The preflight's pure checks: placement, quotas, the image and account, and the condition they
write; and the scheduler's message read from a pod's PodScheduled condition."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from mcp_operator.api import MCPBenchmarkSpec
from mcp_operator.benchmark.preflight import (
    NodeView,
    Observed,
    QuotaView,
    Taint,
    findings,
    placement_findings,
    preflight_fields,
    quota_findings,
    scheduling_conditions,
    unschedulable_message,
)
from mcp_operator.conditions import condition

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")
H200 = NodeView("gpu-0", {"nvidia.com/gpu.product": "NVIDIA-H200"}, (GPU_TAINT,), gpus=8)
CPU = NodeView("cpu-0", {"kubernetes.io/os": "linux"})
NOW = "2026-12-03T04:00:00Z"


def _spec(**runner: Any) -> MCPBenchmarkSpec:
    return MCPBenchmarkSpec.model_validate(
        {
            "target": {"url": "http://infer:8000"},
            "load": {"concurrency": [1], "requests": 1},
            "shards": 2,
            "runner": runner,
        }
    )


GPU_RUNNER = {
    "gpus": 1,
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H200"},
    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
}


def _reasons(found: list[Any]) -> list[str]:
    return [f.reason for f in found]


def test_a_gpu_node_with_the_labels_and_a_tolerated_taint_fits() -> None:
    assert placement_findings(_spec(**GPU_RUNNER), [CPU, H200]) == []
    assert placement_findings(_spec(), [CPU, H200]) == []  # no selector, no GPU: the CPU node fits


def test_each_placement_filter_has_its_own_reason() -> None:
    assert _reasons(placement_findings(_spec(**{**GPU_RUNNER, "gpus": 9}), [CPU, H200])) == [
        "InsufficientGpu"
    ]
    no_toleration = {**GPU_RUNNER, "tolerations": []}
    found = placement_findings(_spec(**no_toleration), [CPU, H200])
    assert (
        _reasons(found) == ["TaintsNotTolerated"] and "nvidia.com/gpu=present:NoSchedule" in found[0].message
    )
    found = placement_findings(_spec(nodeSelector={"pool": "nowhere"}), [CPU, H200])
    assert _reasons(found) == ["NoNodeMatchesSelector"] and "pool=nowhere" in found[0].message
    cordoned = NodeView("gpu-1", H200.labels, H200.taints, gpus=8, unschedulable=True)
    assert _reasons(placement_findings(_spec(**GPU_RUNNER), [CPU, cordoned])) == ["NoNodeMatchesSelector"]
    assert _reasons(placement_findings(_spec(), [])) == ["NoSchedulableNode"]
    # a GPU request with no selector: only a node offering GPUs will do, whatever its labels
    assert _reasons(placement_findings(_spec(gpus=1), [CPU])) == ["InsufficientGpu"]


def test_toleration_matching_follows_kubernetes() -> None:
    equal = [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "present"}]
    wrong_value = [{"key": "nvidia.com/gpu", "value": "absent"}]
    everything = [{"operator": "Exists"}]
    other_effect = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}]
    for tolerations, fits in ((equal, True), (wrong_value, False), (everything, True), (other_effect, False)):
        found = placement_findings(_spec(gpus=1, tolerations=tolerations), [H200])
        assert (found == []) is fits, tolerations
    soft = NodeView("gpu-2", {}, (Taint("dedicated", "x", "PreferNoSchedule"),), gpus=1)
    assert placement_findings(_spec(gpus=1), [soft]) == []  # PreferNoSchedule never keeps a pod off


def test_quota_must_leave_room_for_all_shards_at_once() -> None:
    roomy = QuotaView(
        "team", {"pods": "10", "requests.cpu": "4", "requests.nvidia.com/gpu": "8"}, {"pods": "1"}
    )
    assert quota_findings(_spec(**GPU_RUNNER), [roomy]) == []
    tight = QuotaView(
        "team", {"pods": "2", "requests.memory": "3Gi", "requests.nvidia.com/gpu": "1"}, {"pods": "1"}
    )
    found = quota_findings(_spec(**GPU_RUNNER), [tight])  # 2 shards: 2 pods, 2 GPUs, 2Gi
    assert _reasons(found) == ["QuotaExceeded"]
    assert (
        "pods needs 2, 1 left" in found[0].message
        and "requests.nvidia.com/gpu needs 2, 1 left" in found[0].message
    )
    assert "memory" not in found[0].message
    millis = QuotaView("m", {"cpu": "1500m"}, {"cpu": "0"})
    assert _reasons(quota_findings(_spec(cpu="800m"), [millis])) == ["QuotaExceeded"]
    assert quota_findings(_spec(cpu="750m"), [millis]) == []


def test_image_account_and_target_findings_come_first_and_unread_facts_are_no_findings() -> None:
    spec = _spec(serviceAccountName="bench")
    seen = Observed(
        nodes=None, quotas=None, account_exists=False, image="", target_error="connection refused"
    )
    assert _reasons(findings(spec, seen)) == ["TargetUnreachable", "NoRunnerImage", "ServiceAccountMissing"]
    fine = Observed(nodes=[CPU], quotas=[], account_exists=None, image="runner:1")
    assert findings(spec, fine) == []


def test_condition_per_mode() -> None:
    found = placement_findings(_spec(**{**GPU_RUNNER, "gpus": 9}), [H200])
    block, conds = preflight_fields(
        mode="strict", found=found, server={}, conditions=[], generation=3, now=NOW
    )
    passed = condition(conds, "PreflightPassed") or {}
    assert (passed["status"], passed["reason"], passed["observedGeneration"]) == (
        "False",
        "InsufficientGpu",
        3,
    )
    assert block.findings[0].reason == "InsufficientGpu"
    _, conds = preflight_fields(mode="warn", found=found, server={}, conditions=[], generation=3, now=NOW)
    assert "the run goes on" in (condition(conds, "PreflightPassed") or {})["message"]
    server = {"serverName": "mcp-refserver", "serverVersion": "1.2"}
    block, conds = preflight_fields(
        mode="strict", found=[], server=server, conditions=[], generation=3, now=NOW
    )
    passed = condition(conds, "PreflightPassed") or {}
    assert passed["status"] == "True" and "mcp-refserver 1.2" in passed["message"]
    assert block.to_patch()["server"] == server
    _, conds = preflight_fields(mode="off", found=[], server={}, conditions=[], generation=3, now=NOW)
    assert (condition(conds, "PreflightPassed") or {})["status"] == "Unknown"


def _pod(name: str, phase: str, scheduled: client.V1PodCondition | None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name),
        status=client.V1PodStatus(phase=phase, conditions=[scheduled] if scheduled else None),
    )


def test_the_schedulers_message_is_reported_and_withdrawn_once_placed() -> None:
    said = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    stuck = client.V1PodCondition(type="PodScheduled", status="False", reason="Unschedulable", message=said)
    placed = client.V1PodCondition(type="PodScheduled", status="True")
    pods = [_pod("run-0", "Running", placed), _pod("run-1", "Pending", stuck)]
    message = unschedulable_message(pods)
    assert message == f"shard pod run-1: {said}"
    assert unschedulable_message([_pod("run-0", "Pending", None), pods[0]]) is None

    running = [{"type": "Ready", "status": "Unknown", "reason": "Running", "message": "waiting"}]
    conds = scheduling_conditions(running, 1, message, NOW)
    assert conds is not None
    ready = condition(conds, "Ready") or {}
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "Unschedulable", message)
    assert scheduling_conditions(conds, 1, message, NOW) is None  # said once
    back = scheduling_conditions(conds, 1, None, NOW)
    assert back is not None and (condition(back, "Ready") or {})["status"] == "Unknown"
    assert scheduling_conditions(running, 1, None, NOW) is None
