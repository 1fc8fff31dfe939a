"""The local kubelet's own Node object: registered once, then kept Ready by a heartbeat.

Apart from the pods because the Node is another API object with a cadence of its own: the
scheduler places pods here only while the heartbeat says the node is Ready.
"""

from __future__ import annotations

import os
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from mcp_checks.verdict import utc_now

HEARTBEAT_S = 10.0


def local_node_body(node: str) -> dict[str, Any]:
    """The Node as first registered, with this machine's CPUs as capacity."""
    resources = {"cpu": str(os.cpu_count() or 2), "memory": "16Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node,
            "labels": {
                "kubernetes.io/hostname": node,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "mcp2026.io/local-runner": "true",
            },
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def ready_node_status(node: str, stamp: str) -> dict[str, Any]:
    """What each heartbeat posts: Ready, the node's addresses, and what runs its pods."""
    return {
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


def register_node(core: client.CoreV1Api, node: str) -> None:
    """Create the Node (or find it there from an earlier run), then post the first heartbeat."""
    try:
        core.create_node(local_node_body(node))
    except ApiException as exc:
        if exc.status != 409:
            raise
    post_heartbeat(core, node)


def post_heartbeat(core: client.CoreV1Api, node: str) -> None:
    core.patch_node_status(node, {"status": ready_node_status(node, utc_now())})
