"""zoneOutage and nodeDrain: cordon nodes, then evict (or delete) the pods on them, of the
CR's namespace only. Nodes are cluster-scoped, so the pods that would go count against
``maxPods`` and the nodes against ``maxNodes``; other namespaces' pods are never touched.

Undo data: ``{"namespace", "nodes", "cordon", "pods": [{"name", "uid"}], "evict", "zone"}``,
where ``cordon`` lists the nodes that were schedulable at plan time: revert uncordons exactly
those, so a node someone had cordoned before the drill stays cordoned.

A zoneOutage with ``outage: nodesDown`` takes the zone's nodes down instead: each is annotated
``mcp2026.io/outage`` for the outage agent on it (the harness's kubelet is one: it stops posting
status and freezes its pods), and the injection waits until every node is NotReady, so the
node-lifecycle controller's taints and evictions are what the drill measures; no node NotReady
within the timeout is ``OutageNotTaken`` (no agent acted) and the annotation goes again. Undo
data adds ``"outage": "nodesDown"`` and ``"timeout"``; revert removes the annotation.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from kubernetes.client.exceptions import ApiException

from ... import kube
from ...api.drill import OUTAGE_ANNOTATION, FaultPolicy, FaultSpec
from .base import Apis, FaultRefused, PlannedFault, names_shown, undo_field
from .pods import pod_refs, take_pods
from .safety import check_budgets, check_nodes, check_pods, require_controllers
from .selection import drained

ZONE_LABEL = "topology.kubernetes.io/zone"
DOWN_POLL_S = 0.5
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
    if fault.kind == "zoneOutage" and fault.outage == "nodesDown":
        down: dict[str, Any] = {"namespace": namespace, "nodes": names, "cordon": [], "pods": refs}
        down.update(zone=fault.zone, outage="nodesDown", timeout=fault.outage_timeout_seconds)
        target = f"nodes {names_shown(names)} ({fault.zone}) down; {len(refs)} pod(s) of {namespace} on them"
        return PlannedFault(fault.kind, target, down)
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


async def _annotate(apis: Apis, node: str, value: str | None) -> None:
    await kube.call(apis.core.patch_node, node, {"metadata": {"annotations": {OUTAGE_ANNOTATION: value}}})


def _not_ready(node: Any) -> bool:
    conditions = (node.status.conditions if node.status else None) or []
    return not any(c.type == "Ready" and c.status == "True" for c in conditions)


async def _take_down(undo: dict[str, Any], apis: Apis) -> str:
    """Annotate every node, then wait until each is NotReady (or Unknown): the outage is real
    only once the cluster sees it."""
    nodes = undo_field(undo, "nodes", list)
    zone = str(undo.get("zone") or "")
    for node in nodes:
        await _annotate(apis, node, zone or "down")
    began = time.monotonic()
    deadline = began + float(undo.get("timeout") or 60)
    waiting = list(nodes)
    while waiting:
        listed = [await kube.call(apis.core.read_node, node) for node in waiting]
        waiting = [n.metadata.name for n in listed if not _not_ready(n)]
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise FaultRefused(
                "OutageNotTaken",
                f"annotated {names_shown(nodes)} {OUTAGE_ANNOTATION}, but {names_shown(waiting)} still Ready "
                f"after {time.monotonic() - began:.0f} s: no outage agent acted on it (a nodesDown zone "
                "outage needs one on each node, e.g. the harness's kubelet)",
            )
        await asyncio.sleep(DOWN_POLL_S)
    return (
        f"nodes {names_shown(nodes)} down: NotReady {time.monotonic() - began:.1f} s after the outage began"
    )


async def inject(undo: dict[str, Any], apis: Apis) -> str:
    if undo.get("outage") == "nodesDown":
        return await _take_down(undo, apis)
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


async def _bring_up(undo: dict[str, Any], apis: Apis) -> str:
    """Remove the outage annotation where it still is; a node that is gone has nothing to undo."""
    up: list[str] = []
    for node in undo_field(undo, "nodes", list):
        try:
            current = await kube.call(apis.core.read_node, node)
        except ApiException as exc:
            if exc.status == 404:
                continue
            raise
        if OUTAGE_ANNOTATION in (current.metadata.annotations or {}):
            await _annotate(apis, node, None)
            up.append(node)
    shown = f"brought {names_shown(up)} back up" if up else "no node left down"
    return shown + "; the node-lifecycle controller's taints go once they post status again"


async def revert(undo: dict[str, Any], apis: Apis) -> str:
    """Uncordon the nodes this fault cordoned that are still unschedulable; a node that is gone
    has nothing left to undo. Safe before, during and after the injection."""
    if undo.get("outage") == "nodesDown":
        return await _bring_up(undo, apis)
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
