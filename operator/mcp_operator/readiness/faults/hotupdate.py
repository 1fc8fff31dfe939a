"""configHotUpdate: write keys into a ConfigMap and roll the new content hash into the
Deployment's pod-template annotation (``checksum/config`` by default), the way a chart does,
so the rollout can be watched by the config-consistency check; or, with ``rollout: false``,
write the ConfigMap alone: the servers reload their mounted copy in place (no new pods) and the
drill times it by what they answer (``mcp_checks.api.wait_served``).

The hash is ``mcp_checks.config.config_hash`` of the ConfigMap's content after the patch, the
same value that check expects. Undo data: ``{"namespace", "configMap", "workload",
"annotation", "set": the keys written, "data": each key's previous value or None (absent),
"previous": the annotation's previous value or None}``. Revert writes back only what differs,
so a fault that was only planned changes nothing, and rolls out again only when the
annotation was changed.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from mcp_checks.api import ConfigContent, config_hash, short

from ... import kube
from ...api.drill import FaultPolicy, FaultSpec
from .base import Apis, FaultRefused, PlannedFault, undo_field, undo_optional
from .workloads import patch_template_annotation, read_deployment, read_if_exists, template_annotations

KIND = "configHotUpdate"


def content_hash(config_map: Any) -> str:
    name = config_map.metadata.name
    return config_hash(
        [ConfigContent("ConfigMap", name, config_map.data or {}, config_map.binary_data or {})]
    )


async def _read_config_map(apis: Apis, namespace: str, name: str) -> Any | None:
    try:
        return await kube.call(apis.core.read_namespaced_config_map, name, namespace)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


async def plan(fault: FaultSpec, namespace: str, policy: FaultPolicy, apis: Apis) -> PlannedFault:
    if fault.config_map is None or not fault.data:
        raise FaultRefused("InvalidFault", "configHotUpdate needs configMap and data")
    config_map = await _read_config_map(apis, namespace, fault.config_map)
    if config_map is None:
        raise FaultRefused("ConfigMapNotFound", f"ConfigMap {namespace}/{fault.config_map} not found")
    deployment = await read_deployment(apis, namespace, fault.workload)
    current = config_map.data or {}
    undo = {
        "namespace": namespace,
        "configMap": fault.config_map,
        "workload": deployment.metadata.name,
        "annotation": fault.annotation,
        "set": dict(fault.data),
        "data": {key: current.get(key) for key in sorted(fault.data)},
        "previous": template_annotations(deployment).get(fault.annotation),
        "rollout": fault.rollout,
    }
    keys = ",".join(sorted(fault.data))
    how = "" if fault.rollout else " (in place)"
    target = (
        f"ConfigMap {namespace}/{fault.config_map} ({keys}), Deployment {namespace}/{undo['workload']}{how}"
    )
    return PlannedFault(KIND, target, undo)


async def inject(undo: dict[str, Any], apis: Apis) -> str:
    namespace, name = undo_field(undo, "namespace", str), undo_field(undo, "configMap", str)
    workload, annotation = undo_field(undo, "workload", str), undo_field(undo, "annotation", str)
    written = undo_field(undo, "set", dict)
    patched = await kube.call(apis.core.patch_namespaced_config_map, name, namespace, {"data": written})
    digest = content_hash(patched)
    if undo.get("rollout") is False:  # the servers reload their mounted copy: no rollout
        return (
            f"wrote {','.join(sorted(written))} into ConfigMap {namespace}/{name} ({short(digest)}); "
            f"Deployment {namespace}/{workload} reloads it in place"
        )
    await patch_template_annotation(apis, namespace, workload, annotation, digest)
    return (
        f"wrote {','.join(sorted(written))} into ConfigMap {namespace}/{name}; Deployment "
        f"{namespace}/{workload} {annotation}={short(digest)} rolls it out"
    )


async def revert(undo: dict[str, Any], apis: Apis) -> str:
    namespace, name = undo_field(undo, "namespace", str), undo_field(undo, "configMap", str)
    workload, annotation = undo_field(undo, "workload", str), undo_field(undo, "annotation", str)
    before: dict[str, str | None] = undo_field(undo, "data", dict)
    previous = undo_optional(undo, "previous")
    parts: list[str] = []
    config_map = await _read_config_map(apis, namespace, name)
    if config_map is None:
        parts.append(f"ConfigMap {namespace}/{name} is gone")
    else:
        current = config_map.data or {}
        changed = {key: value for key, value in before.items() if current.get(key) != value}
        if changed:
            await kube.call(apis.core.patch_namespaced_config_map, name, namespace, {"data": changed})
            parts.append(f"restored {','.join(sorted(changed))} of ConfigMap {namespace}/{name}")
        else:
            parts.append(f"ConfigMap {namespace}/{name} has its previous data")
    deployment = await read_if_exists(apis, namespace, workload)
    if deployment is None:
        parts.append(f"Deployment {namespace}/{workload} is gone")
    elif template_annotations(deployment).get(annotation) != previous:
        await patch_template_annotation(apis, namespace, workload, annotation, previous)
        parts.append(
            f"{annotation} of Deployment {namespace}/{workload} restored: this starts another rollout"
        )
    else:
        parts.append(f"Deployment {namespace}/{workload} has its previous {annotation}")
    return "; ".join(parts)
