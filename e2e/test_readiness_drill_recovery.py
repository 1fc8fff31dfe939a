"""Recovery times that are real: a drill through the real operator against the reference server
running as pods of a Deployment in two zones, behind the harness's service proxy (a ClusterIP
that routes to ready endpoints only), so a killed pod or a lost zone changes what the drill's
sentinel probe and load see, and the KPI board judges the measured recovery."""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from mcp_devcluster import stack
from mcp_devcluster.nodespec import ZONE_LABEL

pytestmark = pytest.mark.timing  # run under load by `make test-stress`

OPT_IN = "mcp2026.io/fault-injection=enabled"
APP = "ref"


def _serve(kube: Any, spread: bool) -> str:
    """The reference server as two pods (one per zone with ``spread``, else where the scheduler
    prefers, which is zone-a) behind a Service; returns the ClusterIP URL."""
    container = stack.refserver_container()
    pod_spec: dict[str, Any] = {
        "nodeSelector": {"mcp2026.io/local-runner": "true"},
        "terminationGracePeriodSeconds": 2,
        "containers": [container],
    }
    if not spread:
        # zone-a strongly preferred (not required: its pods must still reschedule to zone-b in an
        # outage); the standby taint alone is a soft preference the default spreading can outweigh
        pod_spec["affinity"] = {
            "nodeAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 100,
                        "preference": {
                            "matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": ["zone-a"]}]
                        },
                    }
                ]
            }
        }
    if spread:
        pod_spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE_LABEL,
                "whenUnsatisfiable": "DoNotSchedule",
                "nodeTaintsPolicy": "Honor",
                "labelSelector": {"matchLabels": {"app": APP}},
            }
        ]
    deployment = stack.deployment_body(APP, pod_spec)
    service = stack.service_body(APP, 8080)
    kube.run("label", "namespace", kube.namespace, OPT_IN)
    kube.apply(yaml.safe_dump_all([deployment, service]))
    assert kube.run("rollout", "status", f"deploy/{APP}", "--timeout=90s", check=False).returncode == 0
    api = config.new_client_from_config(config_file=str(kube.kubeconfig))
    try:
        ip = client.CoreV1Api(api).read_namespaced_service(APP, kube.namespace).spec.cluster_ip
    finally:
        api.close()
    return f"http://{ip}:8080"


def _drill(kube: Any, name: str, url: str, fault: dict[str, Any], kpis: dict[str, Any]) -> dict[str, Any]:
    spec = {
        "target": {"url": url},
        "checks": {"healthProbe": {"requests": 50, "minSuccessRatio": 0.9, "maxProberLagMs": 250}},
        "drill": {
            "stages": [{"name": "steady", "load": {"rate": 20, "durationSeconds": 14}, "faults": [fault]}],
            "faultPolicy": {"maxPods": 2, "maxNodes": 1},
            "kpis": {"healthSuccessRatio": 0.5, "recoveryWindowSeconds": 1.5, **kpis},
        },
    }
    kube.apply(stack.custom_resource("MCPReadiness", name, spec))
    waited = kube.wait(f"mcpreadiness/{name}", "condition=Complete", timeout_s=120)
    obj = kube.get("mcpreadiness", name)
    assert waited.returncode == 0, obj.get("status")
    return obj


def _kpi(obj: dict[str, Any], name: str) -> dict[str, Any]:
    return next(k for k in obj["status"]["kpis"] if k["name"] == name)


def _seconds(kpi: dict[str, Any]) -> float:
    return float(kpi["measured"].split(" s", 1)[0])


def test_a_target_that_does_not_survive_a_pod_kill_fails_on_recovery(kube: Any) -> None:
    url = _serve(kube, spread=True)
    kill_all = {
        "kind": "podKill",
        "atSeconds": 2,
        "evict": False,
        "pods": {"matchLabels": {"app": APP}, "mode": "all"},
    }
    obj = _drill(kube, "kill-all", url, kill_all, {"recoverySeconds": 0.5})
    recovery = _kpi(obj, "recoverySeconds")
    print(f"recovery after killing every pod: {recovery['measured']}")
    assert recovery["verdict"] == "Fail" and recovery["mark"] == "✗"
    assert _seconds(recovery) > 0.5 and "podKill" in recovery["evidence"]
    assert obj["status"]["verdict"] == "Fail" and stack.condition_of(obj)["status"] == "False"
    (fault,) = obj["status"]["faults"]
    assert fault["phase"] == "Reverted"


def test_a_zone_outage_that_recovers_slowly_is_a_warning_with_the_seconds(kube: Any) -> None:
    url = _serve(kube, spread=False)  # both pods in zone-a: losing it is an outage until zone-b serves
    nodes = kube.run(
        "get", "pods", "-l", f"app={APP}", "-o", "jsonpath={.items[*].spec.nodeName}"
    ).stdout.split()
    assert set(nodes) == {"mcp-local"}, nodes
    outage = {"kind": "zoneOutage", "zone": "zone-a", "atSeconds": 2, "holdSeconds": 10}
    obj = _drill(kube, "zone-a", url, outage, {"recoverySeconds": 30, "recoverySecondsWarn": 0.5})
    recovery = _kpi(obj, "recoverySeconds")
    print(f"recovery after losing zone-a: {recovery['measured']}")
    assert recovery["verdict"] == "Warn" and recovery["mark"] == "!", recovery
    assert 0.5 < _seconds(recovery) < 30
    (fault,) = obj["status"]["faults"]
    assert fault["phase"] == "Reverted"
    time.sleep(0.5)
    node = kube.run("get", "node", "mcp-local", "-o", "jsonpath={.spec.unschedulable}").stdout
    assert node in ("", "false")  # uncordoned, checked through the API
