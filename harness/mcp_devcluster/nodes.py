"""Node objects for the simulated (kwok) nodes, and readiness checks on the cluster."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from .nodespec import SimulatedNode


def api_client(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


def simulated_node_body(node: SimulatedNode) -> dict[str, object]:
    """A Node that kwok manages (label ``type=kwok``), with GPUs in capacity when asked."""
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    if node.gpus:
        resources["nvidia.com/gpu"] = str(node.gpus)
    labels = {
        "type": "kwok",
        "kubernetes.io/hostname": node.name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        **node.labels,
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node.name, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": node.taints} if node.taints else {},
        "status": {"capacity": resources, "allocatable": resources},
    }


def create_simulated_nodes(kubeconfig: Path, nodes: list[SimulatedNode]) -> None:
    with api_client(kubeconfig) as api:
        core = client.CoreV1Api(api)
        for node in nodes:
            try:
                core.create_node(simulated_node_body(node))
            except ApiException as exc:
                if exc.status != 409:
                    raise


def wait_nodes_ready(kubeconfig: Path, names: list[str]) -> bool:
    """True once every named node reports Ready=True."""
    with api_client(kubeconfig) as api:
        core = client.CoreV1Api(api)
        ready = set()
        for node in core.list_node().items:
            for cond in node.status.conditions or []:
                if cond.type == "Ready" and cond.status == "True":
                    ready.add(node.metadata.name)
    return set(names) <= ready


def wait_default_service_account(kubeconfig: Path) -> bool:
    """Pods need the ``default`` service account, which the controller manager creates."""
    with api_client(kubeconfig) as api:
        try:
            client.CoreV1Api(api).read_namespaced_service_account("default", "default")
        except ApiException:
            return False
    return True
