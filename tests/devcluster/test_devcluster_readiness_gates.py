from __future__ import annotations

from kubernetes import client

from mcp_devcluster.podstatus import ready_condition


def _pod(gates: list[str], conditions: dict[str, str]) -> client.V1Pod:
    return client.V1Pod(
        spec=client.V1PodSpec(
            containers=[client.V1Container(name="main")],
            readiness_gates=[client.V1PodReadinessGate(condition_type=g) for g in gates],
        ),
        status=client.V1PodStatus(
            conditions=[client.V1PodCondition(type=t, status=s) for t, s in conditions.items()]
        ),
    )


def test_ready_without_gates() -> None:
    assert ready_condition(_pod([], {}), "t")["status"] == "True"


def test_ready_waits_for_every_gate() -> None:
    missing = ready_condition(_pod(["a/ready"], {}), "t")
    assert missing["status"] == "False" and missing["reason"] == "ReadinessGatesNotReady"
    assert "does not exist" in missing["message"]
    false = ready_condition(_pod(["a/ready", "b/ready"], {"a/ready": "True", "b/ready": "False"}), "t")
    assert false["status"] == "False" and "b/ready" in false["message"]
    assert ready_condition(_pod(["a/ready"], {"a/ready": "True"}), "t")["status"] == "True"
