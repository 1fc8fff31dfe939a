"""What a simulated node and a local node are, and the sets a cluster starts with by default.

A module of its own because both the cluster (which nodes to create) and ``nodes`` (the Node
objects kwok manages) need it; defined in either one, the two would import each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SimulatedNode:
    """A kwok-managed node; ``gpus`` > 0 advertises ``nvidia.com/gpu``."""

    name: str
    gpus: int = 0
    labels: dict[str, str] = field(default_factory=dict)
    taints: list[dict[str, str]] = field(default_factory=list)


ZONE_LABEL = "topology.kubernetes.io/zone"
# keeps pods that do not ask to be spread on mcp-local, as they were before there was a second
# zone; a zone spread (or a cordoned mcp-local) still places pods on mcp-local-b
STANDBY_TAINT = {"key": "mcp2026.io/standby-zone", "value": "true", "effect": "PreferNoSchedule"}


@dataclass
class LocalNode:
    """A node whose pods the local kubelet runs as processes: its zone, and the pod CIDR (inside
    ``podnet.POD_NETWORK``) its pod IPs come from."""

    name: str
    zone: str
    pod_cidr: str
    taints: list[dict[str, str]] = field(default_factory=list)


def default_local_nodes() -> list[LocalNode]:
    return [
        LocalNode("mcp-local", "zone-a", "10.200.1.0/24"),
        LocalNode("mcp-local-b", "zone-b", "10.200.2.0/24", taints=[dict(STANDBY_TAINT)]),
    ]


def default_nodes() -> list[SimulatedNode]:
    return [
        SimulatedNode("kwok-cpu-0"),
        SimulatedNode(
            "kwok-gpu-0",
            gpus=8,
            labels={"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.present": "true"},
            taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        ),
        SimulatedNode(
            "kwok-gpu-1",
            gpus=8,
            labels={"nvidia.com/gpu.product": "NVIDIA-H200", "nvidia.com/gpu.present": "true"},
            taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        ),
    ]
