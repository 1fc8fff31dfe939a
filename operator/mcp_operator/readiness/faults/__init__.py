"""Faults for MCPReadiness drills: plan (read, check safety, pick targets, compute the undo
data before anything changes), inject, and revert (idempotent, from the undo data alone).

Kinds: podKill, zoneOutage, nodeDrain, scaleDown, rolloutRestart, configHotUpdate,
etcdLeaderMove (only where the operator was given etcd's endpoints) and chaosMesh (only where
Chaos Mesh's CRDs exist). Faults act only in a namespace labelled
``mcp2026.io/fault-injection=enabled``, within the policy's blast radius; evictions respect
PodDisruptionBudgets and are never forced.
"""

from .base import FaultRefused, PlannedFault
from .hotupdate import content_hash
from .lifecycle import KINDS, inject_fault, plan_fault, revert_fault

__all__ = [
    "KINDS",
    "FaultRefused",
    "PlannedFault",
    "content_hash",
    "inject_fault",
    "plan_fault",
    "revert_fault",
]
