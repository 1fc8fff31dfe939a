"""chaosMesh: a Chaos Mesh experiment (NetworkChaos, StressChaos, PodChaos, ...) created in the
resource's namespace for the fault's hold and deleted on revert. Chaos Mesh's controller does the
injecting; the drill waits for the experiment's ``AllInjected`` condition, and on revert for
the object to be gone (Chaos Mesh holds it with a finalizer until it has recovered every
target). Where its CRDs do not exist the fault is refused with ChaosMeshNotInstalled before
anything is created; an experiment that is never injected (no controller, nothing selected) is
a ChaosNotInjected refusal, and it is deleted again.

Safety: every selector in the experiment's spec is pinned to this namespace (``namespaces``
set to it; naming another namespace is refused), and the pods its main selector takes count
against ``maxPods``. Undo data: ``{"namespace", "kind", "plural", "name"}``.
"""

from __future__ import annotations

import asyncio
import copy
import math
import time
import uuid
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ... import kube
from ...api.drill import FaultPolicy, FaultSpec
from .base import Apis, FaultRefused, PlannedFault, undo_field
from .safety import check_pods
from .selection import is_running, label_selector

KIND = "chaosMesh"
GROUP, VERSION = "chaos-mesh.org", "v1alpha1"
POLL_S = 0.5
MANAGED_BY = {"app.kubernetes.io/managed-by": "mcp-operator"}


async def chaos_plural(api: client.ApiClient, kind: str) -> str:
    """The plural of ``kind`` from the API's discovery of chaos-mesh.org/v1alpha1."""
    try:
        found = await kube.call(client.CustomObjectsApi(api).get_api_resources, GROUP, VERSION)
    except ApiException as exc:
        if exc.status == 404:
            raise FaultRefused(
                "ChaosMeshNotInstalled",
                f"the API group {GROUP}/{VERSION} does not exist: Chaos Mesh's CRDs are not installed",
            ) from exc
        raise
    for resource in found.resources or []:
        if resource.kind == kind and "/" not in resource.name:
            return str(resource.name)
    raise FaultRefused("ChaosMeshNotInstalled", f"Chaos Mesh is installed without the {kind} CRD")


