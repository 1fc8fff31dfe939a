"""Services on the local nodes: the harness's service proxy routes a ClusterIP to the ready pods
of two zones, a deleted pod stops getting connections as soon as its endpoint goes, and a lost
zone leaves the other one serving. The pods are the reference server, one per zone."""

from __future__ import annotations

import http.client
import ipaddress
import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from mcp_devcluster import stack
from mcp_devcluster.cluster import ClusterState
from mcp_devcluster.nodespec import ZONE_LABEL
from mcp_devcluster.podnet import POD_NETWORK, loopback_twin

APP = "ref"
SERVICE_PORT = 8080
PRE_STOP_S = 3  # the pod keeps serving this long after deletion, as a preStop sleep makes it


def _manifests() -> str:
    container = {
        "name": "server",
        "image": "unused",
        "command": ["python", "-m", "mcp_refserver"],
        "args": ["--host", "$(POD_IP)", "--port", "8000", "--server-name", "$(POD_NAME)"],
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        ],
        "ports": [{"name": "http", "containerPort": 8000}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 1},
        "lifecycle": {"preStop": {"sleep": {"seconds": PRE_STOP_S}}},
    }
    spread = {
        "maxSkew": 1,
        "topologyKey": ZONE_LABEL,
        "whenUnsatisfiable": "DoNotSchedule",
        "nodeTaintsPolicy": "Honor",  # a cordoned zone is left out, as in a real cluster
        "labelSelector": {"matchLabels": {"app": APP}},
    }
    pod_spec = {
        "nodeSelector": {"mcp2026.io/local-runner": "true"},
        "terminationGracePeriodSeconds": PRE_STOP_S + 5,
        "topologySpreadConstraints": [spread],
        "containers": [container],
    }
    deployment = stack.deployment_body(APP, pod_spec)
    return yaml.safe_dump_all([deployment, stack.service_body(APP, SERVICE_PORT)])


