"""The README's quick start as a user runs it: the reference server deployed from the repo's own
manifest (``manifests/refserver``), its Service's ClusterIP as the drill's target, the drill
sample applied and its verdict read back. The pods are the reference server on the harness's
process nodes; the ClusterIP reaches them through the harness's service proxy."""

from __future__ import annotations

import ipaddress
import json
import urllib.request
from pathlib import Path
from typing import Any

from mcp_devcluster import stack
from mcp_devcluster.cluster import ClusterState
from mcp_devcluster.podnet import loopback_twin

MANIFESTS = Path(__file__).resolve().parents[1] / "manifests" / "refserver"
COUNTER = "mcp_refserver_http_requests_total"


def _served(url: str) -> float:
    """Requests the reference server at ``url`` counted, read from its own /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        lines = resp.read().decode().splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(COUNTER + "{"))


def test_the_quick_start_drill_reaches_a_verdict_against_the_deployed_reference_server(
    kube: Any, sample: Any, cluster: ClusterState
) -> None:
    kube.run("apply", "-k", str(MANIFESTS))
    rolled = kube.run("rollout", "status", "deploy/refserver", "--timeout=120s", check=False)
    assert rolled.returncode == 0, rolled.stdout + rolled.stderr
    ip = kube.get("service", "refserver")["spec"]["clusterIP"]
    kube.apply(sample("mcpreadiness-drill.yaml", f"http://{ip}:8080"))

    waited = kube.wait("mcpreadiness/refserver-drill", "condition=Complete", timeout_s=180)
    obj = kube.get("mcpreadiness", "refserver-drill")
    status = obj["status"]
    assert waited.returncode == 0, json.dumps(status, indent=1)
    assert [s["phase"] for s in status["stages"]] == ["Done", "Done", "Done"]
    kpis = {k["name"]: k for k in status["kpis"]}
    assert kpis["healthSuccessRatio"]["verdict"] == "Pass", kpis
    ready = stack.condition_of(obj)
    saturated = (
        kpis["loadGenerator"]["verdict"] == "Inconclusive" and ready["reason"] == "LoadGeneratorSaturated"
    )
    assert ready["status"] == "True" or saturated, status["checks"]
    # the drill's load went through the Service to both deployed pods (each counts its own)
    pods = json.loads(kube.run("get", "pods", "-l", "app.kubernetes.io/name=refserver", "-o", "json").stdout)
    assert len(pods["items"]) == 2
    loopback = ipaddress.IPv4Network(cluster.pod_loopback)
    counts = [_served(f"http://{loopback_twin(p['status']['podIP'], loopback)}:8000") for p in pods["items"]]
    assert all(count > 50 for count in counts), counts
