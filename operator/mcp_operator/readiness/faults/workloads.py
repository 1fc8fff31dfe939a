"""scaleDown and rolloutRestart on a Deployment of the CR's namespace.

scaleDown undo: ``{"namespace", "workload", "replicas": before, "to": during}``; it goes
through the scale subresource and counts the pods it removes against ``maxPods``.
rolloutRestart undo: ``{"namespace", "workload", "annotation", "previous": value or None}``;
it stamps the pod template as ``kubectl rollout restart`` does. Restoring the annotation is a
change of the pod template too, so a revert of an injected restart starts another rollout.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubernetes.client.exceptions import ApiException

from ... import kube
from ...api.drill import FaultPolicy, FaultSpec
from .base import Apis, FaultRefused, PlannedFault, undo_field, undo_optional

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


async def read_deployment(apis: Apis, namespace: str, name: str | None) -> Any:
    if name is None:
        raise FaultRefused("InvalidFault", "the fault needs workload")
    try:
        return await kube.call(apis.apps.read_namespaced_deployment, name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            raise FaultRefused("WorkloadNotFound", f"Deployment {namespace}/{name} not found") from exc
        raise


async def read_if_exists(apis: Apis, namespace: str, name: str) -> Any | None:
    """The Deployment for a revert, or None when it is gone (nothing left to restore)."""
    try:
        return await kube.call(apis.apps.read_namespaced_deployment, name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def template_annotations(deployment: Any) -> dict[str, str]:
    template = deployment.spec.template
    return dict((template.metadata.annotations if template.metadata else None) or {})


async def patch_template_annotation(
    apis: Apis, namespace: str, name: str, key: str, value: str | None
) -> None:
    """Set (or, with None, remove) one pod-template annotation: a strategic merge that leaves
    the others alone."""
    body = {"spec": {"template": {"metadata": {"annotations": {key: value}}}}}
    await kube.call(apis.apps.patch_namespaced_deployment, name, namespace, body)


async def plan_scale_down(fault: FaultSpec, namespace: str, policy: FaultPolicy, apis: Apis) -> PlannedFault:
    deployment = await read_deployment(apis, namespace, fault.workload)
    name = deployment.metadata.name
    before = 1 if deployment.spec.replicas is None else int(deployment.spec.replicas)
    if fault.replicas >= before:
        raise FaultRefused(
            "NothingSelected",
            f"Deployment {namespace}/{name} has {before} replica(s): "
            f"scaling to {fault.replicas} takes no pod",
        )
    if before - fault.replicas > policy.max_pods:
        raise FaultRefused(
            "BlastRadiusExceeded",
            f"scaling Deployment {namespace}/{name} from {before} to {fault.replicas} would take "
            f"{before - fault.replicas} pods, more than faultPolicy.maxPods ({policy.max_pods})",
        )
    undo = {"namespace": namespace, "workload": name, "replicas": before, "to": fault.replicas}
    return PlannedFault(
        fault.kind, f"Deployment {namespace}/{name} ({before} to {fault.replicas} replicas)", undo
    )


async def _scale(apis: Apis, namespace: str, name: str, replicas: int) -> None:
    await kube.call(
        apis.apps.patch_namespaced_deployment_scale, name, namespace, {"spec": {"replicas": replicas}}
    )


async def inject_scale_down(undo: dict[str, Any], apis: Apis) -> str:
    namespace, name = undo_field(undo, "namespace", str), undo_field(undo, "workload", str)
    to = undo_field(undo, "to", int)
    await _scale(apis, namespace, name, to)
    return f"scaled Deployment {namespace}/{name} from {undo_field(undo, 'replicas', int)} to {to} replicas"


async def revert_scale_down(undo: dict[str, Any], apis: Apis) -> str:
    namespace, name = undo_field(undo, "namespace", str), undo_field(undo, "workload", str)
    before = undo_field(undo, "replicas", int)
    try:
        scale = await kube.call(apis.apps.read_namespaced_deployment_scale, name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return f"Deployment {namespace}/{name} is gone; nothing to restore"
        raise
    now = scale.spec.replicas if scale.spec else None
    if now == before:
        return f"Deployment {namespace}/{name} has its {before} replicas"
    await _scale(apis, namespace, name, before)
    return f"restored Deployment {namespace}/{name} to {before} replicas (was {now})"


async def plan_restart(fault: FaultSpec, namespace: str, policy: FaultPolicy, apis: Apis) -> PlannedFault:
    deployment = await read_deployment(apis, namespace, fault.workload)
    name = deployment.metadata.name
    previous = template_annotations(deployment).get(RESTARTED_AT)
    undo = {"namespace": namespace, "workload": name, "annotation": RESTARTED_AT, "previous": previous}
    return PlannedFault(fault.kind, f"Deployment {namespace}/{name}", undo)


async def inject_restart(undo: dict[str, Any], apis: Apis) -> str:
    namespace, name = undo_field(undo, "namespace", str), undo_field(undo, "workload", str)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await patch_template_annotation(apis, namespace, name, RESTARTED_AT, stamp)
    return f"restarted Deployment {namespace}/{name} ({RESTARTED_AT}={stamp}): a rollout replaces every pod"


async def revert_restart(undo: dict[str, Any], apis: Apis) -> str:
    namespace, name = undo_field(undo, "namespace", str), undo_field(undo, "workload", str)
    previous = undo_optional(undo, "previous")
    deployment = await read_if_exists(apis, namespace, name)
    if deployment is None:
        return f"Deployment {namespace}/{name} is gone; nothing to restore"
    if template_annotations(deployment).get(RESTARTED_AT) == previous:
        return f"Deployment {namespace}/{name} has its previous {RESTARTED_AT}; nothing to restore"
    await patch_template_annotation(apis, namespace, name, RESTARTED_AT, previous)
    shown = "removed" if previous is None else f"restored to {previous}"
    return f"{RESTARTED_AT} of Deployment {namespace}/{name} {shown}: this starts another rollout"