@dataclass
class Served:
    kube: Any
    cluster: ClusterState
    core: client.CoreV1Api
    url: str  # http://ClusterIP:port

    def pods(self) -> list[client.V1Pod]:
        items = self.core.list_namespaced_pod(self.kube.namespace, label_selector=f"app={APP}").items
        return [p for p in items if p.metadata.deletion_timestamp is None]

    def route(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"{self.cluster.service_proxy}/routes", timeout=5) as resp:
            routes = json.loads(resp.read())
        return next(r for r in routes if r["service"] == f"{self.kube.namespace}/{APP}")

    def wait_backends(self, wanted: Any, timeout_s: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while True:
            route = self.route()
            if wanted(route["backends"]):
                return route
            assert time.monotonic() < deadline, f"route never settled: {route}"
            time.sleep(0.01)


def who(url: str) -> str:
    """The pod that answered (the reference server names itself after its pod)."""
    with urllib.request.urlopen(f"{url}/v2", timeout=5) as resp:
        name: str = json.loads(resp.read())["name"]
    return name


@dataclass
class Load:
    """Requests on fresh connections, one after another, on a thread: (start, end, pod or None)."""

    url: str
    results: list[tuple[float, float, str | None]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            began = time.time()
            try:
                name: str | None = who(self.url)
            except OSError:
                name = None
            self.results.append((began, time.time(), name))
            time.sleep(0.005)


@pytest.fixture
def served(kube: Any, cluster: ClusterState) -> Iterator[Served]:
    kube.apply(_manifests())
    assert kube.run("rollout", "status", f"deploy/{APP}", "--timeout=90s", check=False).returncode == 0
    api = config.new_client_from_config(config_file=str(kube.kubeconfig))
    core = client.CoreV1Api(api)
    svc = core.read_namespaced_service(APP, kube.namespace)
    served = Served(kube, cluster, core, f"http://{svc.spec.cluster_ip}:{SERVICE_PORT}")
    served.wait_backends(lambda b: len(b) == 2)
    try:
        yield served
    finally:
        api.close()


@pytest.fixture
def load(served: Served) -> Iterator[Load]:
    running = Load(served.url)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    try:
        yield running
    finally:
        running.stop.set()
        thread.join(timeout=10)


def test_cluster_ip_reaches_a_pod_in_each_zone(served: Served) -> None:
    pods = served.pods()
    zones = {
        served.core.read_node(p.spec.node_name).metadata.labels[ZONE_LABEL]: p.metadata.name for p in pods
    }
    assert set(zones) == {"zone-a", "zone-b"}
    # the pod IP the API shows is published by the endpointslice controller; the process
    # listens on its loopback twin, which the downward API's status.podIP gave it
    for pod in pods:
        assert ipaddress.ip_address(pod.status.pod_ip) in POD_NETWORK
        twin = loopback_twin(pod.status.pod_ip, ipaddress.IPv4Network(served.cluster.pod_loopback))
        assert who(f"http://{twin}:8000") == pod.metadata.name
    assert sorted(served.route()["backends"]) == sorted(f"{p.status.pod_ip}:8000" for p in pods)
    answered = [who(served.url) for _ in range(10)]
    assert set(answered) == set(zones.values())
    assert abs(answered.count(answered[0]) - 5) <= 1  # round robin over fresh connections


def _ask(conn: http.client.HTTPConnection) -> str:
    conn.request("GET", "/v2")
    name: str = json.loads(conn.getresponse().read())["name"]
    return name


def test_deleted_pod_stops_getting_connections_once_its_endpoint_goes(served: Served, load: Load) -> None:
    time.sleep(0.5)
    host, port = served.url.removeprefix("http://").split(":")
    kept = http.client.HTTPConnection(host, int(port), timeout=10)  # a keep-alive connection
    victim = next(p for p in served.pods() if p.metadata.name == _ask(kept))
    address = f"{victim.status.pod_ip}:8000"
    deleted_at = time.time()
    served.core.delete_namespaced_pod(victim.metadata.name, served.kube.namespace)
    route = served.wait_backends(lambda b: address not in b)
    withdrawn = route["changedAt"] - deleted_at
    print(f"\npod deletion -> proxy no longer routes to it: {withdrawn * 1000:.0f} ms")
    # a connection made before stays with its pod while the pod lives, and closes when it dies
    assert _ask(kept) == victim.metadata.name
    assert kept.sock is not None
    kept.sock.settimeout(PRE_STOP_S + 10)
    assert kept.sock.recv(1) == b""
    assert time.time() - deleted_at >= PRE_STOP_S
    kept.close()
    # the replacement joins once its readiness probe passes; by then the victim has stopped
    served.wait_backends(lambda b: len(b) == 2 and address not in b)
    time.sleep(PRE_STOP_S + 1)
    load.stop.set()

    results = list(load.results)
    failed = [r for r in results if r[2] is None]
    late = [r for r in results if r[0] > route["changedAt"] and r[2] == victim.metadata.name]
    print(
        f"requests: {len(results)}, failed: {len(failed)}, to the deleted pod after withdrawal: {len(late)}"
    )
    assert withdrawn < 5.0
    assert not late, late[:3]
    # the victim kept serving through its preStop sleep, so no client saw an error at all
    assert not failed, failed[:3]


def test_zone_outage_leaves_the_other_zone_serving(served: Served, load: Load) -> None:
    nodes = served.core.list_node(label_selector=f"{ZONE_LABEL}=zone-a,mcp2026.io/local-runner=true").items
    zone_b = {n.metadata.name for n in served.core.list_node(label_selector=f"{ZONE_LABEL}=zone-b").items}
    names = [n.metadata.name for n in nodes]
    try:
        for name in names:
            served.core.patch_node(name, {"spec": {"unschedulable": True}})
        began = time.time()
        for pod in served.pods():
            if pod.spec.node_name in names:
                eviction = client.V1Eviction(
                    metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=pod.metadata.namespace)
                )
                served.core.create_namespaced_pod_eviction(
                    pod.metadata.name, pod.metadata.namespace, eviction
                )

        def served_by_zone_b(backends: list[str]) -> bool:
            on_b = {f"{p.status.pod_ip}:8000" for p in served.pods() if p.spec.node_name in zone_b}
            return len(backends) == 2 and set(backends) <= on_b

        route = served.wait_backends(served_by_zone_b)
        print(f"\nzone-a evicted -> two ready endpoints in zone-b: {route['changedAt'] - began:.2f} s")
        load.stop.set()
        failed = [r for r in load.results if r[2] is None]
        print(f"requests during the outage: {len(load.results)}, failed: {len(failed)}")
        assert not failed, failed[:3]
        answered = {who(served.url) for _ in range(8)}
        on_b = {p.metadata.name for p in served.pods() if p.spec.node_name in zone_b}
        assert answered == on_b and len(on_b) == 2
    finally:
        for name in names:
            served.core.patch_node(name, {"spec": {"unschedulable": False}})
        _wait_untainted(served.core, names)


def _wait_untainted(core: client.CoreV1Api, names: list[str], timeout_s: float = 30) -> None:
    """Leave the nodes as later tests expect them: schedulable, the cordon's taint gone."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        taints = [t.key for n in names for t in core.read_node(n).spec.taints or []]
        if "node.kubernetes.io/unschedulable" not in taints:
            return
        time.sleep(0.1)
    raise AssertionError(f"nodes {names} still carry the unschedulable taint")
