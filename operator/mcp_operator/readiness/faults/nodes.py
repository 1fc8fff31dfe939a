"""zoneOutage and nodeDrain: cordon nodes, then evict (or delete) the pods on them, of the
CR's namespace only. Nodes are cluster-scoped, so the pods that would go count against
``maxPods`` and the nodes against ``maxNodes``; other namespaces' pods are never touched.

Undo data: ``{"namespace", "nodes", "cordon", "pods": [{"name", "uid"}], "evict", "zone"}``,
where ``cordon`` lists the nodes that were schedulable at plan time: revert uncordons exactly
those, so a node someone had cordoned before the drill stays cordoned.
"""

from __future__ import annotations

import re
from typing import Any

from kubernetes.client.exceptions import ApiException

from ... import kube
from ...api.drill import FaultPolicy, FaultSpec
from .base import Apis, FaultRefused, PlannedFault, names_shown, undo_field
from .pods import pod_refs, take_pods
from .safety import check_budgets, check_nodes, check_pods, require_controllers
from .selection import drained

ZONE_LABEL = "topology.kubernetes.io/zone"
# a label value: what a zone can be at all (anything else matches no node)
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


async def _zone_nodes(apis: Apis, zone: str) -> list[Any]:
    if not zone or len(zone) > 63 or not LABEL_VALUE.match(zone):
        return []
    listed = await kube.call(apis.core.list_node, label_selector=f"{ZONE_LABEL}={zone}")
    return list(listed.items)


async def _one_node(apis: Apis, name: str) -> list[Any]:
    try:
        return [await kube.call(apis.core.read_node, name)]
    except ApiException as exc:
        if exc.status == 404:
            return []
        raise


async def plan(fault: FaultSpec, namespace: str, policy: FaultPolicy, apis: Apis) -> PlannedFault:
    if fault.kind == "zoneOutage":
        if fault.zone is None:
            raise FaultRefused("InvalidFault", "zoneOutage needs zone")
        nodes = await _zone_nodes(apis, fault.zone)
        where = f"zone {fault.zone}"
    else:
        if fault.node is None:
            raise FaultRefused("InvalidFault", "nodeDrain needs node")
        nodes = await _one_node(apis, fault.node)
        where = f"node {fault.node}"
    if not nodes:
        raise FaultRefused("NothingSelected", f"no node matches {where}")
    names = sorted(n.metadata.name for n in nodes)
    check_nodes(policy, names, fault.kind)
    listed = await kube.call(apis.core.list_namespaced_pod, namespace)
    victims = [p for p in listed.items if p.spec and p.spec.node_name in names and drained(p)]
    refs = pod_refs(victims)
    check_pods(policy, namespace, [r["name"] for r in refs], fault.kind)
    require_controllers(victims, namespace)
    if fault.evict:
        await check_budgets(apis, namespace, victims)
    undo = {
        "namespace": namespace,
        "nodes": names,
        "cordon": sorted(n.metadata.name for n in nodes if not (n.spec and n.spec.unschedulable)),
        "pods": refs,
        "evict": fault.evict,
        "zone": fault.zone if fault.kind == "zoneOutage" else None,
    }
    zone = f" ({fault.zone})" if fault.kind == "zoneOutage" else ""
    target = f"nodes {names_shown(names)}{zone}; {len(refs)} pod(s) of {namespace}"
    return PlannedFault(fault.kind, target, undo)


async def _set_unschedulable(apis: Apis, node: str, value: bool) -> None:
    await kube.call(apis.core.patch_node, node, {"spec": {"unschedulable": value}})


async def inject(undo: dict[str, Any], apis: Apis) -> str:
    cordon = undo_field(undo, "cordon", list)
    for node in cordon:
        await _set_unschedulable(apis, node, True)
    done = f"cordoned {names_shown(cordon)}" if cordon else "no node to cordon (all were already)"
    namespace = undo_field(undo, "namespace", str)
    try:
        taken = await take_pods(
            apis, namespace, undo_field(undo, "pods", list), bool(undo.get("evict", True))
        )
    except FaultRefused as exc:
        raise FaultRefused(exc.reason, f"{done}; {exc}") from exc
    return f"{done}; {taken}"


async def revert(undo: dict[str, Any], apis: Apis) -> str:
    """Uncordon the nodes this fault cordoned that are still unschedulable; a node that is gone
    has nothing left to undo. Safe before, during and after the injection."""
    uncordoned: list[str] = []
    gone: list[str] = []
    for node in undo_field(undo, "cordon", list):
        try:
            current = await kube.call(apis.core.read_node, node)
        except ApiException as exc:
            if exc.status == 404:
                gone.append(node)
                continue
            raise
        if current.spec and current.spec.unschedulable:
            await _set_unschedulable(apis, node, False)
            uncordoned.append(node)
    message = f"uncordoned {names_shown(uncordoned)}" if uncordoned else "no node left cordoned"
    if gone:
        message += f"; nodes gone: {names_shown(gone)}"
    return message + "; evicted pods are replaced by their controllers"
