"""plan, inject and revert for every fault kind: one table from kind to its three steps.

``plan_fault`` checks the opt-in label first, before it reads anything else; each kind then
picks its targets and passes the blast-radius rules, and last the operator must hold the rights
the planned fault needs (the namespace owner's RoleBinding). ``revert_fault`` never checks the label:
a namespace that opted out since must still get its faults undone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from ...api.drill import FaultPolicy, FaultSpec
from . import base, chaos, controlplane, hotupdate, nodes, pods, workloads
from .base import Apis, FaultRefused, PlannedFault
from .safety import require_opt_in, require_rights

Undo = dict[str, Any]


@dataclass(frozen=True)
class Steps:
    plan: Callable[[FaultSpec, str, FaultPolicy, Apis], Awaitable[PlannedFault]]
    inject: Callable[[Undo, Apis], Awaitable[str]]
    revert: Callable[[Undo, Apis], Awaitable[str]]


KINDS: dict[str, Steps] = {
    "podKill": Steps(pods.plan, pods.inject, pods.revert),
    "zoneOutage": Steps(nodes.plan, nodes.inject, nodes.revert),
    "nodeDrain": Steps(nodes.plan, nodes.inject, nodes.revert),
    "scaleDown": Steps(workloads.plan_scale_down, workloads.inject_scale_down, workloads.revert_scale_down),
    "rolloutRestart": Steps(workloads.plan_restart, workloads.inject_restart, workloads.revert_restart),
    "configHotUpdate": Steps(hotupdate.plan, hotupdate.inject, hotupdate.revert),
    "etcdLeaderMove": Steps(controlplane.plan, controlplane.inject, controlplane.revert),
    "chaosMesh": Steps(chaos.plan, chaos.inject, chaos.revert),
}


def _steps(kind: str) -> Steps:
    steps = KINDS.get(kind)
    if steps is None:
        raise FaultRefused("UnknownFaultKind", f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")
    return steps


async def plan_fault(
    fault: FaultSpec, namespace: str, policy: FaultPolicy, api: client.ApiClient
) -> PlannedFault:
    """Read the cluster, check safety, pick targets; touches nothing. Raises FaultRefused."""
    steps = _steps(fault.kind)
    apis = base.apis(api)
    await require_opt_in(apis, namespace)
    planned = await steps.plan(fault, namespace, policy, apis)
    await require_rights(apis, namespace, planned)
    return planned


async def inject_fault(planned: PlannedFault, api: client.ApiClient) -> str:
    """Apply a planned fault; returns what was done. Raises FaultRefused (e.g. EvictionRefused)
    or ApiException, possibly part way: revert_fault undoes whatever part was applied."""
    return await _steps(planned.kind).inject(planned.undo, base.apis(api))


async def revert_fault(kind: str, undo: Undo, api: client.ApiClient) -> str:
    """Undo a fault from its journaled undo data; idempotent, and safe for a fault that was only
    planned or half injected. Returns what was done; raises when it could not be undone."""
    return await _steps(kind).revert(undo, base.apis(api))
