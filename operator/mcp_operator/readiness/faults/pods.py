"""podKill, and the eviction or deletion of pods that zoneOutage and nodeDrain share.

Undo data: ``{"namespace", "pods": [{"name", "uid"}], "evict"}``. A killed pod cannot be given
back: its controller replaces it (pods without one are refused at plan), so revert has nothing
to restore and says so. Each pod is taken with a UID precondition, so a pod re-created under
the same name (a StatefulSet's) since the plan is left alone.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from ... import kube
from ...api.drill import FaultPolicy, FaultSpec
from .base import Apis, FaultRefused, PlannedFault, api_message, names_shown, undo_field
from .safety import check_budgets, check_pods, require_controllers
from .selection import choose, is_running, label_selector

KIND = "podKill"


def pod_refs(pods: list[Any]) -> list[dict[str, str]]:
    return [
        {"name": p.metadata.name, "uid": p.metadata.uid} for p in sorted(pods, key=lambda p: p.metadata.name)
    ]


def qualified(namespace: str, refs: list[dict[str, Any]]) -> list[str]:
    return [f"{namespace}/{r['name']}" for r in refs]


async def take_pods(apis: Apis, namespace: str, refs: list[dict[str, Any]], evict: bool) -> str:
    """Evict (or delete) each pod in order. A PodDisruptionBudget's 429 stops here with
    EvictionRefused, naming the pods already taken; the eviction is never forced. A pod already
    gone, or replaced under its name, is skipped."""
    taken: list[str] = []
    gone: list[str] = []
    for ref in refs:
        name, uid = str(ref["name"]), str(ref["uid"])
        preconditions = {"preconditions": {"uid": uid}}
        try:
            if evict:
                body = {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": name, "namespace": namespace},
                    "deleteOptions": preconditions,
                }
                await kube.call(apis.core.create_namespaced_pod_eviction, name, namespace, body)
            else:
                await kube.call(apis.core.delete_namespaced_pod, name, namespace, body=preconditions)
        except ApiException as exc:
            if exc.status in (404, 409):
                gone.append(name)
                continue
            if exc.status == 429:
                done = f"; already evicted: {names_shown(taken)}" if taken else ""
                raise FaultRefused(
                    "EvictionRefused",
                    f"the eviction of {namespace}/{name} was refused ({api_message(exc)}); "
                    f"it is not forced{done}",
                ) from exc
            raise
        taken.append(name)
    verb = "evicted" if evict else "deleted"
    message = f"{verb} {len(taken)} pod(s) of {namespace}"
    if taken:
        message += f": {names_shown(taken)}"
    if gone:
        message += f"; already gone or replaced: {names_shown(gone)}"
    return message


async def plan(fault: FaultSpec, namespace: str, policy: FaultPolicy, apis: Apis) -> PlannedFault:
    if fault.pods is None:
        raise FaultRefused("InvalidFault", "podKill needs pods")
    selector = label_selector(fault.pods.match_labels)
    listed = await kube.call(apis.core.list_namespaced_pod, namespace, label_selector=selector)
    running = {p.metadata.name: p for p in listed.items if is_running(p)}
    chosen = [running[n] for n in choose(running, fault.pods.mode, fault.pods.value)]
    if not chosen:
        raise FaultRefused("NothingSelected", f"no Running pod of {namespace} matches {selector}")
    refs = pod_refs(chosen)
    check_pods(policy, namespace, [r["name"] for r in refs], KIND)
    require_controllers(chosen, namespace)
    if fault.evict:
        await check_budgets(apis, namespace, chosen)
    undo = {"namespace": namespace, "pods": refs, "evict": fault.evict}
    return PlannedFault(KIND, f"pods {names_shown(qualified(namespace, refs))}", undo)


async def inject(undo: dict[str, Any], apis: Apis) -> str:
    namespace = undo_field(undo, "namespace", str)
    return await take_pods(apis, namespace, undo_field(undo, "pods", list), bool(undo.get("evict", True)))


async def revert(undo: dict[str, Any], apis: Apis) -> str:
    refs = undo_field(undo, "pods", list)
    names = names_shown(qualified(undo_field(undo, "namespace", str), refs))
    return f"nothing to restore: pods {names} are replaced by their controller"
