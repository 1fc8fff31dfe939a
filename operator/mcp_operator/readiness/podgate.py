"""Pod readiness gates: the verdict of an MCPReadiness mirrored into a condition of the pods
it gates. The kubelet counts a pod Ready only when every ``spec.readinessGates`` condition is
True, so a failing gate keeps new pods out of Service endpoints and stalls a rollout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .. import kube
from ..api.common import Condition
from ..api.readiness import PodReadinessGate


def gate_condition(condition_type: str, ready: Condition | None, now: str) -> dict[str, str]:
    """The pod condition for the Ready condition of the MCPReadiness (Unknown stays False; none
    yet: NotEvaluated)."""
    return {
        "type": condition_type,
        "status": "True" if ready is not None and ready.status == "True" else "False",
        "reason": ready.reason if ready is not None and ready.reason else "NotEvaluated",
        "message": ("" if ready is None else ready.message)[:1024],
        "lastTransitionTime": now,
    }


def needs_update(pod_conditions: list[Any], wanted: Mapping[str, str]) -> bool:
    current = next((c for c in pod_conditions if c.type == wanted["type"]), None)
    return current is None or current.status != wanted["status"] or current.reason != wanted["reason"]


def selector(match_labels: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(match_labels.items()))


async def sync_pods(gate: PodReadinessGate, namespace: str, ready: Condition | None, now: str) -> int:
    """Write the gate condition on every matching pod that does not carry it yet; returns how
    many pods the gate covers."""
    wanted = gate_condition(gate.condition_type, ready, now)
    pods = await kube.call(
        kube.core().list_namespaced_pod, namespace, label_selector=selector(gate.match_labels)
    )
    for pod in pods.items:
        if pod.metadata.deletion_timestamp is not None:
            continue
        if needs_update(pod.status.conditions or [], wanted):
            # strategic merge: conditions merge by type, the kubelet's own ones stay
            await kube.call(
                kube.core().patch_namespaced_pod_status,
                pod.metadata.name,
                namespace,
                {"status": {"conditions": [wanted]}},
            )
    return len(pods.items)
