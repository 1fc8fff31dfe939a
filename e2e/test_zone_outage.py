"""A zone outage whose nodes really go NotReady: a control plane of its own that runs the
node-lifecycle and taint-eviction controllers (``DevCluster(node_lifecycle=True)``; the session's
cluster runs neither), the reference server's Deployment spread over two zones behind its
Service, and a drill whose zoneOutage (``outage: nodesDown``) takes zone-a's node down: the
harness's kubelet, as the node's outage agent, stops posting status and freezes its pods. Then the
cluster acts as a real one does: the node goes NotReady and is tainted unreachable, its pod is
marked not ready (the Service stops sending to it) and evicted, a replacement starts in zone-b,
and the drill's sentinel measures the recovery end to end against the KPI (17 s). The revert
brings the node back and it is Ready again.

Run it on its own (``pytest e2e/test_zone_outage.py``): it starts a second control plane.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_devcluster import stack
from mcp_devcluster.cluster import NODE_GRACE_S, ClusterState

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "zone-drill"
ZONE_A_NODE = "mcp-local"
UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    with stack.own_cluster(
        tmp_path_factory.mktemp("zones"), REPO / "crds", nodes=[], node_lifecycle=True
    ) as state:
        yield state


@pytest.fixture(scope="module")
def operator(
    cluster: ClusterState, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[stack.OperatorProcess]:
    op = stack.start_operator(Path(cluster.kubeconfig), tmp_path_factory.mktemp("operator"))
    try:
        yield op
    finally:
        stack.stop(op.process)
        print(f"operator log: {op.process.log_path}")


def _kubectl(cluster: ClusterState, *args: str, **kw: Any) -> Any:
    return stack.kubectl(Path(cluster.kubeconfig), "-n", NAMESPACE, *args, **kw)


def _json(cluster: ClusterState, *args: str) -> Any:
    return json.loads(_kubectl(cluster, *args, "-o", "json").stdout)


def _spread_refserver(cluster: ClusterState) -> str:
    """manifests/refserver, one pod in each zone (a hard spread), behind its Service: its URL."""
    deployment = yaml.safe_load((REPO / "manifests" / "refserver" / "deployment.yaml").read_text())
    pod = deployment["spec"]["template"]["spec"]
    pod["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "refserver"}},
        }
    ]
    pod["tolerations"] = [{"key": "mcp2026.io/standby-zone", "operator": "Exists"}]
    _kubectl(cluster, "apply", "-f", "-", input_text=yaml.safe_dump(deployment))
    _kubectl(cluster, "apply", "-f", str(REPO / "manifests" / "refserver" / "service.yaml"))
    _kubectl(cluster, "rollout", "status", "deployment/refserver", "--timeout=120s")
    zones = {p["spec"]["nodeName"] for p in _json(cluster, "get", "pods")["items"]}
    assert zones == {"mcp-local", "mcp-local-b"}, zones
    service = _json(cluster, "get", "service", "refserver")
    return f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}"


def _gate(url: str) -> str:
    outage = {
        "kind": "zoneOutage",
        "zone": "zone-a",
        "outage": "nodesDown",
        "atSeconds": 2,
        "holdSeconds": 20,
    }
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"path": "/v2/health/ready", "requests": 100, "minSuccessRatio": 0.9}},
        "drill": {
            "kpis": {"healthSuccessRatio": 0.5, "recoverySeconds": 17},
            "faultPolicy": {"maxNodes": 1, "maxPods": 2},
            "stages": [
                {
                    "name": "outage",
                    "load": {
                        "rate": 20,
                        "durationSeconds": 30,
                        "windowSeconds": 2,
                        "path": "/v2/health/ready",
                    },
                    "faults": [outage],
                }
            ],
        },
    }
    return stack.custom_resource("MCPReadiness", "zone-outage", spec)


class NodeWatch:
    """What zone-a's node went through during the drill, sampled from the API every 0.25 s."""

    def __init__(self, cluster: ClusterState) -> None:
        self.cluster = cluster
        self.ready: list[tuple[float, str]] = []
        self.tainted = False
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(0.25):
            node = json.loads(
                stack.kubectl(Path(self.cluster.kubeconfig), "get", "node", ZONE_A_NODE, "-o", "json").stdout
            )
            ready = next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")
            if not self.ready or self.ready[-1][1] != ready:
                self.ready.append((time.time(), ready))
            self.tainted |= any(t["key"] == UNREACHABLE for t in node["spec"].get("taints") or [])


def test_a_zone_whose_nodes_go_down_is_recovered_by_the_cluster_within_the_kpi(
    cluster: ClusterState, operator: stack.OperatorProcess
) -> None:
    stack.kubectl(Path(cluster.kubeconfig), "create", "namespace", NAMESPACE)
    stack.kubectl(
        Path(cluster.kubeconfig), "label", "namespace", NAMESPACE, "mcp2026.io/fault-injection=enabled"
    )
    url = _spread_refserver(cluster)
    (zone_a_pod,) = [
        p for p in _json(cluster, "get", "pods")["items"] if p["spec"]["nodeName"] == ZONE_A_NODE
    ]
    watch = NodeWatch(cluster)
    watch.thread.start()
    try:
        _kubectl(cluster, "apply", "-f", "-", input_text=_gate(url))
        waited = _kubectl(
            cluster,
            "wait",
            "--for=condition=Complete",
            "mcpreadiness/zone-outage",
            "--timeout=240s",
            check=False,
        )
    finally:
        watch.stop.set()
        watch.thread.join()
    status = _json(cluster, "get", "mcpreadiness", "zone-outage")["status"]
    assert waited.returncode == 0, json.dumps(status, indent=1)
    (fault,) = status["faults"]
    assert (fault["kind"], fault["phase"]) == ("zoneOutage", "Reverted"), fault
    injected = _json(cluster, "get", "events", "--field-selector", "reason=FaultInjected")["items"]
    assert any("down: NotReady" in e["message"] for e in injected), [e["message"] for e in injected]
    # the cluster saw the node go: NotReady (Unknown: no status for the grace period), tainted
    # unreachable by the node-lifecycle controller, and Ready again after the revert
    states = [s for _, s in watch.ready]
    assert "Unknown" in states and states[-1] == "True", watch.ready
    assert watch.tainted
    went = next(t for t, s in watch.ready if s == "Unknown")
    print(f"zone-a NotReady at +{went - watch.ready[0][0]:.1f} s of the watch (grace {NODE_GRACE_S} s)")
    # its pod was evicted (taint-based, after the default tolerationSeconds) and replaced in zone-b
    pods = _json(cluster, "get", "pods")["items"]
    replaced = [p for p in pods if p["metadata"]["uid"] != zone_a_pod["metadata"]["uid"]]
    assert any(p["spec"]["nodeName"] == "mcp-local-b" for p in replaced), [
        p["spec"]["nodeName"] for p in pods
    ]
    # the drill measured the outage its clients saw, and the recovery, end to end
    kpis = {k["name"]: k for k in status["kpis"]}
    recovery = kpis["recoverySeconds"]
    print(f"zone outage (nodes down): recovery {recovery['measured']} (limit {recovery['threshold']})")
    assert recovery["verdict"] in ("Pass", "Warn", "Fail"), recovery  # measured, never "no data"
    assert recovery["verdict"] == "Pass", recovery
    node = json.loads(
        stack.kubectl(Path(cluster.kubeconfig), "get", "node", ZONE_A_NODE, "-o", "json").stdout
    )
    assert "mcp2026.io/outage" not in (node["metadata"].get("annotations") or {})
