from __future__ import annotations

from kubernetes import client

from mcp_operator.api.common import Condition
from mcp_operator.readiness.podgate import gate_condition, needs_update, selector

T0 = "2026-01-01T00:00:00Z"


def ready(status: str, reason: str, message: str = "") -> Condition:
    return Condition.model_validate(
        {"type": "Ready", "status": status, "reason": reason, "message": message, "lastTransitionTime": T0}
    )


def test_gate_condition_mirrors_ready_and_unknown_is_not_ready() -> None:
    passed = gate_condition("mcp2026.io/ready", ready("True", "ChecksPassed", "1/1"), T0)
    assert passed["lastTransitionTime"] == T0
    assert (
        passed["type"] == "mcp2026.io/ready"
        and passed["status"] == "True"
        and passed["reason"] == "ChecksPassed"
        and passed["message"] == "1/1"
    )
    running = gate_condition("mcp2026.io/ready", ready("Unknown", "Evaluating"), T0)
    assert running["status"] == "False"
    never = gate_condition("x/ready", None, T0)
    assert never["status"] == "False" and never["reason"] == "NotEvaluated"


def test_needs_update_only_when_status_or_reason_differ() -> None:
    wanted = gate_condition("mcp2026.io/ready", ready("True", "ChecksPassed"), T0)
    same = client.V1PodCondition(type="mcp2026.io/ready", status="True", reason="ChecksPassed")
    flipped = client.V1PodCondition(type="mcp2026.io/ready", status="False", reason="TargetUnreachable")
    other = client.V1PodCondition(type="Ready", status="True")
    assert not needs_update([other, same], wanted)
    assert needs_update([other, flipped], wanted)
    assert needs_update([other], wanted)


def test_selector_is_stable() -> None:
    assert selector({"tier": "gpu", "app": "model"}) == "app=model,tier=gpu"