def _selectors(node: Any) -> list[dict[str, Any]]:
    """Every ``selector`` mapping in the spec (the main one, NetworkChaos's ``target.selector``)."""
    found: list[dict[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "selector" and isinstance(value, dict):
                found.append(value)
            found.extend(_selectors(value))
    elif isinstance(node, list):
        for item in node:
            found.extend(_selectors(item))
    return found


def pinned_spec(spec: dict[str, Any], namespace: str) -> dict[str, Any]:
    """The spec with every selector limited to ``namespace``; another namespace is refused."""
    pinned = copy.deepcopy(spec)
    if not isinstance(pinned.get("selector"), dict):
        pinned["selector"] = {}
    for selector in _selectors(pinned):
        named, pods = selector.get("namespaces") or [], selector.get("pods") or {}
        if not isinstance(named, list) or not isinstance(pods, dict):
            raise FaultRefused(
                "InvalidFault", "a selector's namespaces must be a list and its pods a mapping"
            )
        others = sorted({str(n) for n in named} - {namespace}) + sorted({str(n) for n in pods} - {namespace})
        if others:
            raise FaultRefused(
                "OutsideNamespace",
                f"the experiment's selector names namespaces {', '.join(others)}: faults stay in {namespace}",
            )
        selector["namespaces"] = [namespace]
    return pinned


def taken(mode: str, value: str, matched: int) -> int:
    """How many of ``matched`` pods Chaos Mesh's mode takes, at most."""
    try:
        number = float(value) if value else 0.0
    except ValueError:
        number = 0.0
    if mode == "one":
        return min(1, matched)
    if mode == "fixed":
        return min(matched, max(0, int(number)))
    if mode in ("fixed-percent", "random-max-percent"):
        return min(matched, math.ceil(matched * number / 100))
    return matched  # all, or a mode this version does not know: count the worst case


async def plan(fault: FaultSpec, namespace: str, policy: FaultPolicy, apis: Apis) -> PlannedFault:
    chaos = fault.chaos
    if chaos is None:
        raise FaultRefused("InvalidFault", "chaosMesh needs chaos")
    plural = await chaos_plural(apis.core.api_client, chaos.kind)
    spec = pinned_spec(chaos.spec, namespace)
    labels = spec["selector"].get("labelSelectors") or {}
    if not isinstance(labels, dict):
        raise FaultRefused("InvalidFault", "chaos.spec.selector.labelSelectors must be a mapping")
    try:
        listed = await kube.call(
            apis.core.list_namespaced_pod, namespace, label_selector=label_selector(labels) or None
        )
    except ApiException as exc:
        if exc.status != 400:
            raise
        raise FaultRefused("InvalidFault", f"chaos.spec.selector.labelSelectors: {exc.reason}") from exc
    running = sorted(p.metadata.name for p in listed.items if is_running(p))
    count = taken(str(spec.get("mode", "all")), str(spec.get("value", "")), len(running))
    if count == 0:
        raise FaultRefused(
            "NothingSelected", f"no Running pod of {namespace} matches the experiment's selector"
        )
    check_pods(policy, namespace, running[:count], f"{chaos.kind}")
    name = f"mcp-drill-{uuid.uuid4().hex[:8]}"
    undo = {
        "namespace": namespace,
        "kind": chaos.kind,
        "plural": plural,
        "name": name,
        "spec": spec,
        "injectTimeoutSeconds": chaos.inject_timeout_seconds,
        "recoverTimeoutSeconds": chaos.recover_timeout_seconds,
    }
    return PlannedFault(KIND, f"{chaos.kind} {namespace}/{name} ({count} pod(s) at most)", undo)


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {
        str(c.get("type")): str(c.get("status"))
        for c in ((obj.get("status") or {}).get("conditions") or [])
        if isinstance(c, dict)
    }


async def inject(undo: dict[str, Any], apis: Apis) -> str:
    namespace, kind = undo_field(undo, "namespace", str), undo_field(undo, "kind", str)
    plural, name = undo_field(undo, "plural", str), undo_field(undo, "name", str)
    timeout = float(undo.get("injectTimeoutSeconds") or 30)
    custom = client.CustomObjectsApi(apis.core.api_client)
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name, "labels": MANAGED_BY},
        "spec": undo_field(undo, "spec", dict),
    }
    await kube.create_or_exists(
        custom.create_namespaced_custom_object, GROUP, VERSION, namespace, plural, body
    )
    started = time.monotonic()
    conditions: dict[str, str] = {}
    while time.monotonic() - started < timeout:
        obj = await kube.call(custom.get_namespaced_custom_object, GROUP, VERSION, namespace, plural, name)
        conditions = _conditions(obj)
        if conditions.get("AllInjected") == "True":
            return f"created {kind} {namespace}/{name}; AllInjected after {time.monotonic() - started:.1f} s"
        await asyncio.sleep(POLL_S)
    seen = (
        ", ".join(f"{k}={v}" for k, v in sorted(conditions.items()))
        or "none (no Chaos Mesh controller acted on it)"
    )
    raise FaultRefused(
        "ChaosNotInjected",
        f"{kind} {namespace}/{name} was created, but AllInjected did not become True within {timeout:g} s; "
        f"conditions: {seen}",
    )


async def revert(undo: dict[str, Any], apis: Apis) -> str:
    namespace, kind = undo_field(undo, "namespace", str), undo_field(undo, "kind", str)
    plural, name = undo_field(undo, "plural", str), undo_field(undo, "name", str)
    timeout = float(undo.get("recoverTimeoutSeconds") or 30)
    custom = client.CustomObjectsApi(apis.core.api_client)
    try:
        await kube.call(custom.delete_namespaced_custom_object, GROUP, VERSION, namespace, plural, name)
    except ApiException as exc:
        if exc.status == 404:
            return f"{kind} {namespace}/{name} does not exist; nothing to remove"
        raise
    started = time.monotonic()
    finalizers: list[str] = []
    while time.monotonic() - started < timeout:
        try:
            obj = await kube.call(
                custom.get_namespaced_custom_object, GROUP, VERSION, namespace, plural, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return f"deleted {kind} {namespace}/{name}: gone after {time.monotonic() - started:.1f} s"
            raise
        finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
        await asyncio.sleep(POLL_S)
    raise RuntimeError(
        f"{kind} {namespace}/{name} still exists {timeout:g} s after its deletion (finalizers: "
        f"{', '.join(finalizers) or 'none'}): Chaos Mesh has not recovered its targets"
    )
