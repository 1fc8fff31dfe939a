"""The local kubelet's own Node object: registered once, kept Ready by a heartbeat, and its
cordon mirrored into a taint.

Apart from the pods because the Node is another API object with a cadence of its own: the
scheduler places pods here only while the heartbeat says the node is Ready. This control plane
runs no node-lifecycle controller, so the kubelet also plays its part for a cordon: the
``node.kubernetes.io/unschedulable`` taint follows ``spec.unschedulable``, as in a real cluster,
which is what a topology spread with ``nodeTaintsPolicy: Honor`` needs to leave a cordoned
zone out.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from mcp_checks.verdict import utc_now

from .nodespec import ZONE_LABEL, LocalNode

log = logging.getLogger("mcp_devcluster.localnode")

HEARTBEAT_S = 10.0
# the outage agent's contract with the operator (mcp_operator.api.drill.OUTAGE_ANNOTATION): a node
# carrying it is down, its heartbeats stopped and its pods frozen, until it is removed
OUTAGE_ANNOTATION = "mcp2026.io/outage"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def local_node_body(node: LocalNode) -> dict[str, Any]:
    """The Node as first registered, with this machine's CPUs as capacity, its zone and pod CIDR."""
    resources = {"cpu": str(os.cpu_count() or 2), "memory": "16Gi", "pods": "110"}
    spec: dict[str, Any] = {"podCIDR": node.pod_cidr, "podCIDRs": [node.pod_cidr]}
    if node.taints:
        spec["taints"] = node.taints
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node.name,
            "labels": {
                "kubernetes.io/hostname": node.name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "mcp2026.io/local-runner": "true",
                ZONE_LABEL: node.zone,
            },
        },
        "spec": spec,
        "status": {"capacity": resources, "allocatable": resources},
    }


def parse_taint(text: str) -> dict[str, str]:
    """``key[=value]:Effect``, as the kubelet's ``--register-with-taints`` takes it."""
    key_value, sep, effect = text.rpartition(":")
    if not sep or effect not in TAINT_EFFECTS or not key_value:
        raise ValueError(f"taint {text!r}: expected key[=value]:{'|'.join(TAINT_EFFECTS)}")
    key, _, value = key_value.partition("=")
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


def format_taint(taint: dict[str, str]) -> str:
    """The ``key[=value]:Effect`` form ``parse_taint`` reads."""
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint['key']}{value}:{taint['effect']}"


def mirrored_taints(node: client.V1Node) -> list[dict[str, str]] | None:
    """The node's taints with the unschedulable taint present exactly while it is cordoned;
    None when they already are."""
    taints = [
        {k: v for k, v in {"key": t.key, "value": t.value, "effect": t.effect}.items() if v}
        for t in node.spec.taints or []
    ]
    has = any(t["key"] == UNSCHEDULABLE_TAINT for t in taints)
    cordoned = bool(node.spec.unschedulable)
    if has == cordoned:
        return None
    if cordoned:
        return [*taints, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}]
    return [t for t in taints if t["key"] != UNSCHEDULABLE_TAINT]


def follow_cordon(
    core: client.CoreV1Api,
    node: str,
    stopping: threading.Event,
    on_node: Callable[[client.V1Node], None] = lambda node: None,
) -> None:
    """Watch the node and keep the unschedulable taint in line with its cordon, until
    ``stopping``; ``on_node`` sees every version of the Node (its outage annotation). The patch
    carries the resourceVersion it was computed from, so a concurrent change of the taints makes
    it fail (409) and the next event computes it again."""
    selector = f"metadata.name={node}"
    while not stopping.is_set():
        try:
            for event in watch.Watch().stream(core.list_node, field_selector=selector, timeout_seconds=60):
                obj = event["object"]
                if event["type"] in ("ADDED", "MODIFIED"):
                    on_node(obj)
                taints = mirrored_taints(obj) if event["type"] in ("ADDED", "MODIFIED") else None
                if taints is not None:
                    patch = {"metadata": {"resourceVersion": obj.metadata.resource_version}}
                    _patch_taints(core, node, {**patch, "spec": {"taints": taints}})
                if stopping.is_set():
                    return
        except Exception:
            log.exception("node watch failed; watching again")
            time.sleep(1)


def outage_requested(node: client.V1Node) -> bool:
    """Whether the node is asked to go down (``OUTAGE_ANNOTATION``), as a power loss would take
    it: the drill's zoneOutage with ``outage: nodesDown`` sets it, its revert removes it."""
    return OUTAGE_ANNOTATION in ((node.metadata.annotations if node.metadata else None) or {})


def _patch_taints(core: client.CoreV1Api, node: str, body: dict[str, Any]) -> None:
    try:
        core.patch_node(node, body)
    except ApiException as exc:
        if exc.status != 409:
            raise


def ready_node_status(node: str, stamp: str, kubelet_port: int) -> dict[str, Any]:
    """What each heartbeat posts: Ready, the node's addresses, the port its kubelet serves logs
    on (the API server reaches it at the InternalIP), and what runs its pods."""
    return {
        "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "local process runner is posting ready status",
                "lastHeartbeatTime": stamp,
                "lastTransitionTime": stamp,
            }
        ],
        "addresses": [
            {"type": "InternalIP", "address": "127.0.0.1"},
            {"type": "Hostname", "address": node},
        ],
        "nodeInfo": {
            "kubeletVersion": "mcp-local-runner",
            "containerRuntimeVersion": "local-process://",
            "operatingSystem": "linux",
            "architecture": "amd64",
            "kernelVersion": "",
            "osImage": "",
            "machineID": "",
            "systemUUID": "",
            "bootID": "",
            "kubeProxyVersion": "",
        },
    }


def register_node(core: client.CoreV1Api, node: LocalNode, kubelet_port: int) -> None:
    """Create the Node (or find it there from an earlier run), then post the first heartbeat."""
    try:
        core.create_node(local_node_body(node))
    except ApiException as exc:
        if exc.status != 409:
            raise
    post_heartbeat(core, node.name, kubelet_port)


def post_heartbeat(core: client.CoreV1Api, node: str, kubelet_port: int) -> None:
    core.patch_node_status(node, {"status": ready_node_status(node, utc_now(), kubelet_port)})
