"""Register the harness's external metrics API (``metricsadapter``) with a running cluster: the
adapter as a process on an address that the service proxy reaches through a Service (the pod
IP ``ADAPTER_POD_IP``, outside every local node's pod CIDR, served at its loopback twin), that
Service with its Endpoints and EndpointSlice written by hand (it has no selector), and the
APIService ``v1beta1.external.metrics.k8s.io`` that the API server's aggregator proxies to it.

``external_metrics()`` is a context manager: on the way out the APIService goes first (a stale
one would break discovery for every client of the cluster), then the rest, then the process.
"""

from __future__ import annotations

import contextlib
import ipaddress
import ssl
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .cluster import ClusterState
from .nodes import api_client
from .podnet import loopback_twin
from .processes import ManagedProcess, http_ok, stop_pid, wait_until

ADAPTER_POD_IP = "10.200.255.250"
ADAPTER_PORT = 8443
SERVICE = "mcp-external-metrics"
API_SERVICE = "v1beta1.external.metrics.k8s.io"


def _objects(namespace: str) -> list[tuple[str, dict[str, Any]]]:
    meta = {
        "name": SERVICE,
        "namespace": namespace,
        "labels": {"app.kubernetes.io/part-of": "mcp-devcluster"},
    }
    port = {"name": "https", "port": ADAPTER_PORT, "protocol": "TCP"}
    return [
        (
            "service",
            {
                "metadata": meta,
                "spec": {"ports": [{"name": "https", "port": 443, "targetPort": ADAPTER_PORT}]},
            },
        ),
        (
            "endpoints",
            {"metadata": meta, "subsets": [{"addresses": [{"ip": ADAPTER_POD_IP}], "ports": [port]}]},
        ),
        (
            "slice",
            {
                "metadata": {
                    **meta,
                    "labels": {
                        "kubernetes.io/service-name": SERVICE,
                        "endpointslice.kubernetes.io/managed-by": "mcp-devcluster",
                    },
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [ADAPTER_POD_IP], "conditions": {"ready": True}}],
                "ports": [port],
            },
        ),
    ]


def _api_service(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE},
        "spec": {
            "group": "external.metrics.k8s.io",
            "version": "v1beta1",
            "service": {"namespace": namespace, "name": SERVICE, "port": 443},
            "insecureSkipTLSVerify": True,  # the adapter's certificate is self-signed (test harness)
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }


def _available(api: client.ApiClient) -> str:
    obj = client.CustomObjectsApi(api).get_cluster_custom_object(
        "apiregistration.k8s.io", "v1", "apiservices", API_SERVICE
    )
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Available":
            return f"{cond.get('status')} {cond.get('reason')}: {cond.get('message')}"
    return "no Available condition yet"


def _no_verify() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@contextlib.contextmanager
def external_metrics(
    state: ClusterState, namespace: str, log_dir: Path, timeout_s: float = 60
) -> Iterator[str]:
    """Serve the external metrics API until the block ends; yields the adapter's URL."""
    host = loopback_twin(ADAPTER_POD_IP, ipaddress.IPv4Network(state.pod_loopback))
    kubeconfig = Path(state.kubeconfig)
    argv = [sys.executable, "-m", "mcp_devcluster.metricsadapter", f"--kubeconfig={kubeconfig}"]
    argv += [f"--host={host}", f"--port={ADAPTER_PORT}", f"--pod-loopback={state.pod_loopback}"]
    proc = ManagedProcess("metrics-adapter", argv, log_dir / f"metrics-adapter-{time.monotonic_ns()}.log")
    api = api_client(kubeconfig)
    core, discovery = client.CoreV1Api(api), client.DiscoveryV1Api(api)
    custom = client.CustomObjectsApi(api)
    try:
        proc.start()
        url = f"https://{host}:{ADAPTER_PORT}"
        wait_until(
            proc, lambda: http_ok(f"{url}/healthz", context=_no_verify()), timeout_s=timeout_s, what="serving"
        )
        for kind, body in _objects(namespace):
            if kind == "service":
                core.create_namespaced_service(namespace, body)
            elif kind == "endpoints":
                core.create_namespaced_endpoints(namespace, body)
            else:
                discovery.create_namespaced_endpoint_slice(namespace, body)
        custom.create_cluster_custom_object(
            "apiregistration.k8s.io", "v1", "apiservices", _api_service(namespace)
        )
        wait_until(
            proc,
            lambda: _available(api).startswith("True"),
            timeout_s=timeout_s,
            what="an Available APIService",
        )
        yield url
    finally:
        with contextlib.suppress(ApiException):
            custom.delete_cluster_custom_object("apiregistration.k8s.io", "v1", "apiservices", API_SERVICE)
        for delete in (core.delete_namespaced_service, core.delete_namespaced_endpoints):
            with contextlib.suppress(ApiException):
                delete(SERVICE, namespace)
        with contextlib.suppress(ApiException):
            discovery.delete_namespaced_endpoint_slice(SERVICE, namespace)
        if proc.popen is not None:
            stop_pid(proc.popen.pid)
        api.close()
