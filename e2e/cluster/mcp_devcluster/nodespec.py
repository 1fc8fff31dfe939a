"""What a simulated node is, and the set a cluster starts with by default.

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
